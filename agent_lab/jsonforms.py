"""The JSON form of the Python types tools take and return, decided in one place.

A tool's contract is JSON, but its code speaks Python: it returns a `datetime`, a `Decimal`, a
dataclass, a pydantic model. This module says, for each such type, which JSON Schema describes it
(`schema_for_type`, used by `@tool`), how a value of it is written as JSON (`json_form`, used by the
registry's output step, on the thread that ran the handler; `to_json` at every depth), and how JSON is
read back into it (`from_json`, used by `@tool` handlers for their parameters). The three agree, so an
exported schema accepts exactly what an output is written as, and a parameter receives what the schema
let in:

| Python | JSON Schema | written as |
| --- | --- | --- |
| `datetime` | `{"type": "string", "format": "date-time"}` | RFC 3339, with its UTC offset |
| `date` | `{"type": "string", "format": "date"}` | `2026-08-04` |
| `time` | `{"type": "string", "format": "time"}` | `09:30:00+02:00` (RFC 3339 full-time) |
| `UUID` | `{"type": "string", "format": "uuid"}` | `4f6c...`, lower case |
| `Decimal` | `{"type": "string", "pattern": DECIMAL_PATTERN}` | `12.50`: digits, never an exponent |
| `Enum` member | its values (`enum`) | its value |
| `tuple` | an array | an array |
| dataclass | an object of its fields | an object of its fields |
| pydantic model | the model's own schema | `model_dump(mode="json", by_alias=True)` |

Naive datetimes and times have no RFC 3339 form (an offset is part of the grammar), so they have
no JSON form here: a handler returning one gets `invalid_tool_output` with the field and the reason,
and a parameter always receives an aware value. A `Decimal` is a string because a JSON number is
read back as a binary float by most clients (12.10 would come back as 12.1 or worse).

Nothing here imports `decimal`, `uuid` or pydantic: a value of those types can only exist once its
module is loaded, so the checks look the module up in `sys.modules`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import re
import sys
from typing import Any, Optional

__all__ = [
    "DECIMAL_PATTERN",
    "NO_FORM",
    "NoPythonForm",
    "PydanticSchemaError",
    "from_json",
    "is_pydantic_model",
    "json_form",
    "pydantic_schema",
    "pydantic_violations",
    "quoted_field",
    "schema_for_type",
    "to_json",
    "why_no_json_form",
]

DECIMAL_PATTERN = "^-?[0-9]+(\\.[0-9]+)?$"
"""A Decimal's JSON form: optional minus, digits, optional fraction (no exponent, no NaN)."""

MAX_DECIMAL_CHARACTERS = 4300
"""A Decimal whose plain notation would be longer than this (1E+999999, say) has no JSON form here:
writing it out could take any amount of memory. 4300 is Python's own default limit for int <-> str."""

MAX_ENUM_NESTING = 8
"""An enum member whose value is another member is followed this many times at most."""


class _NoForm:
    def __repr__(self) -> str:
        return "NO_FORM"


NO_FORM: Any = _NoForm()
"""What `json_form` answers for a value it has no JSON form for."""


class NoPythonForm(ValueError):
    """JSON the schema accepted that the Python type cannot hold (a leap second, year 0). `reason` is
    one sentence that never repeats the value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# -- which types: looked up without importing what the application did not ---------------------


def _loaded(module: str, name: str) -> Any:
    """`module.name` if the module is loaded, else None (a class the application never loaded has no
    instances to look for)."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def is_pydantic_model(annotation: Any) -> bool:
    """A pydantic v2 model class, by duck typing: it can say its schema and validate JSON."""
    return (isinstance(annotation, type) and callable(getattr(annotation, "model_json_schema", None))
            and callable(getattr(annotation, "model_validate_json", None))
            and callable(getattr(annotation, "model_dump", None)))


def schema_for_type(annotation: Any) -> Optional[dict[str, Any]]:
    """The JSON Schema of a scalar type from the table (datetime, date, time, UUID, Decimal), or None."""
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, _dt.datetime):
        return {"type": "string", "format": "date-time"}
    if issubclass(annotation, _dt.date):
        return {"type": "string", "format": "date"}
    if issubclass(annotation, _dt.time):
        return {"type": "string", "format": "time"}
    uuid_type = _loaded("uuid", "UUID")
    if uuid_type is not None and issubclass(annotation, uuid_type):
        return {"type": "string", "format": "uuid"}
    decimal_type = _loaded("decimal", "Decimal")
    if decimal_type is not None and issubclass(annotation, decimal_type):
        return {"type": "string", "pattern": DECIMAL_PATTERN}
    return None


# -- writing: Python -> JSON --------------------------------------------------------------------


def json_form(value: Any) -> Any:
    """The JSON form of one value of a type from the table, one level deep (a dataclass becomes a dict
    whose members may still need their own form), or NO_FORM. Never raises an Exception: a value whose
    form cannot be made (a tzinfo or a model_dump that raises) has none."""
    try:
        return _json_form(value)
    except Exception:  # noqa: BLE001 - the application's code (a tzinfo, a serializer) failed: no form
        return NO_FORM


def _json_form(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(tuple.__iter__(value))
    if isinstance(value, enum.Enum):
        for _ in range(MAX_ENUM_NESTING):
            value = value._value_
            if not isinstance(value, enum.Enum):
                return value
        return NO_FORM
    if isinstance(value, _dt.date):  # datetime is a date too
        return _datetime_text(value) if isinstance(value, _dt.datetime) else _dt.date.isoformat(value)
    if isinstance(value, _dt.time):
        return _time_text(value)
    uuid_type = _loaded("uuid", "UUID")
    if uuid_type is not None and isinstance(value, uuid_type):
        return uuid_type.__str__(value)
    decimal_type = _loaded("decimal", "Decimal")
    if decimal_type is not None and isinstance(value, decimal_type):
        return _decimal_text(value, decimal_type)
    kind = type(value)
    if dataclasses.is_dataclass(kind):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(kind)}
    if is_pydantic_model(kind):
        return value.model_dump(mode="json", by_alias=True)
    return NO_FORM


def _whole_minutes(offset: Optional[_dt.timedelta]) -> bool:
    return offset is not None and not offset % _dt.timedelta(minutes=1)


def _datetime_text(value: _dt.datetime) -> Any:
    if not _whole_minutes(_dt.datetime.utcoffset(value)):
        return NO_FORM  # naive, or an offset with seconds: RFC 3339 has no form for either
    return _dt.datetime.isoformat(value)


def _time_text(value: _dt.time) -> Any:
    if not _whole_minutes(_dt.time.utcoffset(value)):
        return NO_FORM
    return _dt.time.isoformat(value)


def _decimal_text(value: Any, decimal_type: Any) -> Any:
    if not decimal_type.is_finite(value):
        return NO_FORM
    _sign, digits, exponent = decimal_type.as_tuple(value)
    if len(digits) + abs(exponent) > MAX_DECIMAL_CHARACTERS:
        return NO_FORM
    return decimal_type.__format__(value, "f")


def to_json(value: Any) -> Any:
    """The JSON data the registry's output step makes of `value`: dataclasses and pydantic models become
    objects, enums their values, tuples lists, datetimes, UUIDs and Decimals strings, at every depth. A
    value with no JSON form is returned as it is (the output step refuses it, saying why)."""
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if type(value) in (str, int, float, bool) or value is None:
        return value
    form = json_form(value)
    return value if form is NO_FORM else to_json(form)


def why_no_json_form(value: Any) -> Optional[str]:
    """Why a value of a type from the table has no JSON form, as a clause for an error message (never
    the value itself), or None for a type the table does not know. Reads only attributes: no
    application code runs (types are read with type(), so not even an object's own `__class__`)."""
    value_type = type(value)
    if issubclass(value_type, (_dt.datetime, _dt.time)):
        kind = "datetime" if issubclass(value_type, _dt.datetime) else "time"
        if value.tzinfo is None:
            return (f"a {kind} without a timezone, which RFC 3339 cannot express; give it one "
                    "(datetime.timezone.utc, or the offset it was meant in)")
        return (f"a {kind} whose tzinfo gives no UTC offset in whole minutes, which RFC 3339 cannot express "
                "(a time needs a fixed offset such as datetime.timezone.utc: a named zone has none without a date)")
    decimal_type = _loaded("decimal", "Decimal")
    if decimal_type is not None and issubclass(value_type, decimal_type):
        return ("a Decimal that is not a finite number, or longer than "
                f"{MAX_DECIMAL_CHARACTERS} digits in plain notation")
    if is_pydantic_model(value_type):
        return f"a {value_type.__name__} whose model_dump(mode='json') failed"
    if issubclass(value_type, enum.Enum):
        return f"an {type(value).__name__} member whose value has no JSON form"
    return None


# -- reading: JSON -> Python --------------------------------------------------------------------

_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))")
_DECIMAL = re.compile(DECIMAL_PATTERN)


def from_json(annotation: Any, value: Any) -> Any:
    """The value of a scalar type from the table that JSON `value` (already checked against the type's
    schema) stands for. Raises NoPythonForm when the type cannot hold it (the schema step let it in:
    a leap second, year 0, or any string when the tool's format assertion is off)."""
    if not isinstance(value, str):
        raise NoPythonForm(f"a {annotation.__name__} is written as a string")
    if issubclass(annotation, _dt.datetime):
        day, separator, clock = value[:10], value[10:11], value[11:]
        if separator not in ("T", "t"):
            raise NoPythonForm("is not an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS with an offset)")
        year, month, date_day = _date_parts(day)
        hour, minute, second, micro, tz = _time_parts(clock)
        return _built(annotation, year, month, date_day, hour, minute, second, micro, tzinfo=tz)
    if issubclass(annotation, _dt.date):
        return _built(annotation, *_date_parts(value))
    if issubclass(annotation, _dt.time):
        hour, minute, second, micro, tz = _time_parts(value)
        return _built(annotation, hour, minute, second, micro, tzinfo=tz)
    uuid_type = _loaded("uuid", "UUID")
    if uuid_type is not None and issubclass(annotation, uuid_type):
        try:
            return annotation(value)
        except ValueError:
            raise NoPythonForm("is not a UUID") from None
    decimal_type = _loaded("decimal", "Decimal")
    if decimal_type is not None and issubclass(annotation, decimal_type):
        if not _DECIMAL.fullmatch(value):
            raise NoPythonForm("is not a decimal number written as digits (e.g. \"12.50\")")
        return annotation(value)
    raise NoPythonForm(f"{annotation.__name__} has no JSON form")  # pragma: no cover - callers ask for table types


def _built(annotation: Any, *fields: Any, **zone: Any) -> Any:
    """The date or time from fields already range-checked; a day the month does not have (possible
    only without format assertion) is the one thing left for the constructor to refuse."""
    try:
        return annotation(*fields, **zone)
    except (ValueError, OverflowError):
        raise NoPythonForm("is not a date or time Python can hold") from None


def _date_parts(text: str) -> tuple[int, int, int]:
    match = _DATE.fullmatch(text)
    if match is None:
        raise NoPythonForm("is not an RFC 3339 date (YYYY-MM-DD)")
    year, month, day = (int(part) for part in match.groups())
    if not _dt.MINYEAR <= year <= _dt.MAXYEAR:
        raise NoPythonForm(f"has a year Python cannot hold (it takes {_dt.MINYEAR} to {_dt.MAXYEAR})")
    return year, month, day


def _time_parts(text: str) -> tuple[int, int, int, int, _dt.tzinfo]:
    match = _TIME.fullmatch(text)
    if match is None:
        raise NoPythonForm("is not an RFC 3339 time (HH:MM:SS with Z or an offset such as +02:00)")
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3))
    if second == 60:
        raise NoPythonForm("is a leap second (:60), which Python cannot hold; send :59")
    fraction = match.group(4) or ""
    micro = int((fraction + "000000")[:6])  # finer than a microsecond: cut, as Python cannot hold it
    if match.group(5) is not None:
        return hour, minute, second, micro, _dt.timezone.utc
    offset_hours, offset_minutes = int(match.group(7)), int(match.group(8))
    if offset_hours > 23 or offset_minutes > 59:
        raise NoPythonForm("has a UTC offset out of range (at most 23:59)")
    offset = _dt.timedelta(hours=offset_hours, minutes=offset_minutes)
    if not offset:
        return hour, minute, second, micro, _dt.timezone.utc
    return hour, minute, second, micro, _dt.timezone(-offset if match.group(6) == "-" else offset)


# -- pydantic models: their schema, and their refusals as violations --------------------------------


class PydanticSchemaError(ValueError):
    """A pydantic model whose schema cannot be used (pydantic raised, or the schema is not JSON)."""


def pydantic_schema(model: type, *, output: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's JSON Schema as pydantic writes it (validation mode for arguments, serialization mode
    for outputs, field aliases as the JSON names), split into the schema and its `$defs`, and made
    usable by every host: a `oneOf` pydantic emits for a discriminated union becomes the `anyOf` it is
    equal to (each branch requires the discriminator with a value no other branch has, so at most one
    branch can match), which OpenAI's strict mode accepts and `oneOf` it does not."""
    try:
        written = getattr(model, "model_json_schema")(mode="serialization" if output else "validation",
                                                      by_alias=True)
        schema = json.loads(json.dumps(written, allow_nan=False))  # a plain copy we own
    except Exception as error:  # noqa: BLE001 - pydantic's own refusal, or a default that is not JSON
        raise PydanticSchemaError(f"pydantic could not write its JSON Schema ({type(error).__name__})") from None
    if not isinstance(schema, dict):
        raise PydanticSchemaError("pydantic's JSON Schema for it is not an object")
    defs = schema.pop("$defs", {})
    if not isinstance(defs, dict):
        raise PydanticSchemaError("pydantic's $defs for it is not an object")
    return _disjoint_one_of_as_any_of(schema, defs, 0), _disjoint_one_of_as_any_of(defs, defs, 0)


_MAX_SCHEMA_WALK = 64  # nesting a pydantic schema is walked to (deeper: left as it is)


def _disjoint_one_of_as_any_of(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if depth > _MAX_SCHEMA_WALK:
        return node
    if isinstance(node, list):
        return [_disjoint_one_of_as_any_of(item, defs, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _disjoint_one_of_as_any_of(value, defs, depth + 1) for key, value in node.items()}
    discriminator = out.get("discriminator")
    branches = out.get("oneOf")
    if (isinstance(discriminator, dict) and isinstance(discriminator.get("propertyName"), str)
            and isinstance(branches, list) and _tells_apart(branches, discriminator["propertyName"], defs)):
        del out["oneOf"], out["discriminator"]
        out["anyOf"] = branches
    return out


def _tells_apart(branches: list[Any], name: str, defs: dict[str, Any]) -> bool:
    """Whether every branch is an object requiring `name` with its own values (const or enum), no value
    shared between branches: then no instance can match two branches, and anyOf equals oneOf."""
    seen: list[Any] = []
    for branch in branches:
        if isinstance(branch, dict) and set(branch) == {"$ref"} and isinstance(branch["$ref"], str) \
                and branch["$ref"].startswith("#/$defs/"):
            branch = defs.get(branch["$ref"][len("#/$defs/"):])
        if not isinstance(branch, dict) or name not in (branch.get("required") or ()):
            return False
        tag = (branch.get("properties") or {}).get(name)
        if not isinstance(tag, dict):
            return False
        values = [tag["const"]] if "const" in tag else tag.get("enum")
        if not isinstance(values, list) or not values:
            return False
        for value in values:
            if any(_same_json(value, other) for other in seen):
                return False
        seen.extend(values)
    return True


def _same_json(left: Any, right: Any) -> bool:
    from .jsonvalue import json_equal

    return json_equal(left, right)


MAX_MESSAGE_CHARACTERS = 300
"""A pydantic error message longer than this is cut (a custom validator's text can be anything)."""


def pydantic_violations(error: Exception, value: Any, pointer: str) -> Optional[list[dict[str, str]]]:
    """The violations of a pydantic ValidationError raised while validating `value` (the JSON at
    `pointer`), or None when `error` is not one. Each points at the JSON that was refused: pydantic's
    locations also name union members and tags, which are not in the JSON and are left out. The
    messages are pydantic's, written for API clients; the refused input is never included."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return None
    try:
        try:
            found = errors(include_url=False, include_context=False, include_input=False)
        except TypeError:  # an older errors() without those options
            found = errors()
    except Exception:  # noqa: BLE001 - not a ValidationError after all
        return None
    if not isinstance(found, list):
        return None
    violations = []
    for entry in found:
        if not isinstance(entry, dict):
            continue
        location = entry.get("loc") if isinstance(entry.get("loc"), (tuple, list)) else ()
        at = _pointer_into(value, pointer, location)
        message = str(entry.get("msg") or "is not valid")[:MAX_MESSAGE_CHARACTERS]
        kind = entry.get("type")
        if kind == "json_invalid":  # the text was json.dumps's own: only a lone surrogate makes pydantic refuse it
            message = "holds a lone surrogate (half of a UTF-16 pair), which pydantic cannot read"
        violations.append({
            "instance_path": at,
            "keyword_path": "",
            "keyword": f"pydantic:{kind}" if isinstance(kind, str) else "pydantic",
            "message": f"{quoted_field(at)}: {message}",
        })
    return violations


def _pointer_into(value: Any, pointer: str, location: Any) -> str:
    """`pointer` followed by the parts of a pydantic location that are real keys or indexes of `value`."""
    from .jsonvalue import pointer_join

    for part in location:
        if isinstance(value, dict) and isinstance(part, str) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and not isinstance(part, bool) \
                and 0 <= part < len(value):
            value = value[part]
        else:
            continue  # a union member's name or a tag: not a place in the JSON
        pointer = pointer_join(pointer, part)
    return pointer


def quoted_field(pointer: str) -> str:
    """How a message names the place a JSON Pointer points at, as the validator does: 'a/b'."""
    return f"'{pointer[1:]}'" if pointer else "the arguments"
