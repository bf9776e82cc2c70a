"""Keeping secrets and hostile control characters out of everything written."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

REDACTED = "***"

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\x1b\[[0-?]*[ -/]*[@-~]")


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

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (keeps tab and newline)."""
    return _CONTROL.sub("", text)
