"""Runnable example suites (``examples/convfinqa`` first); importable from the repository root."""
