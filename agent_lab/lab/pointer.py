"""JSON Pointer look-ups (RFC 6901) into results, for case checks and call-to-call references."""

from __future__ import annotations

from typing import Any

__all__ = ["MISSING", "resolve_pointer"]


class _Missing:
    """The value at a pointer that leads nowhere (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at `pointer` in `document`, or MISSING when the path does not exist."""
    if pointer == "":
        return document
    current = document
    for raw_token in pointer[1:].split("/"):
        token = raw_token.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list) and token.isdigit() and int(token) < len(current) and (
            token == "0" or not token.startswith("0")
        ):
            current = current[int(token)]
        else:
            return MISSING
    return current
