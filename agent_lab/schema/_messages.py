"""Violation messages: one plain sentence that names the field and the rule, never the value.

Tool arguments can carry secrets, so a message is built only from the instance path (field names) and
the schema (the constraint); the offending value itself never appears.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

_MAX_LISTED_VALUES = 12


def subject(instance_path: str) -> str:
    """Name the field a violation is about: 'priority', 'items/0/name', or 'value' for the root."""
    if instance_path == "":
        return "value"
    return "'" + instance_path[1:] + "'"


def sentence(instance_path: str, phrase: str) -> str:
    """Join the field name and a predicate phrase into one sentence."""
    return f"{subject(instance_path)} {phrase}"


def show(value: Any) -> str:
    """Render a schema value compactly (strings bare, everything else as JSON)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def show_list(values: Iterable[Any]) -> str:
    items = list(values)
    shown = ", ".join(show(item) for item in items[:_MAX_LISTED_VALUES])
    if len(items) > _MAX_LISTED_VALUES:
        shown += f", ... ({len(items)} in all)"
    return shown


def show_number(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


_PLURALS = {"property": "properties"}


def plural(count: int, word: str) -> str:
    """"1 item", "2 items", "3 properties"."""
    return f"{count} {word}" if count == 1 else f"{count} {_PLURALS.get(word, word + 's')}"
