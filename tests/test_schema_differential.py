"""Differential test: our verdicts agree with python-jsonschema's Draft202012Validator.

Schemas and instances come from a small seeded grammar (deterministic: the same pairs every run).
`format` is left out (python-jsonschema does not assert it by default), and so is multipleOf with
non-binary fractions (python-jsonschema uses float division there; we use exact decimals on purpose).
Skipped when jsonschema is not installed.
"""

from __future__ import annotations

import random
import unittest

from agent_lab.schema import Validator

try:  # optional: only this test needs it
    import jsonschema
except ImportError:  # pragma: no cover - depends on the environment
    jsonschema = None

SEED = 20_201_012
SCHEMA_COUNT = 1000
INSTANCES_PER_SCHEMA = 6
KEYS = ("a", "b", "c")
SCALARS = (None, True, False, 0, 1, 1.0, -1, 1.5, 2, 3, 10**20, "", "a", "ab", "b", "a1", "abc", "1")
PATTERNS = ("^a", "b$", "[0-9]", "^$", "a+b?", "^[a-c]*$")
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


class _Grammar:
    """A tiny random generator of 2020-12 schemas and JSON instances."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def instance(self, depth: int = 2):
        choice = self.random.random()
        if depth <= 0 or choice < 0.55:
            return self.random.choice(SCALARS)
        if choice < 0.78:
            return [self.instance(depth - 1) for _ in range(self.random.randint(0, 3))]
        keys = self.random.sample(KEYS, self.random.randint(0, 3))
        return {key: self.instance(depth - 1) for key in keys}

    def schema(self, depth: int, allow_ref: bool = True):
        if depth <= 0 or self.random.random() < 0.15:
            return self.random.choice([True, False, {}, {"type": self.random.choice(TYPES)}])
        schema = {}
        for _ in range(self.random.randint(1, 3)):
            keyword = self.random.choice(_KEYWORDS)
            if keyword == "$ref" and not allow_ref:
                continue
            schema[keyword] = _VALUES[keyword](self, depth - 1, allow_ref)
        return schema

    def root(self):
        root = self.schema(3)
        if isinstance(root, dict) and self.random.random() < 0.3:
            root["$defs"] = {"d0": self.schema(2, allow_ref=False)}
        elif isinstance(root, dict):
            _drop_refs(root)
        return root

    def subschemas(self, depth, allow_ref, low=1, high=3):
        return [self.schema(depth, allow_ref) for _ in range(self.random.randint(low, high))]


def _drop_refs(schema) -> None:
    if isinstance(schema, dict):
        schema.pop("$ref", None)
        for value in schema.values():
            _drop_refs(value)
    elif isinstance(schema, list):
        for value in schema:
            _drop_refs(value)


_VALUES = {
    "type": lambda g, d, r: g.random.choice([g.random.choice(TYPES), g.random.sample(TYPES, 2)]),
    "enum": lambda g, d, r: [g.instance(1) for _ in range(g.random.randint(1, 3))],
    "const": lambda g, d, r: g.instance(1),
    "minimum": lambda g, d, r: g.random.choice([-2, 0, 1, 1.5, 3]),
    "maximum": lambda g, d, r: g.random.choice([-2, 0, 1, 1.5, 3]),
    "exclusiveMinimum": lambda g, d, r: g.random.choice([-2, 0, 1, 1.5, 3]),
    "exclusiveMaximum": lambda g, d, r: g.random.choice([-2, 0, 1, 1.5, 3]),
    "multipleOf": lambda g, d, r: g.random.choice([1, 2, 0.5, 3]),
    "minLength": lambda g, d, r: g.random.randint(0, 3),
    "maxLength": lambda g, d, r: g.random.randint(0, 3),
    "pattern": lambda g, d, r: g.random.choice(PATTERNS),
    "items": lambda g, d, r: g.schema(d, r),
    "prefixItems": lambda g, d, r: g.subschemas(d, r, 1, 2),
    "contains": lambda g, d, r: g.schema(d, r),
    "minContains": lambda g, d, r: g.random.randint(0, 2),
    "maxContains": lambda g, d, r: g.random.randint(0, 2),
    "minItems": lambda g, d, r: g.random.randint(0, 3),
    "maxItems": lambda g, d, r: g.random.randint(0, 3),
    "uniqueItems": lambda g, d, r: g.random.choice([True, False]),
    "properties": lambda g, d, r: {key: g.schema(d, r) for key in g.random.sample(KEYS, g.random.randint(1, 2))},
    "patternProperties": lambda g, d, r: {g.random.choice(PATTERNS): g.schema(d, r)},
    "additionalProperties": lambda g, d, r: g.schema(d, r),
    "propertyNames": lambda g, d, r: g.schema(d, r),
    "required": lambda g, d, r: g.random.sample(KEYS, g.random.randint(0, 2)),
    "dependentRequired": lambda g, d, r: {g.random.choice(KEYS): g.random.sample(KEYS, 1)},
    "dependentSchemas": lambda g, d, r: {g.random.choice(KEYS): g.schema(d, r)},
    "minProperties": lambda g, d, r: g.random.randint(0, 2),
    "maxProperties": lambda g, d, r: g.random.randint(0, 2),
    "allOf": lambda g, d, r: g.subschemas(d, r),
    "anyOf": lambda g, d, r: g.subschemas(d, r),
    "oneOf": lambda g, d, r: g.subschemas(d, r),
    "not": lambda g, d, r: g.schema(d, r),
    "if": lambda g, d, r: g.schema(d, r),
    "then": lambda g, d, r: g.schema(d, r),
    "else": lambda g, d, r: g.schema(d, r),
    "unevaluatedProperties": lambda g, d, r: g.schema(d, r),
    "unevaluatedItems": lambda g, d, r: g.schema(d, r),
    "$ref": lambda g, d, r: "#/$defs/d0",
}
_KEYWORDS = tuple(_VALUES)


def generate_pairs(seed: int = SEED, schemas: int = SCHEMA_COUNT, per_schema: int = INSTANCES_PER_SCHEMA):
    """Yield (schema, [instances]) deterministically."""
    grammar = _Grammar(seed)
    for _ in range(schemas):
        root = grammar.root()
        if isinstance(root, dict) and "$ref" in str(root) and "$defs" not in root:
            _drop_refs(root)
        yield root, [grammar.instance(3) for _ in range(per_schema)]


@unittest.skipIf(jsonschema is None, "python-jsonschema is not installed (pip install jsonschema)")
class DifferentialTests(unittest.TestCase):
    def test_verdicts_agree_with_python_jsonschema(self):
        disagreements = []
        compared = 0
        for schema, instances in generate_pairs():
            ours = Validator(schema)
            theirs = jsonschema.Draft202012Validator(schema)
            for instance in instances:
                compared += 1
                expected = theirs.is_valid(instance)
                if ours.is_valid(instance) != expected or (ours.errors(instance) == []) != expected:
                    disagreements.append((schema, instance, expected))
        self.assertGreaterEqual(compared, 6000)
        self.assertEqual(disagreements[:5], [], f"{len(disagreements)} of {compared} verdicts differ")

    def test_generator_is_deterministic(self):
        first = list(generate_pairs(schemas=20))
        second = list(generate_pairs(schemas=20))
        self.assertEqual(repr(first), repr(second))


if __name__ == "__main__":
    unittest.main()
