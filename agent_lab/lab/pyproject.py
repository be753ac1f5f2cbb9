"""Reading the `[tool.agent-lab]` table of a project's `pyproject.toml`.

On Python 3.11+ the file is parsed with the standard library's `tomllib`. Python 3.10 has no TOML
parser, so this module carries a small, strict reader of exactly what the table needs: it steps over
the rest of the document (strings of all four kinds, arrays, inline tables, comments) only to find the
table, and inside it accepts `key = "string"`, `key = 'literal'` and arrays of such strings. Anything
else there (a number, a dotted key, an inline table, a multi-line string) is refused with the line and
a way out: use Python 3.11+ or the command-line flags. Both readers give the same table for every file
the small one accepts.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["TABLE", "TABLE_NAME", "ConfigError", "read_agent_lab_table", "read_table_subset"]

TABLE = ("tool", "agent-lab")
TABLE_NAME = "[tool.agent-lab]"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\", "e": "\x1b"}
_WAY_OUT = "Python 3.10 reads only strings and arrays of strings there; use Python 3.11+ or the command-line flags"


class ConfigError(ValueError):
    """A pyproject.toml that cannot give the settings; `str()` is one line starting with the file."""


def read_agent_lab_table(path: Path, *, where: str | None = None) -> dict[str, Any]:
    """The `[tool.agent-lab]` table of the TOML file at `path` ({} when there is no file or no table).

    `where` names the file in messages (default: `path`)."""
    where = where or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{where}: cannot read it ({error.strerror or type(error).__name__})") from None
    if sys.version_info < (3, 11):  # no tomllib
        return read_table_subset(text, where)
    tomllib: Any = importlib.import_module("tomllib")  # Python 3.11+

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: not valid TOML ({' '.join(str(error).split())})") from None
    table: Any = document
    for part in TABLE:
        table = table.get(part, {}) if isinstance(table, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: {TABLE_NAME} must be a table")
    return table


def read_table_subset(text: str, where: str) -> dict[str, Any]:
    """The `[tool.agent-lab]` table of `text`, read with the small reader (ConfigError otherwise)."""
    return _Reader(text, where).table()


class _Reader:
    """A cursor over the document; every method leaves it just after what it read."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text.replace("\r\n", "\n")
        self.where = where
        self.at = 0

    # -- the document ----------------------------------------------------------------------------

    def table(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        seen_table = False
        inside = False
        current: tuple[str, ...] = ()
        while True:
            self.skip_blank(newlines=True)
            if self.at >= len(self.text):
                return found
            if self.peek() == "[":
                array_of_tables = self.text.startswith("[[", self.at)
                self.at += 2 if array_of_tables else 1
                current = self.key(closing="]")
                self.expect("]]" if array_of_tables else "]")
                if current == TABLE:
                    if array_of_tables:
                        self.fail(f"{TABLE_NAME} must be a table, not an array of tables")
                    if seen_table:
                        self.fail(f"{TABLE_NAME} is defined twice")
                    seen_table = True
                inside = current == TABLE and not array_of_tables
            else:
                key = self.key(closing="=")
                self.expect("=")
                self.skip_blank()
                if inside:
                    self.read_entry(key, found)
                else:
                    if len(current) < len(TABLE) and (current + key)[: len(TABLE)] == TABLE:
                        self.fail(f"{TABLE_NAME} written as dotted keys or an inline table; {_WAY_OUT}, "
                                  f"or write it as a {TABLE_NAME} header")
                    self.skip_value(in_line=False)
            self.end_of_line()

    def read_entry(self, key: tuple[str, ...], found: dict[str, Any]) -> None:
        if len(key) != 1:
            self.fail(f"dotted key {'.'.join(key)!r} in {TABLE_NAME}; {_WAY_OUT}")
        if key[0] in found:
            self.fail(f"{key[0]!r} is given twice in {TABLE_NAME}")
        if self.peek() == "[":
            found[key[0]] = self.string_array()
        else:
            found[key[0]] = self.string(f"the value of {key[0]!r}")

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
            self.fail(f"{what} must be a string; {_WAY_OUT}")
        if self.text.startswith(quote * 3, self.at):
            if not allow_multiline:
                self.fail(f"{what} is a multi-line string; {_WAY_OUT}")
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
