"""Fused shapes change speed, never verdicts.

Each schema is validated twice: as written (common tool-argument shapes are fused into one closure)
and with `"not": false` added to every subschema, which changes nothing about what is valid but keeps
every node on the general per-keyword path. Verdicts and violations must be identical.
"""

from __future__ import annotations

import collections
import enum
import itertools
import unittest

from agent_lab.schema import Validator


class Level(str, enum.Enum):
    LOW = "low"


class Count(enum.IntEnum):
    THREE = 3


SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 5},
            "level": {"type": "integer", "minimum": 1, "maximum": 5},
            "priority": {"type": "string", "enum": ["low", "high"]},
            "notify": {"type": "boolean"},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^T-[0-9]{2}$"},
            "note": {"type": "string", "minLength": 1, "maxLength": 3},
            "ratio": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "status": {"enum": ["open", "closed", None]},
            "low": {"type": "integer", "minimum": 0},
            "high": {"type": "integer", "maximum": 0},
        },
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
]

VALUES = [
    None, True, False, 0, 1, 1.0, 3, 6, -1, 2.5, 10**30, float("nan"), float("inf"), "", "low", "lowest",
    "T-12", "T-123", "abc", "abcdef", Level.LOW, Count.THREE, [], ["a"], ["a", "b", "c"], [1], ("a",), {},
    {"x": 1}, b"low", {1, 2},
]
KEYS = ["title", "level", "priority", "notify", "id", "note", "ratio", "tags", "status", "low", "high", "a", "zz"]


def without_fusion(schema):
    """The same schema with `not: false` in every subschema (a no-op that defeats fusion)."""
    if isinstance(schema, dict):
        copied = {}
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                copied[key] = {name: without_fusion(sub) for name, sub in value.items()}
            elif key in ("items", "additionalProperties"):
                copied[key] = without_fusion(value)
            else:
                copied[key] = value
        copied["not"] = False
        return copied
    return schema


def instances():
    for value in VALUES:
        yield value
    for first, second in itertools.product(KEYS[:7], VALUES):
        yield {first: second}
        yield {"title": "ok", first: second}
    yield collections.OrderedDict(title="ok")
    yield {1: "x"}


class FusedShapeTests(unittest.TestCase):
    def test_fused_and_general_paths_give_the_same_verdicts_and_violations(self):
        compared = 0
        for schema in SCHEMAS:
            fused, general = Validator(schema), Validator(without_fusion(schema))
            for instance in instances():
                compared += 1
                with self.subTest(schema=schema, instance=repr(instance)):
                    self.assertEqual(fused.is_valid(instance), general.is_valid(instance))
                    self.assertEqual(
                        [(v.instance_path, v.keyword) for v in fused.errors(instance)],
                        [(v.instance_path, v.keyword) for v in general.errors(instance)],
                    )
        self.assertGreater(compared, 1000)

    def test_fused_schema_refuses_non_json_values_without_a_separate_walk(self):
        validator = Validator(SCHEMAS[0])
        for bad in ({"title": ("a",)}, {"title": "ok", "level": float("nan")}, {"title": b"x"}):
            with self.subTest(instance=repr(bad)):
                self.assertFalse(validator.is_valid(bad))
                self.assertEqual([v.keyword for v in validator.errors(bad)], ["json"])


if __name__ == "__main__":
    unittest.main()
