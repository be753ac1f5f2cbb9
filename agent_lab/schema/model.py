"""The validator's values: `Violation`, `SchemaError` and the named limits."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_INSTANCE_DEPTH",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "SchemaError",
    "Violation",
]

MAX_INSTANCE_DEPTH = 64
"""Array/object nesting accepted in an instance; deeper instances get a "json" violation."""

MAX_SCHEMA_DEPTH = 128
"""Array/object nesting accepted in a schema document (a subschema level is usually two of these).

A chain of subschemas nested directly inside each other (`not`, `items`, ...: one level each) can exhaust
Python's recursion limit before this when the meta-schema checks it (about 90 levels with the default
limit); that is a SchemaError saying the schema is nested too deeply, never a RecursionError."""

MAX_SCHEMA_NODES = 20_000
"""Compiled subschemas per Validator (the reference-expansion limit); more is a SchemaError."""


@dataclass(frozen=True)
class Violation:
    """One way an instance breaks its schema.

    `instance_path` and `keyword_path` are JSON Pointers (into the instance, and along the keywords
    evaluated in the schema, `$ref` included); `message` names the field and the rule but never
    contains the instance's value, which may be a secret.
    """

    instance_path: str
    keyword_path: str
    keyword: str
    message: str


_new_object = object.__new__


def make_violation(instance_path: str, keyword_path: str, keyword: str, message: str) -> Violation:
    """Build a Violation without the frozen-dataclass __init__ (3x faster; same object, same equality)."""
    item = _new_object(Violation)
    fields = item.__dict__  # item by item, in field order: update() with keywords first builds a dict of them
    fields["instance_path"] = instance_path
    fields["keyword_path"] = keyword_path
    fields["keyword"] = keyword
    fields["message"] = message
    return item


class SchemaError(ValueError):
    """The schema itself is not a valid draft 2020-12 schema; the message says where."""
