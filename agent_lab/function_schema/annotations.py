"""Reading Python type annotations: what `@tool`'s schema builder and its argument rebuilding both ask.

Both jobs walk the same annotations (``Annotated[...]``, unions, containers, TypedDicts, dataclasses,
enums), so the questions they ask of one are answered here once: what the type is under its
``Annotated`` wrapper, which kind of type it is, and where it sits when it must be refused (`Site`).
This module changes when Python's `typing` does.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections import abc
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DICT_ORIGINS",
    "LIST_ORIGINS",
    "Site",
    "class_hints",
    "is_dataclass_type",
    "is_enum",
    "is_typeddict",
    "is_union",
    "strip_annotated",
]

LIST_ORIGINS = frozenset({list, abc.Sequence, abc.MutableSequence})
DICT_ORIGINS = frozenset({dict, abc.Mapping, abc.MutableMapping})


@dataclass(frozen=True)
class Site:
    """The function and parameter (and nested field) an annotation belongs to, for error messages."""

    function: str
    parameter: str
    fields: tuple[str, ...] = ()

    def field(self, name: str) -> Site:
        return dataclasses.replace(self, fields=(*self.fields, name))

    def refuse(self, reason: str) -> TypeError:
        where = f"parameter {self.parameter!r}" if self.parameter != "return" else "the return annotation"
        if self.fields:
            where += " (field " + ".".join(self.fields) + ")"
        return TypeError(f"{self.function}: {where}: {reason}")


def strip_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """Unwrap Annotated (and TypedDict's Required/NotRequired, and NewType, which is the type it wraps
    at run time) into the type and its metadata."""
    metadata: tuple[Any, ...] = ()
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            metadata = metadata + tuple(annotation.__metadata__)
            annotation = annotation.__origin__
        elif getattr(typing.get_origin(annotation), "_name", None) in ("Required", "NotRequired"):
            annotation = typing.get_args(annotation)[0]
        elif callable(annotation) and hasattr(annotation, "__supertype__"):  # typing.NewType
            annotation = annotation.__supertype__
        else:
            return annotation, metadata


def is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def is_typeddict(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, dict) and hasattr(annotation, "__required_keys__")


def is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def class_hints(cls: type, site: Site) -> dict[str, Any]:
    """A class's resolved type hints; an unresolvable forward reference inside it is refused at `site`."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - an unresolvable forward reference inside the class
        raise site.refuse(f"the annotations of {cls.__name__} cannot be resolved ({type(exc).__name__})") from None
