"""Exit codes (pytest-like, one meaning each); see the README's "Command line".

==  =====================================================================
0   every selected test case passed
1   at least one test case failed
2   configuration or usage error, detected before any agent was called
3   the run could not complete (interrupted, fatal backend error, internal
    error); whatever finished is still in the reports
==  =====================================================================
"""

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3
