"""The one constraint language of tasks: a value is `exact`, `one_of` several, valid against a JSON
`schema`, or `present` (true) / absent (false). A match is a set of constraints keyed by JSON Pointer
into a record (a call's arguments, an effect); it holds when every constraint holds."""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping

from ..calls import ToolCall
from ..jsonvalue import json_equal
from ..lab.pointer import MISSING, resolve_pointer
from ..schema import Validator

__all__ = ["call_matches", "record_matches", "value_matches"]


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Validator:
    return Validator(json.loads(schema_text))


def value_matches(constraint: Mapping[str, Any], value: Any) -> bool:
    if "present" in constraint:
        return (value is not MISSING) == bool(constraint["present"])
    if value is MISSING:
        return False
    if "exact" in constraint:
        return json_equal(constraint["exact"], value)
    if "one_of" in constraint:
        return any(json_equal(option, value) for option in constraint["one_of"])
    if "schema" in constraint:
        return _validator(json.dumps(constraint["schema"], sort_keys=True)).is_valid(value)
    return False


def record_matches(match: Mapping[str, Any], record: Any) -> bool:
    return all(value_matches(constraint, resolve_pointer(record, pointer)) for pointer, constraint in match.items())


def call_matches(match: Mapping[str, Any], call: ToolCall, outcome: str | None) -> bool:
    """A call matches when its tool is named, its arguments are JSON that fit, and (when the match says
    so) it ended with that outcome; `"any"` accepts every outcome, a proposal refused included."""
    if call.name != match["tool"] or not isinstance(call.arguments, (dict, list)):
        return False
    if not record_matches(match.get("arguments", {}), call.arguments):
        return False
    wanted = match.get("outcome", "any")
    return wanted == "any" or outcome == wanted
