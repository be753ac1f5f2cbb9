"""Read-only JSON: the schemas a `ToolSpec` holds after it is built.

A spec compiles its input and output schemas into validators once. If the schema objects stayed
ordinary dicts, code holding one (the dict passed in, or `spec.input_schema`) could change it after
the fact, and the catalog would then advertise one schema while the validator enforces another. So a
spec keeps a frozen deep copy: `FrozenObject` and `FrozenArray` are `dict` and `list` subclasses
(so `json.dumps`, `isinstance(x, dict)`, `==` and the validator treat them as plain JSON) whose every
mutating method raises TypeError. `thaw` turns one back into plain, mutable dicts and lists (what the
exports hand to hosts); `copy.copy`/`copy.deepcopy` of a frozen value give such a plain copy too.

Read-only is not tamper-proof: `dict.__setitem__(frozen, ...)` still writes, as it would into any
Python object. It stops every ordinary mutation, which is the point: no accident, and no helper that
"just adds a field", can make the advertised and the enforced schema differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["FrozenArray", "FrozenObject", "freeze", "thaw"]

MAX_FREEZE_DEPTH = 256
"""Containers nested deeper than this are kept as they are (the validator refuses a schema nested
that deep anyway); the bound also keeps a cyclic value from recursing for ever."""


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"this {type(self).__name__} is read-only (a ToolSpec's schema cannot change after it is built); "
        "build a new spec, e.g. dataclasses.replace(spec, input_schema=...)"
    )


class FrozenObject(dict):
    """A JSON object that refuses to change. Build one with `freeze`."""

    __slots__ = ()

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only
    __init__ = _read_only  # re-running dict.__init__ on a built object would update it

    def __hash__(self) -> int:  # type: ignore[override]
        # Equal objects have equal key sets, so this agrees with ==, whatever the values are.
        return hash(frozenset(dict.keys(self)))

    def __copy__(self) -> dict[str, Any]:
        return thaw(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return freeze, (thaw(self),)

    def __repr__(self) -> str:
        return f"FrozenObject({dict.__repr__(self)})"


class FrozenArray(list):
    """A JSON array that refuses to change. Build one with `freeze`."""

    __slots__ = ()

    __setitem__ = __delitem__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only
    __init__ = _read_only

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(len(self))  # equal arrays have equal lengths

    def __copy__(self) -> list[Any]:
        return thaw(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return freeze, (thaw(self),)

    def __repr__(self) -> str:
        return f"FrozenArray({list.__repr__(self)})"


def freeze(value: Any, _depth: int = 0) -> Any:
    """A read-only deep copy of `value`: every Mapping becomes a FrozenObject and every list or tuple a
    FrozenArray; str, int and float subclasses become their base type; anything else (not JSON) is kept
    as it is, for the validator to refuse. Never mutates `value`."""
    if _depth > MAX_FREEZE_DEPTH:
        return value
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, Mapping):
        frozen_object = dict.__new__(FrozenObject)
        dict.update(frozen_object, ((_plain_key(key), freeze(item, _depth + 1)) for key, item in value.items()))
        return frozen_object
    if isinstance(value, (list, tuple)):
        frozen_array = list.__new__(FrozenArray)
        list.extend(frozen_array, (freeze(item, _depth + 1) for item in value))
        return frozen_array
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed: an int subclass (an IntEnum)
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return value


def _plain_key(key: Any) -> Any:
    return str.__str__(key) if isinstance(key, str) else key


def thaw(value: Any, _depth: int = 0) -> Any:
    """A plain, mutable deep copy of a (frozen or plain) JSON value: dicts and lists all the way down."""
    if _depth > MAX_FREEZE_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: thaw(item, _depth + 1) for key, item in dict.items(value)}
    if isinstance(value, list):
        return [thaw(item, _depth + 1) for item in list.__iter__(value)]
    return value
