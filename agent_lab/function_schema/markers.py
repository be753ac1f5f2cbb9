"""The constraint markers a tool function writes inside ``typing.Annotated``, and pydantic's read as ours.

    def search(query: Annotated[str, Len(min=1, max=200), "What to look for"],
               limit: Annotated[int, Range(ge=1, le=50)] = 10) -> list[Hit]: ...

`Len`, `Range`, `Pattern` and `Describe` are checked when they are made (a bool is not a bound, a
minimum above the maximum is refused). pydantic's ``Field(ge=1, max_length=5, description=...)`` and
annotated-types constraints (``Gt(0)``) mean the same as ours: `pydantic_markers` reads them by duck
typing (pydantic is never imported) and refuses what our schema cannot carry. How a marker becomes a
schema keyword is `agent_lab.signature.constraints`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .annotations import Site

__all__ = ["Describe", "Len", "MultipleOf", "Pattern", "Range", "pydantic_markers"]

def _check_bound(value: Any, what: str, *, integral: bool) -> None:
    wanted = int if integral else (int, float)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, wanted) or not math.isfinite(value):
        kind = "an integer" if integral else "a finite number"
        raise ValueError(f"{what} must be {kind} or None")
    if integral and value < 0:
        raise ValueError(f"{what} must not be negative")


@dataclass(frozen=True)
class Len:
    """Length bounds: minLength/maxLength on strings, minItems/maxItems on lists and tuples."""

    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        _check_bound(self.min, "Len.min", integral=True)
        _check_bound(self.max, "Len.max", integral=True)
        if self.min is None and self.max is None:
            raise ValueError("Len needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("Len.min must not be greater than Len.max")


@dataclass(frozen=True)
class Range:
    """Numeric bounds: ge/le are inclusive (minimum/maximum), gt/lt exclusive (exclusiveMinimum/...)."""

    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    lt: float | None = None

    def __post_init__(self) -> None:
        for bound in ("ge", "le", "gt", "lt"):
            _check_bound(getattr(self, bound), f"Range.{bound}", integral=False)
        if self.ge is not None and self.gt is not None:
            raise ValueError("Range takes ge or gt, not both")
        if self.le is not None and self.lt is not None:
            raise ValueError("Range takes le or lt, not both")
        if all(bound is None for bound in (self.ge, self.le, self.gt, self.lt)):
            raise ValueError("Range needs at least one bound")


@dataclass(frozen=True)
class Pattern:
    """An ECMA-262 regular expression a string must match (searched, not anchored: add ^...$)."""

    regex: str

    def __post_init__(self) -> None:
        if not isinstance(self.regex, str):
            raise ValueError("Pattern.regex must be a string")


@dataclass(frozen=True)
class Describe:
    """A description for the parameter or field (a plain string in Annotated means the same)."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("Describe.text must be a non-empty string")


@dataclass(frozen=True)
class MultipleOf:
    """pydantic's ``multiple_of`` (JSON Schema's multipleOf): made only from a pydantic or annotated-types
    constraint, which `pydantic_markers` has checked."""

    value: float


_PYDANTIC_FIELD_UNSUPPORTED = ("alias", "validation_alias", "json_schema_extra", "default_factory")


def pydantic_markers(marker: Any, site: Site) -> list[Any] | None:
    """Our markers for pydantic's ``Field(...)`` or an annotated-types constraint (``Gt(0)``) on a
    parameter or field, read by duck typing (pydantic is never imported); None for metadata that is
    neither. What our schema cannot carry is refused, never skipped: a pydantic validator function
    (it runs only inside a model), an alias, a default written inside Field."""
    module = getattr(type(marker), "__module__", "") or ""
    if not (module.startswith("pydantic") or module.startswith("annotated_types")):
        return None
    name = type(marker).__name__
    if callable(getattr(marker, "func", None)):
        raise site.refuse(f"pydantic's {name} runs only inside a pydantic model, and @tool does not run "
                          "pydantic on plain parameters: put the value in a model, or check it in the function")
    if hasattr(marker, "metadata") and hasattr(marker, "json_schema_extra"):  # a FieldInfo
        unsupported = [key for key in _PYDANTIC_FIELD_UNSUPPORTED if getattr(marker, key, None) is not None]
        if type(getattr(marker, "default", None)).__name__ != "PydanticUndefinedType":
            unsupported.append("default")
        if unsupported:
            raise site.refuse(f"Field({', '.join(unsupported)}=...) is not read by @tool here: give a default "
                              "as `= value` and keep only constraints and the description in Field")
        markers: list[Any] = [Describe(marker.description)] if isinstance(marker.description, str) \
            and marker.description.strip() else []
        for inner in marker.metadata:
            markers.extend(pydantic_markers(inner, site) or [inner])
        return markers  # title, examples and discriminator change nothing the schema enforces here
    try:
        return _constraint_markers(marker)
    except ValueError as problem:
        raise site.refuse(f"pydantic's {name}: {problem}") from None
    except LookupError:
        raise site.refuse(f"pydantic's {name} has no JSON Schema form here; use Range, Len, Pattern or "
                          "Describe, or put the value in a pydantic model") from None


def _constraint_markers(marker: Any) -> list[Any]:
    """Our marker for one annotated-types or pydantic constraint; LookupError for one we do not know."""
    bounds = {key: getattr(marker, key) for key in ("ge", "gt", "le", "lt") if hasattr(marker, key)}
    if bounds:
        return [Range(**bounds)]
    if hasattr(marker, "min_length") or hasattr(marker, "max_length"):
        return [Len(min=getattr(marker, "min_length", None), max=getattr(marker, "max_length", None))]
    if isinstance(getattr(marker, "pattern", None), str):
        return [Pattern(marker.pattern)]
    if hasattr(marker, "multiple_of"):
        value = marker.multiple_of
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError("multiple_of must be a positive finite number")
        return [MultipleOf(value)]
    if getattr(marker, "strict", None) is True:
        return []  # the schema never coerces: strict already
    raise LookupError(type(marker).__name__)

