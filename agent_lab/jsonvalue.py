"""The JSON data model, shared by every part of agent-lab.

Python's own types do not line up with JSON's: `True == 1`, `1.0` is a float although JSON calls it an
integer, and tuples, sets, bytes, NaN or non-string keys have no JSON form at all. These helpers give one
answer everywhere (the validator, fingerprints, redaction) so that `True` never counts as `1` in one
place and as a boolean in another.
"""

from __future__ import annotations

import json
import json.encoder
import math
from typing import Any, Callable, Optional, Tuple

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "EXACT_FLOAT_RANGE",
    "check_json_value",
    "compact_json_encoder",
    "indented_json",
    "compact_json_writer",
    "escape_pointer_token",
    "find_non_json",
    "json_equal",
    "json_number",
    "json_type",
    "pointer_join",
]

DEFAULT_MAX_DEPTH = 64
"""Levels of array/object nesting accepted by `check_json_value` when no limit is given."""

_EXACT_TYPES = {
    type(None): "null",
    bool: "boolean",
    str: "string",
    int: "integer",
    list: "array",
    dict: "object",
}


def compact_json_writer(*, sort_keys: bool) -> Callable[[Any], str]:
    """A function writing a value as compact JSON text (separators `,` and `:`, non-ASCII as itself,
    no NaN or Infinity: ValueError), optionally with sorted keys.

    `json.JSONEncoder.encode` builds a new C encoder on every call, a good part of its cost for the
    small values a tool call carries; this builds it once. The C encoder is made without a table of
    containers being written (a `JSONEncoder` keeps one per call to find cycles; one shared between
    threads would see the other threads' containers): a cyclic value runs into the recursion limit
    instead, RecursionError. Where the C encoder is missing, a `JSONEncoder` does the work."""
    write = compact_json_encoder(sort_keys=sort_keys)

    def compact_json(value: Any) -> str:
        return "".join(write(value, 0))

    return compact_json


def compact_json_encoder(*, sort_keys: bool) -> Callable[[Any, int], Any]:
    """`compact_json_writer`'s encoder itself: `encode(value, 0)` gives the text's pieces, which
    `"".join` makes the text (for a caller on a hot path, one Python call less)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - e.g. an interpreter without the _json accelerator
        encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return lambda value, _: (encoder.encode(value),)
    encode: Callable[[Any, int], Any] = make(None, None, json.encoder.encode_basestring, None, ":", ",", sort_keys,
                                             False, False)
    return encode


def json_type(value: object) -> Optional[str]:
    """Return the JSON type name of `value`, or None when it is not a JSON value.

    bool is "boolean" (never a number); an int, or a finite float with no fractional part, is
    "integer"; other finite floats are "number"; NaN and the infinities are not JSON.
    Subclasses of str, int, float, list and dict count as their base type (json.dumps writes them so).
    """
    kind = type(value)
    name = _EXACT_TYPES.get(kind)
    if name is not None:
        return name
    if kind is float:
        return _float_type(value)  # type: ignore[arg-type]
    return _subclass_type(value)


def _float_type(value: float) -> Optional[str]:
    if not math.isfinite(value):
        return None
    return "integer" if value.is_integer() else "number"


def _subclass_type(value: object) -> Optional[str]:
    # By type(), never isinstance: that asks an object for its own `__class__`, which can be any code.
    kind = type(value)
    if issubclass(kind, bool):
        return "boolean"
    if issubclass(kind, str):
        return "string"
    if issubclass(kind, int):
        return "integer"
    if issubclass(kind, float):
        return _float_type(value)  # type: ignore[arg-type]
    if issubclass(kind, list):
        return "array"
    if issubclass(kind, dict):
        return "object"
    return None


EXACT_FLOAT_RANGE = 2**53
"""Floats of smaller magnitude compare with any int as the decimals they are written as; see `json_number`."""


def json_number(value: Any) -> Any:
    """A number as JSON compares it: the decimal it is written as. Use it where a float of magnitude
    2**53 or more may meet an int (below that, Python's own comparisons already agree).

    JSON has one number type; Python's json gives an int for `100000000000000000000000` and a float
    for `1e23`, whose binary value is 99999999999999991611392, so `1e23 == 10**23` is False in
    Python. A float stands for the shortest decimal that reads back as it (its repr, what json.dumps
    writes and what a parser read it from), so a finite float of magnitude 2**53 or more becomes the
    int that decimal is (every such float's shortest decimal is an integer); ints, smaller floats and
    anything else are returned as they are. Two floats compare the same either way (equal floats
    have one repr; the order of their reprs is theirs); an int and a float below 2**53 too (the
    float is exact, or no int lies between its binary value and its repr). A float subclass is read
    as a float, never asked to compare or spell itself.
    """
    if issubclass(type(value), float):
        plain = float.__float__(value)  # (a subclass's own comparisons are never asked)
        if (plain >= EXACT_FLOAT_RANGE or plain <= -EXACT_FLOAT_RANGE) and plain - plain == 0.0:  # not inf
            from decimal import Decimal  # only for these large floats

            return int(Decimal(float.__repr__(plain)))
    return value


def json_equal(left: object, right: object) -> bool:
    """JSON equality: 1 == 1.0, True != 1, 1e23 == 10**23 (see `json_number`), arrays and objects
    compared deeply."""
    if left is right:
        return True
    left_type, right_type = json_type(left), json_type(right)
    if left_type in ("integer", "number") and right_type in ("integer", "number"):
        if left_type == "integer" and right_type == "integer" and issubclass(type(left), float) \
                is not issubclass(type(right), float):
            return json_number(left) == json_number(right)  # an int and an integral float: 1e23 vs 10**23
        return left == right
    if left_type != right_type or left_type is None:
        return False
    if left_type == "array":
        return len(left) == len(right) and all(  # type: ignore[arg-type]
            json_equal(a, b) for a, b in zip(left, right)  # type: ignore[call-overload]
        )
    if left_type == "object":
        if len(left) != len(right):  # type: ignore[arg-type]
            return False
        for key, item in left.items():  # type: ignore[attr-defined]
            if key not in right or not json_equal(item, right[key]):  # type: ignore[operator,index]
                return False
        return True
    return left == right


def escape_pointer_token(token: object) -> str:
    """Escape one JSON Pointer reference token (RFC 6901: ~ becomes ~0, / becomes ~1)."""
    text = str(token)
    if "~" in text or "/" in text:
        text = text.replace("~", "~0").replace("/", "~1")
    return text


def pointer_join(pointer: str, token: object) -> str:
    """Append one reference token to a JSON Pointer."""
    return pointer + "/" + escape_pointer_token(token)


def check_json_value(value: object, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Optional[str]:
    """Return None when `value` is plain JSON, else one sentence naming the first bad place.

    The sentence never contains the value itself (it could be a secret): only its JSON Pointer and
    the Python type that has no JSON form. Nesting deeper than `max_depth` is refused too, so callers
    that recurse over the value afterwards cannot hit Python's recursion limit.
    """
    found = find_non_json(value, max_depth=max_depth)
    return None if found is None else found[1]


def find_non_json(value: object, *, max_depth: int = DEFAULT_MAX_DEPTH,
                  explain: Optional[Callable[[Any], Optional[str]]] = None) -> Optional[Tuple[str, str]]:
    """Like `check_json_value`, but return (JSON Pointer, reason sentence) of the first bad place.

    `explain(value)` may say why a value that is not JSON has no JSON form, as a clause ("a datetime
    without a timezone, ..."; None: it does not know the type): the output check passes
    `jsonforms.why_no_json_form`, which sits above this module."""
    # Iterative depth-first walk in document order, so the first problem reported is stable.
    stack: list = [(value, "", 0)]
    while stack:
        item, pointer, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return pointer, _where(pointer) + " is a float NaN or infinity, which JSON cannot represent"
            continue
        if kind is dict or kind is list:
            problem = _container_problem(item, pointer, depth, max_depth, stack)
        else:
            problem = _other_problem(item, pointer, depth, max_depth, stack, explain)
        if problem is not None:
            return problem
    return None


def _container_problem(item: Any, pointer: str, depth: int, max_depth: int, stack: list):
    if depth >= max_depth:
        return pointer, _where(pointer) + f" is nested deeper than the limit of {max_depth} levels"
    children = []
    if issubclass(type(item), dict):  # (type(): an object's own `__class__` is never asked)
        for key, child in item.items():
            if not issubclass(type(key), str):
                return pointer, _where(pointer) + (
                    f" has a key of Python type {type(key).__name__}; JSON object keys must be strings"
                )
            children.append((child, pointer_join(pointer, key), depth + 1))
    else:
        children = [(child, pointer + "/" + str(index), depth + 1) for index, child in enumerate(item)]
    stack.extend(reversed(children))
    return None


def _other_problem(item: Any, pointer: str, depth: int, max_depth: int, stack: list,
                   explain: Optional[Callable[[Any], Optional[str]]] = None):
    kind = type(item)  # (not isinstance: an object's own `__class__` is never asked)
    if issubclass(kind, (dict, list)):
        return _container_problem(item, pointer, depth, max_depth, stack)
    if issubclass(kind, (str, int)):  # str/int subclasses (enums) are written by json.dumps
        return None
    if issubclass(kind, float):
        if math.isfinite(item):
            return None
        return pointer, _where(pointer) + " is a float NaN or infinity, which JSON cannot represent"
    why = explain(item) if explain is not None else None
    if why is not None:
        return pointer, _where(pointer) + f" is {why}"
    return pointer, _where(pointer) + f" is a Python {type(item).__name__}, which is not a JSON value"


def _where(pointer: str) -> str:
    return "the value" if pointer == "" else f"the value at {pointer}"


class _NotPlain(Exception):
    """`indented_json` met a value it leaves to `json.dumps` (a subclass, a non-string key, ...)."""


def indented_json(value: Any, *, sort_keys: bool = False) -> str:
    """`json.dumps(value, ensure_ascii=False, indent=2, sort_keys=sort_keys)`, the same text, about
    twice as fast for plain JSON data (the reports' JSON files: about 2 ms of a tool-eval run).

    `json.dumps` with an indent runs its pure-Python encoder, a generator per container that passes
    every piece up through each enclosing one; this writes the pieces into one list. It takes only
    the exact types `str`, `int`, `float`, `bool`, `None`, `list`, `tuple` and `dict` with `str` keys,
    written as `json.dumps` writes them; any other value anywhere (a subclass, a non-string key, an
    object), and nesting too deep for it, hands the whole value to `json.dumps`, errors included."""
    parts: list[str] = []
    append = parts.append
    encode_string = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses

    def emit(item: Any, indent: str) -> None:
        kind = type(item)
        if kind is str:
            append(encode_string(item))
        elif kind is dict:
            if not item:
                append("{}")
                return
            inner = indent + "  "
            separator = "{" + inner
            for key, member in (sorted(item.items()) if sort_keys else item.items()):
                if type(key) is not str:
                    raise _NotPlain
                append(separator)
                append(encode_string(key))
                append(": ")
                emit(member, inner)
                separator = "," + inner
            append(indent + "}")
        elif kind is list or kind is tuple:
            if not item:
                append("[]")
                return
            inner = indent + "  "
            separator = "[" + inner
            for member in item:
                append(separator)
                emit(member, inner)
                separator = "," + inner
            append(indent + "]")
        elif kind is int:
            append(int.__repr__(item))
        elif kind is float:
            append(_float_text(item))
        elif item is None:
            append("null")
        elif item is True:
            append("true")
        elif item is False:
            append("false")
        else:
            raise _NotPlain

    try:
        emit(value, "\n")
    except (_NotPlain, RecursionError, TypeError):  # TypeError: keys sorted across types
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=sort_keys)
    return "".join(parts)


def _float_text(value: float) -> str:
    """A float as `json.dumps` writes it (NaN and the infinities as JavaScript spells them)."""
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    return float.__repr__(value)
