"""Fused checks for the schema shapes tool arguments are made of.

Most tool schemas are an object with `properties`, `required` and `additionalProperties: false`
whose leaves are a `type` plus a bound or two (`maxLength`, `minimum`, `enum`). For those shapes one
closure replaces the per-keyword dispatch, and the node records that its check only ever accepts plain
JSON (exact types, bounded nesting), which lets `is_valid` skip the separate "is this JSON?" walk.
Anything else keeps the general per-keyword check; the shapes change speed, never verdicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple

from .model import MAX_INSTANCE_DEPTH

if TYPE_CHECKING:  # pragma: no cover - `_nodes` calls `specialise` (it imports this module on use)
    from ._nodes import Kw, Node

Check = Callable[[Any], bool]

# Python type taking the fast path per JSON type; other values fall back to the general check.
_FAST_TYPE = {"string": str, "integer": int, "number": int, "boolean": bool, "null": type(None)}
_OBJECT_KEYWORDS = {"type", "properties", "required", "additionalProperties"}
_ARRAY_KEYWORDS = {"type", "items", "minItems", "maxItems"}
_VALUE_KEYWORDS = {"enum", "const"}


def specialise(kws: Sequence[Kw], general: Check) -> Optional[Tuple[Check, bool, int]]:
    """Return (fused check, proves JSON, nesting depth) for a known shape, else None."""
    by_name = {kw.keyword: kw for kw in kws}
    type_kw = by_name.get("type")
    if type_kw is None:
        if by_name and set(by_name) <= _VALUE_KEYWORDS and all(_scalars(kw.detail) for kw in kws):
            return general, True, 0
        return None
    names = type_kw.detail
    if len(names) != 1:
        return None
    if names[0] == "object":
        return _object_shape(by_name, general)
    if names[0] == "array":
        return _array_shape(by_name, general)
    return _leaf_shape(names[0], type_kw, kws, general)


def _scalars(values: Any) -> bool:
    return isinstance(values, list) and all(
        value is None or isinstance(value, (str, int, float, bool)) for value in values
    )


def _leaf_shape(type_name: str, type_kw: Kw, kws: Sequence[Kw], general: Check):
    fast_type = _FAST_TYPE.get(type_name)
    if fast_type is None:
        return None
    others = [kw for kw in kws if kw is not type_kw]
    if any(kw.types is None and kw.keyword not in _VALUE_KEYWORDS for kw in others):
        return None  # an applicator or reference: not a leaf
    applicable = [kw for kw in sorted(others, key=lambda kw: kw.cost) if fast_type in (kw.types or (fast_type,))]
    fused = _fused_leaf(fast_type, {kw.keyword: kw.detail for kw in applicable}, general)
    if fused is None:
        fused = _typed(fast_type, tuple(kw.check for kw in applicable), general)
    return fused, True, 0


def _fused_leaf(fast_type: type, constraints: dict, general: Check) -> Optional[Check]:
    """One closure, one call, for the commonest leaves (a length bound, a range, a pattern, an enum)."""
    keys = frozenset(constraints)
    if any(detail is None for detail in constraints.values()):
        return None  # a keyword that does not say its bound plainly (draft-04's exclusive minimum)
    if fast_type is str:
        return _fused_string(keys, constraints, general)
    if fast_type is int and keys and keys <= {"minimum", "maximum"}:
        low = constraints.get("minimum")
        high = constraints.get("maximum")
        if low is not None and high is not None:
            return lambda x: (low <= x <= high) if type(x) is int else general(x)
        if low is not None:
            return lambda x: (x >= low) if type(x) is int else general(x)
        if high is not None:
            return lambda x: (x <= high) if type(x) is int else general(x)
    return None


def _fused_string(keys: frozenset, constraints: dict, general: Check) -> Optional[Check]:
    if keys == {"maxLength"}:
        high = constraints["maxLength"]
        return lambda x: (len(x) <= high) if type(x) is str else general(x)
    if keys == {"minLength", "maxLength"}:
        low, high = constraints["minLength"], constraints["maxLength"]
        return lambda x: (low <= len(x) <= high) if type(x) is str else general(x)
    if keys == {"pattern"}:
        search = constraints["pattern"]
        return lambda x: (search(x) is not None) if type(x) is str else general(x)
    if keys == {"enum"} and all(type(value) is str for value in constraints["enum"]):
        allowed = frozenset(constraints["enum"])
        return lambda x: (x in allowed) if type(x) is str else general(x)
    return None


def _typed(fast_type: type, rest: Tuple[Check, ...], general: Check) -> Check:
    if not rest:
        return lambda instance: type(instance) is fast_type or general(instance)
    if len(rest) == 1:
        (first,) = rest
        return lambda instance: first(instance) if type(instance) is fast_type else general(instance)
    if len(rest) == 2:
        first, second = rest
        return lambda x: (first(x) and second(x)) if type(x) is fast_type else general(x)

    def check(instance: Any) -> bool:
        if type(instance) is not fast_type:
            return general(instance)
        for one in rest:
            if not one(instance):
                return False
        return True

    return check


def _object_shape(by_name: dict, general: Check):
    if not set(by_name) <= _OBJECT_KEYWORDS:
        return None
    properties = by_name["properties"].detail if "properties" in by_name else {}
    required = tuple(by_name["required"].detail) if "required" in by_name else ()
    additional = by_name["additionalProperties"].detail if "additionalProperties" in by_name else None
    checks = {name: node.check for name, node in properties.items()}
    get = checks.get
    if additional is not None and additional.schema is False:
        def check(instance: Any) -> bool:
            if type(instance) is not dict:
                return general(instance)
            for name in required:
                if name not in instance:
                    return False
            for name, item in instance.items():
                one = get(name)
                if one is None or not one(item):
                    return False
            return True

        children: Sequence[Node] = list(properties.values())
        proves = all(child.proves_json for child in children)
        depth = 1 + max((child.proof_depth for child in children), default=0)
        return check, proves and depth <= MAX_INSTANCE_DEPTH, depth
    fallback = additional.check if additional is not None else None

    def open_check(instance: Any) -> bool:
        if type(instance) is not dict:
            return general(instance)
        for name in required:
            if name not in instance:
                return False
        for name, item in instance.items():
            one = get(name, fallback)
            if one is not None and not one(item):
                return False
        return True

    return open_check, False, 0


def _array_shape(by_name: dict, general: Check):
    if not set(by_name) <= _ARRAY_KEYWORDS or "items" not in by_name:
        return None
    item_node = by_name["items"].detail
    if not hasattr(item_node, "proof_depth"):  # not one Node (no detail: a list of item schemas before 2020-12)
        return None
    one = item_node.check
    least = by_name["minItems"].detail if "minItems" in by_name else 0
    most = by_name["maxItems"].detail if "maxItems" in by_name else None

    def check(instance: Any) -> bool:
        if type(instance) is not list:
            return general(instance)
        count = len(instance)
        if count < least or (most is not None and count > most):
            return False
        return all(map(one, instance))

    depth = 1 + item_node.proof_depth
    return check, item_node.proves_json and depth <= MAX_INSTANCE_DEPTH, depth


def specialise_collect(kws: Sequence[Kw], general: Callable[[Any, str, str, list], None]):
    """For a fused object shape: collect without per-type dispatch (every keyword there self-checks)."""
    by_name = {kw.keyword: kw for kw in kws}
    type_kw = by_name.get("type")
    if type_kw is None or type_kw.detail != ["object"] or not set(by_name) <= _OBJECT_KEYWORDS:
        return None
    others = [kw for kw in kws if kw is not type_kw]
    if not all(kw.self_checking for kw in others):
        return None
    steps = tuple(kw.collect for kw in others)  # schema order, like the general collect

    def collect(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        if type(instance) is not dict:
            general(instance, instance_path, keyword_path, out)
            return
        for step in steps:
            step(instance, instance_path, keyword_path, out)

    return collect
