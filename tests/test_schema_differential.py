"""Differential test: our verdicts agree with python-jsonschema's validators for draft 2020-12,
2019-09 and draft-07.

Schemas and instances come from a small seeded grammar per dialect (deterministic: the same pairs
every run). The 2019-09 grammar leaves out `dependencies`, which we keep as a compatibility keyword
there (as the suite's optional dependencies-compatibility file describes) and python-jsonschema ignores.
`format` is left out (python-jsonschema does not assert it by default), and so is multipleOf with
non-binary fractions (python-jsonschema uses float division there; we use exact decimals on purpose).
Skipped when jsonschema is not installed.
"""

from __future__ import annotations

import random
import unittest

from agent_lab.schema import DRAFT_07, DRAFT_2019_09, SchemaError, Validator

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
    """A tiny random generator of schemas (2020-12 unless given another keyword table) and JSON instances."""

    def __init__(self, seed: int, values=None, definitions: str = "$defs") -> None:
        self.random = random.Random(seed)
        self.values = values or _VALUES
        self.keywords = tuple(self.values)
        self.definitions = definitions

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
            keyword = self.random.choice(self.keywords)
            if keyword == "$ref" and not allow_ref:
                continue
            schema[keyword] = self.values[keyword](self, depth - 1, allow_ref)
        return schema

    def root(self):
        root = self.schema(3)
        if isinstance(root, dict) and self.random.random() < 0.3:
            root[self.definitions] = {"d0": self.schema(2, allow_ref=False)}
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

# draft 2019-09: items is a schema or a list (with additionalItems), no prefixItems; dependentRequired,
# dependentSchemas, minContains/maxContains and unevaluated* as in 2020-12.
_VALUES_2019_09 = {keyword: make for keyword, make in _VALUES.items() if keyword != "prefixItems"}
_VALUES_2019_09.update({
    "items": lambda g, d, r: g.schema(d, r) if g.random.random() < 0.5 else g.subschemas(d, r, 1, 2),
    "additionalItems": lambda g, d, r: g.schema(d, r),
})

# draft-07: definitions, dependencies (names or a schema), items/additionalItems, if/then/else; no
# dependent*, unevaluated* or min/maxContains; a $ref hides its siblings.
_VALUES_07 = {keyword: make for keyword, make in _VALUES_2019_09.items() if keyword not in (
    "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "minContains",
    "maxContains")}
_VALUES_07.update({
    "dependencies": lambda g, d, r: {g.random.choice(KEYS): g.random.choice([g.random.sample(KEYS, 1), g.schema(d, r)])},
    "$ref": lambda g, d, r: "#/definitions/d0",
})
_DIALECT_GRAMMARS = {
    DRAFT_2019_09: (_VALUES_2019_09, "$defs"),
    DRAFT_07: (_VALUES_07, "definitions"),
}


def generate_pairs(seed: int = SEED, schemas: int = SCHEMA_COUNT, per_schema: int = INSTANCES_PER_SCHEMA,
                   dialect: str | None = None):
    """Yield (schema, [instances]) deterministically (2020-12, or `dialect`'s grammar)."""
    values, definitions = _DIALECT_GRAMMARS.get(dialect, (_VALUES, "$defs"))
    grammar = _Grammar(seed, values, definitions)
    for _ in range(schemas):
        root = grammar.root()
        if isinstance(root, dict) and "$ref" in str(root) and definitions not in root:
            _drop_refs(root)
        if dialect is not None and isinstance(root, dict):
            root["$schema"] = dialect
        yield root, [grammar.instance(3) for _ in range(per_schema)]


ROOT_ID = "https://example.com/root.json"
INNER_ID = "https://example.com/nested/inner.json"


class _ReferenceGrammar(_Grammar):
    """Schemas with two resources, anchors, recursive and dynamic references, and coherent combinations
    (if with then/else, contains with min/maxContains, unevaluated* beside applicators), over member
    names that need JSON Pointer escaping and strings outside the BMP."""

    keys = ("a", "b/c", "~d", "\u00e9")
    scalars = SCALARS + ("\u00e9", "\U0001F600", 2.0)

    def instance(self, depth: int = 3):
        choice = self.random.random()
        if depth <= 0 or choice < 0.5:
            return self.random.choice(self.scalars)
        if choice < 0.75:
            return [self.instance(depth - 1) for _ in range(self.random.randint(0, 4))]
        return {key: self.instance(depth - 1) for key in self.random.sample(self.keys, self.random.randint(0, 4))}

    def schema(self, depth: int, allow_ref: bool = False):
        """References only below keywords that descend into the instance, so none can cycle in place."""
        if depth <= 0 or self.random.random() < 0.2:
            return self.random.choice([True, False, {}, {"type": self.random.choice(TYPES)}])
        schema: dict = {}
        for _ in range(self.random.randint(1, 4)):
            self.allow_ref = allow_ref  # (a nested call may have changed it)
            self.random.choice(self.keyword_makers)(self, schema, depth - 1)
        return schema

    def root(self):
        root = self.schema(4)
        if isinstance(root, bool):
            return root
        inner = self.schema(2)
        anchored = self.schema(2)
        inner = inner if isinstance(inner, dict) else {"not": inner}
        anchored = anchored if isinstance(anchored, dict) else {"not": anchored}
        anchored["$anchor"] = "A"
        self.name_resources(root, inner)
        root["$defs"] = {"inner": inner, "anchored": anchored}
        return root

    def name_resources(self, root, inner):
        inner.update({"$id": "nested/inner.json", "$dynamicAnchor": "node"})
        root.update({"$id": ROOT_ID, "$dynamicAnchor": "node"})

    def _if(self, schema, depth):
        schema["if"] = self.schema(depth)
        for branch in ("then", "else"):
            if self.random.random() < 0.8:
                schema[branch] = self.schema(depth)

    def _contains(self, schema, depth):
        schema["contains"] = self.schema(depth, allow_ref=True)
        for bound in ("minContains", "maxContains"):
            if self.random.random() < 0.5:
                schema[bound] = self.random.randint(0, 3)

    def _reference(self, schema, depth):
        if self.allow_ref:
            schema["$ref"] = self.random.choice([ROOT_ID + "#A", INNER_ID])

    def _dynamic_reference(self, schema, depth):
        if self.allow_ref:
            schema["$dynamicRef"] = self.random.choice(["#node", ROOT_ID + "#/$defs/inner"])

    def _unevaluated(self, schema, depth):
        keyword = self.random.choice(["unevaluatedProperties", "unevaluatedItems"])
        schema[keyword] = self.random.choice([False, self.schema(depth, allow_ref=True)])

    def _properties(self, schema, depth):
        schema["properties"] = {key: self.schema(depth, allow_ref=True) for key in self.random.sample(self.keys, 2)}

    def _prefix_items(self, schema, depth):
        schema["prefixItems"] = [self.schema(depth, allow_ref=True) for _ in range(self.random.randint(1, 3))]

    def _dependent_schemas(self, schema, depth):
        schema["dependentSchemas"] = {self.random.choice(self.keys): self.schema(depth)}

    def _applicator(self, schema, depth):
        keyword = self.random.choice(["allOf", "anyOf", "oneOf"])
        schema[keyword] = [self.schema(depth) for _ in range(self.random.randint(1, 3))]

    def _simple(self, schema, depth):
        keyword = self.random.choice([name for name in _KEYWORDS if name not in _STRUCTURED])
        schema[keyword] = _VALUES[keyword](self, depth, False)

    keyword_makers = (_if, _contains, _reference, _dynamic_reference, _unevaluated, _properties, _prefix_items,
                      _dependent_schemas, _applicator, _simple, _simple, _simple)


class _RecursiveReferenceGrammar(_ReferenceGrammar):
    """The same references and combinations in draft 2019-09: `$recursiveRef` and `$recursiveAnchor`
    instead of the dynamic keywords, and a list-form `items` with `additionalItems` beside unevaluatedItems."""

    def name_resources(self, root, inner):
        inner.update({"$id": "nested/inner.json", "$recursiveAnchor": self.random.random() < 0.7})
        root.update({"$schema": DRAFT_2019_09, "$id": ROOT_ID, "$recursiveAnchor": self.random.random() < 0.7})

    def _dynamic_reference(self, schema, depth):
        if self.allow_ref:
            schema["$recursiveRef"] = "#"

    def _prefix_items(self, schema, depth):
        schema["items"] = [self.schema(depth, allow_ref=True) for _ in range(self.random.randint(1, 3))]
        if self.random.random() < 0.6:
            schema["additionalItems"] = self.schema(depth, allow_ref=True)

    def _simple(self, schema, depth):
        keyword = self.random.choice([name for name in _KEYWORDS if name not in _STRUCTURED])
        schema[keyword] = _VALUES_2019_09[keyword](self, depth, False)

    keyword_makers = (_ReferenceGrammar._if, _ReferenceGrammar._contains, _ReferenceGrammar._reference,
                      _dynamic_reference, _ReferenceGrammar._unevaluated, _ReferenceGrammar._properties,
                      _prefix_items, _ReferenceGrammar._dependent_schemas, _ReferenceGrammar._applicator,
                      _simple, _simple, _simple)


def _python_jsonschema_2019_09_blind_spot(schema) -> bool:
    """Shapes where python-jsonschema's 2019-09 validator departs from the specification, left out:
    it counts `contains` matches as evaluated for `unevaluatedItems` (2020-12 behaviour; draft 2019-09
    section 9.3.1.4 names only items, additionalItems and unevaluatedItems), and for `unevaluatedProperties`
    it reads a schema-valued `additionalProperties`/`unevaluatedProperties` as the list of its own keyword
    names instead of every property it evaluated."""
    found: set = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for keyword, value in node.items():
                found.add(keyword)
                if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(value, dict):
                    found.add("schema-valued " + keyword)
                if keyword not in ("enum", "const"):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return ({"unevaluatedItems", "contains"} <= found or "unevaluatedProperties" in found and bool(
        {"schema-valued additionalProperties", "schema-valued unevaluatedProperties"} & found))


_STRUCTURED = {"$ref", "if", "then", "else", "contains", "minContains", "maxContains", "unevaluatedProperties",
               "unevaluatedItems", "properties", "prefixItems", "dependentSchemas", "allOf", "anyOf", "oneOf"}


@unittest.skipIf(jsonschema is None, "python-jsonschema is not installed (pip install jsonschema)")
class DifferentialTests(unittest.TestCase):
    def test_references_dynamic_scopes_and_combined_keywords_agree_with_python_jsonschema(self):
        self.assert_reference_grammar_agrees(_ReferenceGrammar(SEED + 1), 400, jsonschema.Draft202012Validator)

    def test_2019_09_references_recursive_anchors_and_combined_keywords_agree_with_python_jsonschema(self):
        self.assert_reference_grammar_agrees(_RecursiveReferenceGrammar(SEED + 2), 1200, jsonschema.Draft201909Validator,
                                             leave_out=_python_jsonschema_2019_09_blind_spot)

    def assert_reference_grammar_agrees(self, grammar, schemas, their_validator, leave_out=None):
        disagreements, compared = [], 0
        for _ in range(schemas):
            schema = grammar.root()
            instances = [grammar.instance() for _ in range(INSTANCES_PER_SCHEMA)]
            if leave_out is not None and leave_out(schema):
                continue
            try:
                ours = Validator(schema)
            except SchemaError as error:  # the grammar never builds an in-place reference cycle
                self.fail(f"{schema} refused: {error}")
            theirs = their_validator(schema)
            for instance in instances:
                compared += 1
                verdict = ours.is_valid(instance)
                self.assertEqual(ours.errors(instance) == [], verdict, (schema, instance))
                if verdict != theirs.is_valid(instance):
                    disagreements.append((schema, instance))
        self.assertGreaterEqual(compared, 2000)
        self.assertEqual(disagreements[:3], [], f"{len(disagreements)} of {compared} verdicts differ")

    def test_2019_09_verdicts_agree_with_python_jsonschema(self):
        self.assert_dialect_agrees(DRAFT_2019_09, jsonschema.Draft201909Validator)

    def test_draft_07_verdicts_agree_with_python_jsonschema(self):
        self.assert_dialect_agrees(DRAFT_07, jsonschema.Draft7Validator)

    def assert_dialect_agrees(self, dialect, their_validator):
        disagreements, compared = [], 0
        for schema, instances in generate_pairs(dialect=dialect):
            ours = Validator(schema)
            self.assertEqual(ours.dialect, dialect if isinstance(schema, dict) else ours.dialect)
            theirs = their_validator(schema)
            for instance in instances:
                compared += 1
                expected = theirs.is_valid(instance)
                if ours.is_valid(instance) != expected or (ours.errors(instance) == []) != expected:
                    disagreements.append((schema, instance, expected))
        self.assertGreaterEqual(compared, 6000)
        self.assertEqual(disagreements[:5], [], f"{len(disagreements)} of {compared} verdicts differ")

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
