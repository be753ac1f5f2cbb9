"""Reading the `[tool.agent-lab]` table of a project's `pyproject.toml`.

On Python 3.11+ the file is parsed with the standard library's `tomllib`. Python 3.10 has no TOML
parser, so this module carries a small, strict reader of exactly what the tables need: it steps over
the rest of the document (strings of all four kinds, arrays, inline tables, comments) only to find the
table, and inside `[tool.agent-lab]` it accepts `key = "string"`, `key = 'literal'` and arrays of such
strings. Inside `[tool.agent-lab.lint]` it accepts the lint table's own keys, each of the kind the
caller names (`read_lint_table(kinds=...)`: an array of strings, a decimal integer, or a table of
strings or integers, written inline or as a `[tool.agent-lab.lint.KEY]` header). Anything else there (a
float, a boolean, a dotted key, an unknown key, a multi-line string) is refused with the line and a way
out: use Python 3.11+ or the command-line flags. Both readers give the same table for every file the
small one accepts.
"""

from __future__ import annotations

import enum
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "LINT_TABLE",
    "LINT_TABLE_NAME",
    "TABLE",
    "TABLE_NAME",
    "ConfigError",
    "TableKind",
    "read_agent_lab_table",
    "read_lint_table",
    "read_lint_subset",
    "read_table_subset",
]

TABLE = ("tool", "agent-lab")
TABLE_NAME = "[tool.agent-lab]"
LINT_TABLE = TABLE + ("lint",)
LINT_TABLE_NAME = "[tool.agent-lab.lint]"


class TableKind(str, enum.Enum):
    """What the small reader accepts as the value of one key of the lint table (callers may name a
    kind by its value, so the lint package needs no import of this module)."""

    STRINGS = "strings"
    INTEGER = "integer"
    STRING_TABLE = "string-table"
    INTEGER_OR_TABLE = "integer-or-table"

    @property
    def text(self) -> str:
        return {"strings": "an array of strings", "integer": "an integer", "string-table": "a table of strings",
                "integer-or-table": "an integer or a table of integers"}[self.value]


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)(?![0-9A-Za-z_.:-])")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\", "e": "\x1b"}
_WAY_OUT = ("Python 3.10 reads only strings, arrays of strings and the integer jobs there; use Python 3.11+ or the "
            "command-line flags")
_INTEGER_KEYS = ("jobs",)  # [tool.agent-lab] keys whose value is a decimal integer
_LINT_WAY_OUT = ("Python 3.10 reads only the documented keys there, each of its kind; use Python 3.11+ or the "
                 "command-line flags")


class ConfigError(ValueError):
    """A pyproject.toml that cannot give the settings; `str()` is one line starting with the file."""


def read_agent_lab_table(path: Path, *, where: str | None = None) -> dict[str, Any]:
    """The `[tool.agent-lab]` table of the TOML file at `path` ({} when there is no file or no table).

    `where` names the file in messages (default: `path`)."""
    where = where or str(path)
    text = _read_text(path, where)
    if text is None:
        return {}
    if sys.version_info < (3, 11):  # no tomllib
        return read_table_subset(text, where)
    return _tomllib_table(text, where, TABLE, TABLE_NAME)


def read_lint_table(path: Path, *, kinds: Mapping[str, str], where: str | None = None) -> dict[str, Any]:
    """The `[tool.agent-lab.lint]` table of the TOML file at `path` ({} when there is none).

    `kinds` names the table's keys and what each holds; on Python 3.10 the small reader refuses any
    other key or kind with FILE:LINE (on 3.11+ the caller checks the keys of what tomllib read)."""
    where = where or str(path)
    text = _read_text(path, where)
    if text is None:
        return {}
    if sys.version_info < (3, 11):  # no tomllib
        return read_lint_subset(text, where, kinds=kinds)
    return _tomllib_table(text, where, LINT_TABLE, LINT_TABLE_NAME)


def _read_text(path: Path, where: str) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{where}: cannot read it ({error.strerror or type(error).__name__})") from None


def _tomllib_table(text: str, where: str, path: tuple[str, ...], name: str) -> dict[str, Any]:
    tomllib: Any = importlib.import_module("tomllib")  # Python 3.11+

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: not valid TOML ({' '.join(str(error).split())})") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise ConfigError(f"{where}: not valid TOML (nested too deeply to read)") from None
    table: Any = document
    for part in path:
        table = table.get(part, {}) if isinstance(table, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: {name} must be a table")
    return table


def read_table_subset(text: str, where: str) -> dict[str, Any]:
    """The `[tool.agent-lab]` table of `text`, read with the small reader (ConfigError otherwise)."""
    return _Reader(text, where).table()


def read_lint_subset(text: str, where: str, *, kinds: Mapping[str, str]) -> dict[str, Any]:
    """The `[tool.agent-lab.lint]` table of `text`, read with the small reader: only the keys of
    `kinds`, each of its kind (ConfigError with FILE:LINE otherwise)."""
    return _Reader(text, where, target=LINT_TABLE, kinds=kinds).table()


class _Reader:
    """A cursor over the document; every method leaves it just after what it read.

    Without `kinds` it reads `[tool.agent-lab]` (strings and arrays of strings); with `kinds` it reads
    the `target` table (the lint table), each key as its kind says."""

    def __init__(self, text: str, where: str, *, target: tuple[str, ...] = TABLE,
                 kinds: Mapping[str, str] | None = None) -> None:
        self.text = text.replace("\r\n", "\n")
        self.where = where
        self.at = 0
        self.target = target
        self.target_name = "[" + ".".join(target) + "]"
        self.kinds = kinds
        self.way_out = _WAY_OUT if kinds is None else _LINT_WAY_OUT

    # -- the document ----------------------------------------------------------------------------

    def table(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        seen_table = False
        inside: dict[str, Any] | None = None  # the table the entries below the current header go to
        sub_table: str | None = None  # inside [target.KEY]: KEY
        current: tuple[str, ...] = ()
        target, name = self.target, self.target_name
        while True:
            self.skip_blank(newlines=True)
            if self.at >= len(self.text):
                return found
            if self.peek() == "[":
                array_of_tables = self.text.startswith("[[", self.at)
                self.at += 2 if array_of_tables else 1
                current = self.key(closing="]")
                self.expect("]]" if array_of_tables else "]")
                inside, sub_table = None, None
                if current == target:
                    if array_of_tables:
                        self.fail(f"{name} must be a table, not an array of tables")
                    if seen_table:
                        self.fail(f"{name} is defined twice")
                    seen_table = True
                    inside = found
                elif self.kinds is not None and current[: len(target)] == target:
                    inside, sub_table = self.sub_table(current[len(target):], array_of_tables, found), current[-1]
            else:
                key = self.key(closing="=")
                self.expect("=")
                self.skip_blank()
                if inside is None:
                    if len(current) < len(target) and (current + key)[: len(target)] == target:
                        self.fail(f"{name} written as dotted keys or an inline table; {self.way_out}, "
                                  f"or write it as a {name} header")
                    self.skip_value(in_line=False)
                elif sub_table is not None:
                    self.read_table_entry(key, inside, sub_table)
                elif self.kinds is not None:
                    self.read_kind_entry(key, inside)
                else:
                    self.read_entry(key, inside)
            self.end_of_line()

    def read_entry(self, key: tuple[str, ...], found: dict[str, Any]) -> None:
        if len(key) != 1:
            self.fail(f"dotted key {'.'.join(key)!r} in {TABLE_NAME}; {_WAY_OUT}")
        if key[0] in found:
            self.fail(f"{key[0]!r} is given twice in {TABLE_NAME}")
        if key[0] in _INTEGER_KEYS:
            found[key[0]] = self.integer(f"the value of {key[0]!r}", TableKind.INTEGER)
        elif self.peek() == "[":
            found[key[0]] = self.string_array()
        else:
            found[key[0]] = self.string(f"the value of {key[0]!r}")

    # -- the lint table: keys of known kinds ---------------------------------------------------------

    def kind_of(self, key: tuple[str, ...]) -> TableKind:
        assert self.kinds is not None
        if len(key) != 1:
            self.fail(f"dotted key {'.'.join(key)!r} in {self.target_name}; {_LINT_WAY_OUT}")
        kind = self.kinds.get(key[0])
        if kind is None:
            self.fail(f"unknown key {key[0]!r} in {self.target_name} (known: {', '.join(sorted(self.kinds))})")
        return TableKind(kind)

    def sub_table(self, rest: tuple[str, ...], array_of_tables: bool, found: dict[str, Any]) -> dict[str, Any]:
        """A `[target.KEY]` header: KEY must be a table-valued key, given once."""
        if len(rest) != 1 or array_of_tables:
            self.fail(f"[{'.'.join(self.target + rest)}] is not a table {self.target_name} has; {_LINT_WAY_OUT}")
        kind = self.kind_of(rest)
        if kind not in (TableKind.STRING_TABLE, TableKind.INTEGER_OR_TABLE):
            self.fail(f"{rest[0]!r} in {self.target_name} must be {kind.text}, not a table")
        if rest[0] in found:
            self.fail(f"{rest[0]!r} is given twice in {self.target_name}")
        table: dict[str, Any] = {}
        found[rest[0]] = table
        return table

    def read_kind_entry(self, key: tuple[str, ...], found: dict[str, Any]) -> None:
        kind = self.kind_of(key)
        name = key[0]
        if name in found:
            self.fail(f"{name!r} is given twice in {self.target_name}")
        what = f"the value of {name!r}"
        if kind is TableKind.STRINGS:
            if self.peek() != "[":
                self.fail(f"{what} must be {kind.text}; {_LINT_WAY_OUT}")
            found[name] = self.string_array()
        elif kind is TableKind.INTEGER or (kind is TableKind.INTEGER_OR_TABLE and self.peek() != "{"):
            found[name] = self.integer(what, kind)
        else:
            found[name] = self.inline_table(name, kind)

    def read_table_entry(self, key: tuple[str, ...], table: dict[str, Any], owner: str) -> None:
        """`KEY = value` under a `[target.OWNER]` header."""
        if len(key) != 1:
            self.fail(f"dotted key {'.'.join(key)!r} in [{'.'.join(self.target)}.{owner}]; {_LINT_WAY_OUT}")
        if key[0] in table:
            self.fail(f"{key[0]!r} is given twice in [{'.'.join(self.target)}.{owner}]")
        table[key[0]] = self.table_value(owner, key[0])

    def table_value(self, owner: str, key: str) -> Any:
        assert self.kinds is not None
        what = f"the value of {owner}.{key}"
        if TableKind(self.kinds[owner]) is TableKind.STRING_TABLE:
            return self.string(what)
        return self.integer(what, TableKind.INTEGER)

    def inline_table(self, owner: str, kind: TableKind) -> dict[str, Any]:
        """`{ key = value, ... }` on one line, each value of the table's kind."""
        if self.peek() != "{":
            self.fail(f"the value of {owner!r} must be {kind.text}; {_LINT_WAY_OUT}")
        self.at += 1
        table: dict[str, Any] = {}
        self.skip_blank()
        if self.peek() == "}":
            self.at += 1
            return table
        while True:
            if self.peek() in ("", "\n", "#"):
                self.fail(f"the inline table of {owner!r} must end on its line (with '}}')")
            key = self.key(closing="=")
            self.expect("=")
            self.skip_blank()
            if len(key) != 1:
                self.fail(f"dotted key {'.'.join(key)!r} in {owner}; {_LINT_WAY_OUT}")
            if key[0] in table:
                self.fail(f"{key[0]!r} is given twice in {owner}")
            table[key[0]] = self.table_value(owner, key[0])
            self.skip_blank()
            if self.peek() == ",":
                self.at += 1
                self.skip_blank()
            elif self.peek() == "}":
                self.at += 1
                return table
            else:
                self.fail(f"expected ',' or '}}' in the inline table of {owner!r}")

    def integer(self, what: str, kind: TableKind) -> int:
        """A decimal integer (`8000`, `8_000`, `-1`); TOML's hex, octal and binary forms are refused."""
        found = _INTEGER.match(self.text, self.at)
        if found is None:
            self.fail(f"{what} must be {kind.text} (decimal); {_LINT_WAY_OUT}")
        assert found is not None
        self.at = found.end()
        return int(found.group().replace("_", ""))

    # -- pieces ----------------------------------------------------------------------------------

    def key(self, *, closing: str) -> tuple[str, ...]:
        """A dotted key: bare or quoted parts separated by dots, up to `closing`."""
        parts = []
        while True:
            self.skip_blank()
            char = self.peek()
            if char in ('"', "'"):
                parts.append(self.string("a key", allow_multiline=False))
            else:
                found = _BARE_KEY.match(self.text, self.at)
                if found is None:
                    self.fail(f"expected a key before {closing!r}")
                assert found is not None
                parts.append(found.group())
                self.at = found.end()
            self.skip_blank()
            if self.peek() != ".":
                return tuple(parts)
            self.at += 1

    def string(self, what: str, *, allow_multiline: bool = False) -> str:
        quote = self.peek()
        if quote not in ('"', "'"):
            self.fail(f"{what} must be a string; {self.way_out}")
        if self.text.startswith(quote * 3, self.at):
            if not allow_multiline:
                self.fail(f"{what} is a multi-line string; {self.way_out}")
            return self.multiline_string(quote)
        self.at += 1
        pieces: list[str] = []
        while True:
            char = self.peek()
            if char == "" or char == "\n":
                self.fail(f"{what} is a string that does not end on its line")
            self.at += 1
            if char == quote:
                return "".join(pieces)
            if char == "\\" and quote == '"':
                pieces.append(self.escape())
            elif char < " " and char != "\t" or char == "\x7f":
                self.fail(f"{what} holds a control character; write it as an escape")
            else:
                pieces.append(char)

    def escape(self) -> str:
        char = self.peek()
        self.at += 1
        if char in _ESCAPES:
            return _ESCAPES[char]
        if char in ("u", "U"):
            digits = self.text[self.at: self.at + (4 if char == "u" else 8)]
            if len(digits) not in (4, 8) or not all(c in "0123456789abcdefABCDEF" for c in digits):
                self.fail("a \\u escape needs 4 hex digits (\\U: 8)")
            self.at += len(digits)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                self.fail("an escape that is not a Unicode scalar value")
            return chr(code)
        self.fail(f"an unknown escape \\{char}")
        return ""

    def multiline_string(self, quote: str) -> str:
        """Steps over a multi-line string (only outside the table: its value is never used)."""
        self.at += 3
        while True:
            end = self.text.find(quote * 3, self.at)
            if end < 0:
                self.fail("a multi-line string that never ends")
            backslashes = 0
            while quote == '"' and end - backslashes - 1 >= self.at and self.text[end - backslashes - 1] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                self.at = end + 3
                while self.peek() == quote:  # up to two quotes may end the content
                    self.at += 1
                return ""
            self.at = end + 1

    def string_array(self) -> list[str]:
        self.at += 1
        items: list[str] = []
        while True:
            self.skip_blank(newlines=True)
            if self.peek() == "]":
                self.at += 1
                return items
            items.append(self.string("each item of the array"))
            self.skip_blank(newlines=True)
            if self.peek() == ",":
                self.at += 1
            elif self.peek() != "]":
                self.fail("expected ',' or ']' in the array")

    def skip_value(self, *, in_line: bool) -> None:
        """Steps over any TOML value (outside the table, where only its extent matters)."""
        char = self.peek()
        if char in ('"', "'"):
            self.string("a string", allow_multiline=True)
        elif char == "[":
            self.at += 1
            while True:
                self.skip_blank(newlines=True)
                if self.peek() == "]":
                    self.at += 1
                    return
                self.skip_value(in_line=True)
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.at += 1
                elif self.peek() != "]":
                    self.fail("expected ',' or ']' in an array")
        elif char == "{":
            self.at += 1
            while True:
                self.skip_blank(newlines=True)
                if self.peek() == "}":
                    self.at += 1
                    return
                self.key(closing="=")
                self.expect("=")
                self.skip_blank()
                self.skip_value(in_line=True)
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.at += 1
                elif self.peek() != "}":
                    self.fail("expected ',' or '}' in an inline table")
        else:  # a number, a boolean or a date-time: up to the end of the value
            stops = ",]}#\n" if in_line else "#\n"
            start = self.at
            while self.peek() not in ("", *stops):
                self.at += 1
            if self.at == start:
                self.fail("expected a value")
            if not in_line:  # a date-time may hold a space; trailing blanks are not part of the value
                while self.at > start and self.text[self.at - 1] in " \t":
                    self.at -= 1

    def skip_blank(self, *, newlines: bool = False) -> None:
        """Spaces and tabs (and, with `newlines`, line breaks and comments)."""
        while self.at < len(self.text):
            char = self.text[self.at]
            if char in " \t":
                self.at += 1
            elif newlines and char == "\n":
                self.at += 1
            elif newlines and char == "#":
                self.skip_comment()
            else:
                return

    def skip_comment(self) -> None:
        end = self.text.find("\n", self.at)
        self.at = len(self.text) if end < 0 else end

    def end_of_line(self) -> None:
        self.skip_blank()
        if self.peek() == "#":
            self.skip_comment()
        if self.peek() not in ("", "\n"):
            self.fail("unexpected text after a value")

    def expect(self, token: str) -> None:
        self.skip_blank()
        if not self.text.startswith(token, self.at):
            self.fail(f"expected {token!r}")
        self.at += len(token)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def fail(self, message: str) -> None:
        line = self.text.count("\n", 0, self.at) + 1
        raise ConfigError(f"{self.where}:{line}: {message}")
