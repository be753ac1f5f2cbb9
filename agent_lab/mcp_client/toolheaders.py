"""`Mcp-Param-*` headers: 2026-07-28 lets a tool mark input properties with `x-mcp-header: NAME`, and a
client sending a call over HTTP mirrors each such argument in the header `Mcp-Param-NAME`, so gateways
can route without reading the body. Only annotations the revision allows are honoured: on a property
reached from the root through `properties` alone, naming an RFC 9110 token, on a string, integer or
boolean property, each name once (case-insensitively). Others are ignored: no header is better than a
wrong one, and the server checks what it requires.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["param_headers", "parameter_header_map"]

ANNOTATION = "x-mcp-header"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}")
_SCALAR_TYPES = frozenset({"string", "integer", "boolean"})
MAX_HEADER_DEPTH = 8


def parameter_header_map(schema: Any) -> dict[tuple[str, ...], str]:
    """{property path: header token} for the valid `x-mcp-header` annotations of an input schema."""
    found: dict[tuple[str, ...], str] = {}
    seen: set[str] = set()

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, Mapping) or len(path) > MAX_HEADER_DEPTH:
            return
        token = node.get(ANNOTATION)
        if path and isinstance(token, str) and _TOKEN.fullmatch(token) and node.get("type") in _SCALAR_TYPES \
                and token.lower() not in seen:
            seen.add(token.lower())
            found[path] = token
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, child in list(properties.items())[:1000]:
                if isinstance(name, str):
                    walk(child, path + (name,))

    walk(schema, ())
    return found


def param_headers(header_map: Mapping[tuple[str, ...], str], arguments: Mapping[str, Any]) -> dict[str, str]:
    """The `Mcp-Param-*` headers of one call's arguments (values are wrapped by the transport when a
    header cannot carry them as they are)."""
    headers: dict[str, str] = {}
    for path, token in header_map.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, bool):
            headers[f"Mcp-Param-{token}"] = "true" if value else "false"
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            text = str(value) if not isinstance(value, int) or abs(value) < 10**30 else None
            if text is not None:
                headers[f"Mcp-Param-{token}"] = text
    return headers
