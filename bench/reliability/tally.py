"""What every reliability harness counts per row: the tries, and each way a try went wrong."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True)
class Tally:
    tried: int = 0
    tracebacks: int = 0
    """Tries whose output held a Python traceback."""
    hangs: int = 0
    """Tries killed after their deadline."""
    wrong_exit: int = 0
    """Tries that ended with an exit code the rules do not give them."""
    lost: int = 0
    """Test cases (or their results) missing from the reports."""

    def faults(self) -> int:
        return self.tracebacks + self.hangs + self.wrong_exit + self.lost
