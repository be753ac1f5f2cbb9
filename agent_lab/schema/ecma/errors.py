"""What goes wrong with an ECMA-262 pattern, and the limits past which one is refused."""

from __future__ import annotations

from typing import Optional, Tuple

__all__ = ["EcmaRegexError", "EcmaRegexUnsupported", "MAX_CODE_POINT", "MAX_GROUP_DEPTH", "MAX_NAME_REPEATS",
           "MAX_REPETITION", "Range"]

MAX_CODE_POINT = 0x10FFFF
MAX_REPETITION = 4_294_967_295
"""Largest repetition count Python's re accepts (its MAXREPEAT); larger ones are unsupported."""
MAX_NAME_REPEATS = 1000
"""Most groups sharing one name (ES2025); checking them is quadratic, so more are refused."""
MAX_GROUP_DEPTH = 64
"""Deepest nesting of groups translated; deeper patterns are refused, not recursed into."""

Range = Tuple[int, int]

class EcmaRegexError(ValueError):
    """The pattern is not a valid ECMA-262 (Unicode mode) regular expression.

    ``reason`` says what is wrong and ``position`` (a code-point index, or
    None) where; the message is built from them, so a caller that adds its
    own context can use the parts instead of repeating the message.
    """

    def __init__(self, reason: str, *, position: Optional[int] = None) -> None:
        self.reason = reason
        self.position = position
        super().__init__(self.describe())

    def describe(self) -> str:
        where = "" if self.position is None else f" at position {self.position}"
        return f"invalid ECMA-262 regular expression{where}: {self.reason}"


class EcmaRegexUnsupported(EcmaRegexError):
    """The pattern is valid ECMA-262 but cannot be run by Python's ``re``."""

    def describe(self) -> str:
        return f"valid ECMA-262 regular expression that Python's re cannot run: {self.reason}"
