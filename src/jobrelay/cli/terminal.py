"""Text that others wrote, made safe for the user's terminal. Pure.

Event messages, reasons, annotations and worker conditions come from tenants and
workers. Printed raw, an escape sequence in one can rewrite the user's screen,
set the window title or hide the text after it, and a bidi override can make one
name read as another (kubectl's CVE-2021-25743). Every line the table and
describe views print passes here: control and bidi characters are shown as
escapes, and a line is cut at a length no terminal needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# What a line may hold at most; the rest is cut with a mark saying how much.
LINE_LIMIT = 4096

# C0 controls (tab and newline too: a cell must stay one cell), DEL, C1 controls,
# and the bidi embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` with every unsafe character escaped, at most about ``limit`` characters."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit} more characters)"
    return _UNSAFE.sub(_escape, text)


def safe_lines(lines: Iterable[str], limit: int = LINE_LIMIT) -> Iterator[str]:
    """Each line made :func:`safe`."""
    for line in lines:
        yield safe(line, limit)
