"""MkDocs hook of the documentation site (``hooks:`` in mkdocs.yml; not copied to the site).

The pages are written to read on GitHub too, and Python-Markdown differs from GitHub's
Markdown in two places the pages use; this hook makes the site render them as GitHub
does, when the site is built, and changes nothing else:

- GitHub renders the Markdown inside a raw ``<details>`` block (the pull-request comment
  that ``reports/summary-md.md`` shows as GitHub renders it); Python-Markdown only with
  ``md_in_html`` and a ``markdown`` attribute, which the page cannot carry without
  becoming unlike the comment.
- In a table, GitHub needs a ``|`` inside a code span written ``\\|`` and shows ``|``;
  Python-Markdown needs no escape there and would show the backslash.
"""

from __future__ import annotations

import re

DETAILS = re.compile(r"^<details>$", re.M)
TABLE_ROW = re.compile(r"^\|.*\|[ \t]*$", re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _unescape_pipes(row: re.Match[str]) -> str:
    return CODE_SPAN.sub(lambda code: code[0].replace("\\|", "|"), row[0])


def on_page_markdown(markdown: str, **_: object) -> str:
    markdown = DETAILS.sub('<details markdown="1">', markdown)
    return TABLE_ROW.sub(_unescape_pipes, markdown)
