"""JSON Lines files as the lab reads them (case files, model-eval task files): one JSON value per line.

Both kinds of file are read the same way, so they accept and refuse the same text: UTF-8 split at "\\n"
only, a bounded read, and strict JSON (no NaN or Infinity, no repeated key in one object, no number too
long or too large to read, no lone surrogate escape). Every problem is a `LineProblem` at its
`FILE:LINE`, never a traceback, so a CI log points straight at the line to fix.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..jsonvalue import pointer_join

__all__ = ["BYTE_ORDER_MARK", "LineProblem", "NotPlainJSON", "lone_surrogate_at", "read_lines", "read_plain_json"]

BYTE_ORDER_MARK = "\ufeff"  # some editors start UTF-8 files with one; RFC 8259 lets a parser ignore it
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # decoded JSON holds one only from an unpaired \\uD8xx escape


@dataclass(frozen=True)
class LineProblem:
    """One thing wrong with a file, at a line (1-based)."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def read_lines(path: str, *, kind: str, max_bytes: int, problems: list[LineProblem]) -> list[tuple[int, str]]:
    """The non-blank lines of the UTF-8 file at `path` with their numbers, split at "\\n" only.

    `str.splitlines()` would also break at U+2028, U+0085 and other separators that JSON allows raw
    inside a string, cutting a valid line in two. A trailing "\\r" (CRLF files) and a leading byte order
    mark are dropped. At most `max_bytes` are read (`--cases /dev/zero` must not eat the memory); a file
    that cannot be read is one problem naming it a `kind` file, and no lines.
    """
    def report(line: int, message: str) -> None:
        problems.append(LineProblem(path, line, message))

    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        report(1, f"no such {kind} file")
        return []
    except IsADirectoryError:
        report(1, f"a directory, not a {kind} file")
        return []
    except OSError as error:
        report(1, f"cannot read the {kind} file ({error.strerror or type(error).__name__})")
        return []
    if len(raw) > max_bytes:
        report(1, f"the {kind} file is larger than {max_bytes} bytes")
        return []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        report(raw[: error.start].count(b"\n") + 1, f"the {kind} file is not UTF-8 text")
        return []
    if text.startswith(BYTE_ORDER_MARK):
        text = text[len(BYTE_ORDER_MARK):]
    lines = (line[:-1] if line.endswith("\r") else line for line in text.split("\n"))
    return [(number, line) for number, line in enumerate(lines, start=1) if line.strip(" \t")]


class NotPlainJSON(ValueError):
    """A line whose text is JSON-like but not plain JSON; the message says why (never quoting a value)."""


def read_plain_json(text: str, *, max_depth: int, kind: str) -> Any:
    """`json.loads`, refusing what is not plain JSON and turning the parser's own limits into
    `NotPlainJSON` (a broken line is still `json.JSONDecodeError`, which carries its column)."""
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant,
                          parse_int=_read_int, parse_float=_read_float)
    except RecursionError:
        raise NotPlainJSON(f"JSON nested too deeply to read ({kind} allow {max_depth} levels)") from None


def lone_surrogate_at(value: Any, pointer: str = "") -> str | None:
    """The JSON Pointer of the first string (or member name) holding a lone surrogate, else None.

    Call it on a value whose nesting is already bounded (after schema validation)."""
    if not pointer and not _may_hold_lone_surrogate(value):
        return None
    if isinstance(value, str):
        return pointer if _LONE_SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = pointer if _LONE_SURROGATE.search(key) else lone_surrogate_at(item, pointer_join(pointer, key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate_at(item, pointer_join(pointer, index))
            if found is not None:
                return found
    return None


def _may_hold_lone_surrogate(value: Any) -> bool:
    """False when no string of `value` holds a lone surrogate: one pass of the C encoder over a whole
    case, instead of a walk that spells every member's pointer. True when it may (then the walk says where)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not plain JSON: the walk decides
        return True
    return _LONE_SURROGATE.search(text) is not None


def _read_int(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # longer than sys.get_int_max_str_digits() (Python 3.10.7+)
        raise NotPlainJSON("a number with too many digits to read") from None


def _read_float(digits: str) -> float:
    number = float(digits)
    if not math.isfinite(number):  # 1e400: valid JSON text, but no float holds it
        raise NotPlainJSON("a number too large to read")
    return number


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise NotPlainJSON(f"duplicate key {key!r} in one object")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise NotPlainJSON(f"{name} is not JSON")
