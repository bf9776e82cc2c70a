"""Untrusted text made inert for each output (pure; imports nothing of the package).

Agent replies, tool arguments, suite content and error messages reach every
report, the console, the PR comment and the workflow log. Before they do:

- :func:`strip_control`: ANSI escape sequences and control characters removed
  (tab and newline kept), so nothing rewrites a terminal or a log line;
- :func:`clean`: that, with CR LF -> LF and lone surrogates (an agent's broken
  JSON escapes, which UTF-8 cannot encode) -> U+FFFD; :func:`xml_clean` also
  drops what XML 1.0 forbids; :func:`cut` bounds a text and says how much went;
- :func:`md_text`: Markdown and HTML escaping for ``summary.md`` (see
  :mod:`multiturn_eval.reports.markdown` for the rules it keeps).

Low in the package on purpose: :mod:`multiturn_eval.secrets` needs
:func:`md_text` to know the form a secret takes in the comment, and the
renderers need :mod:`~multiturn_eval.secrets`.
"""

from __future__ import annotations

import re

# escape sequences first (CSI such as colours, OSC such as window titles), so they go
# whole rather than leaving "[31m" behind once the ESC character alone is removed
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (keeps tab and newline)."""
    return _CONTROL.sub("", text)


# Lone surrogates (an agent's broken JSON escapes) cannot be written as UTF-8;
# XML 1.0 also forbids U+FFFE and U+FFFF (and the controls strip_control removes).
_SURROGATES = re.compile("[\ud800-\udfff]")
_XML_FORBIDDEN = re.compile("[\ufffe\uffff]")


def clean(text: object) -> str:
    """Text safe to show: ANSI escapes and control characters removed, CR LF -> LF,
    lone surrogates replaced by U+FFFD."""
    value = text if isinstance(text, str) else str(text)
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    if not value.isascii():
        value = _SURROGATES.sub("\ufffd", value)
    return strip_control(value)


def xml_clean(text: object) -> str:
    """:func:`clean`, then the characters XML 1.0 cannot carry removed."""
    return _XML_FORBIDDEN.sub("", clean(text))


def cut(text: str, limit: int) -> tuple[str, int]:
    """(the first ``limit`` characters, how many were cut off)."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


# --------------------------------------------------------------------------- Markdown

_ZWSP = "\u200b"
_DEFUSE = re.compile(r"@|#(?=[0-9])|\b[Gg][Hh]-(?=[0-9])|://|\b[Ww][Ww][Ww](?=\.)")
_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\\": "&#92;",
        "`": "&#96;",
        "*": "&#42;",
        "_": "&#95;",
        "[": "&#91;",
        "]": "&#93;",
        "|": "&#124;",
        "~": "&#126;",
        "$": "&#36;",
        "\t": " ",
        "\n": "<br>",
        "\u2028": "<br>",
        "\u2029": "<br>",
        # bidi embeddings, overrides and isolates could reorder the rest of a line
        **dict.fromkeys(
            ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068"],
            None,
        ),
        "\u2069": None,
    }
)


def _defuse(match: re.Match[str]) -> str:
    text = match.group()
    if text == "://":
        return ":" + _ZWSP + "//"
    return text + _ZWSP


def md_text(text: object, limit: int | None = None, *, where: str = "report.html") -> str:
    """Untrusted text -> inert Markdown/HTML text for a table cell or ``<summary>``."""
    raw = text if isinstance(text, str) else str(text)
    if limit is not None and len(raw) > 2 * limit + 256:
        # clean only what can be shown (a 100 KB reply in 2,000 failures adds up);
        # the count left out is then approximate by the control characters it held
        value, _ = cut(clean(raw[: 2 * limit + 256]), limit)
        left = len(raw) - len(value)
    else:
        value = clean(raw)
        value, left = cut(value, limit) if limit is not None else (value, 0)
    escaped = _DEFUSE.sub(_defuse, value).translate(_ESCAPES)
    if left:
        escaped += f" <i>… [{left:,} more characters cut; the whole text is in {where}]</i>"
    return escaped


def md_code(text: object, limit: int | None = None) -> str:
    """A file path or name in monospace, escaped like any other text (never a code span)."""
    return f"<code>{md_text(text, limit)}</code>"
