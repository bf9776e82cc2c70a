"""Keeping secrets and hostile control characters out of everything written."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

REDACTED = "***"

# escape sequences first (CSI such as colours, OSC such as window titles), so they go
# whole rather than leaving "[31m" behind once the ESC character alone is removed
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)


class Redactor:
    """Replaces every known secret (and its JSON-escaped form) with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms.add(secret)
                forms.add(json.dumps(secret)[1:-1])
        # longest first, so a secret containing another is replaced whole
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
            if forms
            else None
        )

    @property
    def active(self) -> bool:
        """True when there is any secret to redact."""
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (keeps tab and newline)."""
    return _CONTROL.sub("", text)
