"""Converting older dialects to draft 2020-12 keeps the meaning: what each rule rewrites, what it
refuses (keyword + pointer into the original), that nothing is mutated, and two faithfulness checks:
every case of the official suite of 2019-09, draft-07, -06 and -04 gets the same verdict from the
converted schema read as 2020-12, and seeded generated schemas and instances agree between the original
(in its dialect) and the conversion (in 2020-12)."""

from __future__ import annotations

import copy
import json
import sys
import unittest

from agent_lab.schema import (DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, DRAFT_2020_12, MAX_SCHEMA_DEPTH, SchemaError,
                              Validator)
from agent_lab.schema.convert import SchemaConversionError, original_pointer, to_draft_2020_12

import test_schema_differential as grammars
import test_schema_suite as suite


def converted(schema, **options):
    result = to_draft_2020_12(schema, **options)
    Validator(result)  # it is a valid 2020-12 schema (the meta-schema check runs here)
    return result


class ConversionRuleTests(unittest.TestCase):
    def test_definitions_become_defs_and_references_follow_them(self):
        schema = {"$schema": DRAFT_07, "type": "object",
                  "properties": {"when": {"$ref": "#/definitions/date"}},
                  "definitions": {"date": {"type": "string", "pattern": "^[0-9]{4}-"}}}
        self.assertEqual(converted(schema), {
            "type": "object", "properties": {"when": {"$ref": "#/$defs/date"}},
            "$defs": {"date": {"type": "string", "pattern": "^[0-9]{4}-"}},
        })

    def test_dependencies_split_into_dependent_required_and_dependent_schemas(self):
        schema = {"dependencies": {"card": ["billing"], "vip": {"required": ["tier"]}}}
        self.assertEqual(converted(schema, dialect=DRAFT_07), {
            "dependentRequired": {"card": ["billing"]}, "dependentSchemas": {"vip": {"required": ["tier"]}},
        })

    def test_a_list_of_items_becomes_prefix_items_and_additional_items_becomes_items(self):
        schema = {"$schema": DRAFT_2019_09, "items": [{"type": "string"}, {"type": "integer"}],
                  "additionalItems": False}
        self.assertEqual(converted(schema), {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False})
        self.assertEqual(converted({"items": {"type": "string"}, "additionalItems": False}, dialect=DRAFT_07),
                         {"items": {"type": "string"}})  # additionalItems was ignored beside a single items schema

    def test_reference_into_a_moved_tuple_position_is_rewritten(self):
        schema = {"$schema": DRAFT_07, "items": [{"type": "string"}], "additionalItems": {"$ref": "#/items/0"}}
        self.assertEqual(converted(schema), {"prefixItems": [{"type": "string"}], "items": {"$ref": "#/prefixItems/0"}})

    def test_draft_04_boolean_exclusive_bounds_become_numeric(self):
        schema = {"$schema": DRAFT_04, "type": "number", "minimum": 0, "exclusiveMinimum": True,
                  "maximum": 10, "exclusiveMaximum": False}
        self.assertEqual(converted(schema), {"type": "number", "exclusiveMinimum": 0, "maximum": 10})

    def test_id_becomes_dollar_id_and_a_plain_name_id_becomes_an_anchor(self):
        schema = {"$schema": DRAFT_04, "id": "https://example.com/tool.json",
                  "properties": {"a": {"$ref": "#addr"}}, "definitions": {"addr": {"id": "#addr", "type": "string"}}}
        self.assertEqual(converted(schema), {
            "$id": "https://example.com/tool.json", "properties": {"a": {"$ref": "#addr"}},
            "$defs": {"addr": {"$anchor": "addr", "type": "string"}},
        })

    def test_siblings_of_ref_are_left_out_before_2019_09_but_annotations_and_definitions_stay(self):
        schema = {"$schema": DRAFT_07, "$ref": "#/definitions/a", "description": "An a.", "maxLength": 1,
                  "$id": "https://example.com/ignored", "definitions": {"a": {"type": "string"}}}
        self.assertEqual(converted(schema), {"$ref": "#/$defs/a", "description": "An a.",
                                             "$defs": {"a": {"type": "string"}}})

    def test_a_type_beside_ref_stays_when_the_target_declares_the_same_type(self):
        # Hosts want "type": "object" at the root; it changes nothing when the referenced schema says so too.
        schema = {"$schema": DRAFT_07, "type": "object", "$ref": "#/definitions/Args",
                  "definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}}}
        self.assertEqual(converted(schema), {"type": "object", "$ref": "#/$defs/Args",
                                             "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}}})
        schema["definitions"]["Args"]["type"] = ["object", "null"]
        self.assertNotIn("type", converted(schema))

    def test_keywords_the_old_dialect_ignores_do_not_start_to_count(self):
        schema = {"$schema": DRAFT_07, "type": "array", "contains": {"type": "string"}, "minContains": 3,
                  "prefixItems": [False], "unevaluatedItems": False, "x-ui": {"order": 1}}
        self.assertEqual(converted(schema), {"type": "array", "contains": {"type": "string"}, "x-ui": {"order": 1}})

    def test_a_2020_12_schema_comes_back_as_an_equal_copy(self):
        schema = {"$schema": DRAFT_2020_12, "prefixItems": [{"const": 1}], "dependencies": {"a": ["b"]}}
        result = to_draft_2020_12(schema)
        self.assertEqual(result, schema)
        self.assertIsNot(result["prefixItems"], schema["prefixItems"])

    def test_the_input_is_never_modified_and_shares_nothing_with_the_result(self):
        schema = {"$schema": DRAFT_07, "definitions": {"a": {"enum": [[1], {"b": 2}]}},
                  "properties": {"x": {"$ref": "#/definitions/a"}}, "dependencies": {"x": ["y"]}}
        before = copy.deepcopy(schema)
        result = to_draft_2020_12(schema)
        self.assertEqual(schema, before)
        result["$defs"]["a"]["enum"][0].append(2)
        result["dependentRequired"]["x"].append("z")
        self.assertEqual(schema, before)

    def test_recursive_ref_to_a_recursive_anchor_is_refused_with_its_pointer(self):
        schema = {"$schema": DRAFT_2019_09, "$recursiveAnchor": True,
                  "properties": {"child": {"$recursiveRef": "#"}}}
        with self.assertRaises(SchemaConversionError) as caught:
            to_draft_2020_12(schema)
        self.assertEqual((caught.exception.keyword, caught.exception.path),
                         ("$recursiveRef", "/properties/child/$recursiveRef"))
        plain = {"$schema": DRAFT_2019_09, "properties": {"child": {"$recursiveRef": "#"}}}
        self.assertEqual(converted(plain), {"properties": {"child": {"$ref": "#"}}})

    def test_unevaluated_items_beside_contains_in_2019_09_is_refused(self):
        schema = {"$schema": DRAFT_2019_09, "allOf": [{"contains": {"type": "string"}}], "unevaluatedItems": False}
        with self.assertRaises(SchemaConversionError) as caught:
            to_draft_2020_12(schema)
        self.assertEqual((caught.exception.keyword, caught.exception.path), ("unevaluatedItems", "/unevaluatedItems"))

    def test_an_anchor_name_2020_12_does_not_allow_is_refused(self):
        with self.assertRaises(SchemaConversionError) as caught:
            to_draft_2020_12({"$schema": DRAFT_07, "definitions": {"a": {"$id": "#1st"}}})
        self.assertEqual(caught.exception.path, "/definitions/a/$id")

    def test_an_old_dialect_defs_that_2020_12_cannot_read_is_refused_not_converted_to_an_invalid_schema(self):
        # `$defs` means nothing to draft-07 (its meta-schema never checks it); its members became the
        # converted schema's `$defs`, which 2020-12 checks: Validator(result) raised SchemaError.
        for schema, path in (({"$schema": DRAFT_07, "$defs": {"y": 5}}, "/$defs/y"),
                             ({"$schema": DRAFT_06, "$defs": {"y": {"items": [], "additionalItems": {}}}},
                              "/$defs/y/items"),
                             ({"$schema": DRAFT_04, "definitions": {"x": {}}, "$defs": {"y": {"type": "strin"}}},
                              "/$defs/y/type")):
            with self.subTest(schema=schema):
                with self.assertRaises(SchemaConversionError) as caught:
                    to_draft_2020_12(schema)
                self.assertEqual(caught.exception.path, path)
        self.assertEqual(converted({"$schema": DRAFT_07, "$defs": {"y": {"type": "string"}}, "$ref": "#/$defs/y"}),
                         {"$defs": {"y": {"type": "string"}}, "$ref": "#/$defs/y"})

    def test_a_schema_nested_1500_deep_is_a_conversion_error_with_its_pointer_not_a_recursion_error(self):
        for dialect in (DRAFT_07, DRAFT_2019_09, DRAFT_04, DRAFT_2020_12):
            with self.subTest(dialect=dialect):
                schema = {"type": "string"}
                for _ in range(1500):
                    schema = {"items": schema}
                schema["$schema"] = dialect
                with self.assertRaises(SchemaConversionError) as refused:
                    to_draft_2020_12(schema)
                self.assertEqual(refused.exception.path, "/items" * MAX_SCHEMA_DEPTH)
                self.assertEqual(refused.exception.keyword, "items")
                self.assertIn(f"nested deeper than {MAX_SCHEMA_DEPTH} levels", str(refused.exception))

    def test_a_schema_within_the_limit_that_runs_out_of_stack_is_a_conversion_error_too(self):
        schema = {"$schema": DRAFT_07, "type": "string"}
        for _ in range(MAX_SCHEMA_DEPTH - 1):
            schema = {"$schema": DRAFT_07, "not": schema}

        def convert_with_little_stack_left(frames_left: int):
            if frames_left:
                return convert_with_little_stack_left(frames_left - 1)
            return to_draft_2020_12(schema)

        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        with self.assertRaises(SchemaConversionError) as refused:  # about 60 frames left for the conversion
            convert_with_little_stack_left(sys.getrecursionlimit() - depth - 60)
        self.assertIn("nested too deeply to convert", str(refused.exception))

    def test_an_unknown_dialect_is_a_schema_error_naming_it(self):
        with self.assertRaisesRegex(SchemaError, "draft-03"):
            to_draft_2020_12({"$schema": "http://json-schema.org/draft-03/schema#"})

    def test_draft_04_integer_is_widened_to_integral_numbers_as_documented(self):
        original = Validator({"type": "integer"}, dialect=DRAFT_04)
        result = Validator(converted({"type": "integer"}, dialect=DRAFT_04))
        self.assertEqual((original.is_valid(1.0), result.is_valid(1.0)), (False, True))
        self.assertEqual([original.is_valid(x) for x in (1, 1.5, "1")], [result.is_valid(x) for x in (1, 1.5, "1")])


def _with_dialect(document, dialect):
    """A remote document without `$schema` as the suite means it: in the dialect of the folder."""
    if isinstance(document, dict) and "$schema" not in document:
        return dict(document, **{"$schema": dialect})
    return document


class SuiteFaithfulnessTests(unittest.TestCase):
    """Every suite schema of the older dialects, converted and read as 2020-12, gives the suite's verdicts."""

    # The one documented difference: draft-04's integer excludes numbers written with a fraction.
    KNOWN_DIFFERENCES = {("draft4", "optional/zeroTerminatedFloats.json")}

    def test_converted_suite_schemas_give_the_suite_verdicts(self):
        if not (suite.SUITE_ROOT / "tests").is_dir():
            self.skipTest(f"JSON Schema Test Suite not found at {suite.SUITE_ROOT}")
        remotes = suite._remote_resources()
        for folder, dialect in suite.DIALECT_FOLDERS.items():
            if dialect == DRAFT_2020_12:
                continue
            resources = {uri: _with_dialect(document, dialect) for uri, document in remotes.items()}
            agreed = refused = 0
            for relative, groups in suite.suite_files(folder):
                if relative.startswith("optional/format/") or (folder, relative) in self.KNOWN_DIFFERENCES \
                        or suite.skip_reason(folder, relative, ""):
                    continue
                for group in groups:
                    declared = group["schema"].get("$schema") if isinstance(group["schema"], dict) else None
                    if declared is not None and declared.startswith("http://localhost:1234/"):
                        continue  # a custom meta-schema: not a dialect an export converts from
                    try:
                        result = to_draft_2020_12(group["schema"], dialect=dialect)
                    except SchemaConversionError:
                        refused += 1
                        continue
                    validator = Validator(result, resources=resources)
                    for case in group["tests"]:
                        with self.subTest(folder=folder, file=relative, group=group["description"],
                                          case=case["description"]):
                            self.assertEqual(validator.is_valid(case["data"]), case["valid"], json.dumps(result))
                            agreed += 1
            with self.subTest(folder=folder):
                self.assertGreater(agreed, 500)
                self.assertLessEqual(refused, 10)  # only $recursiveRef recursion and contains+unevaluatedItems


# draft-06 and draft-04 grammars, from draft-07's: no if/then/else; draft-04 also without const,
# contains and propertyNames, with boolean exclusive bounds beside minimum/maximum.
_VALUES_06 = {keyword: make for keyword, make in grammars._VALUES_07.items() if keyword not in ("if", "then", "else")}
_VALUES_04 = {keyword: make for keyword, make in _VALUES_06.items()
              if keyword not in ("const", "contains", "propertyNames", "exclusiveMinimum", "exclusiveMaximum")}
_VALUES_04.update({
    "exclusiveMinimum": lambda g, d, r: g.random.choice([True, False]),
    "exclusiveMaximum": lambda g, d, r: g.random.choice([True, False]),
    "additionalProperties": lambda g, d, r: g.random.choice([True, False, g.schema(d, r)]),
})
_GRAMMARS = {
    DRAFT_2019_09: (grammars._VALUES_2019_09, "$defs"),
    DRAFT_07: (grammars._VALUES_07, "definitions"),
    DRAFT_06: (_VALUES_06, "definitions"),
    DRAFT_04: (_VALUES_04, "definitions"),
}


def _draft_04_schema(schema):
    """Draft-04 has no boolean schemas except as additionalProperties/additionalItems: spell them out."""
    if schema is True:
        return {}
    if schema is False:
        return {"not": {}}
    if isinstance(schema, dict):
        return {key: (value if key in ("additionalProperties", "additionalItems") and isinstance(value, bool)
                      else _draft_04_value(key, value)) for key, value in schema.items()}
    return schema


def _draft_04_value(keyword, value):
    if keyword in ("enum", "const", "required", "type", "pattern"):
        return value
    if keyword == "required" and not value:
        return value
    if isinstance(value, list):
        return [_draft_04_schema(item) for item in value]
    if keyword in ("properties", "patternProperties", "definitions", "dependencies"):
        return {name: (item if isinstance(item, list) else _draft_04_schema(item)) for name, item in value.items()}
    if isinstance(value, (dict, bool)) and keyword in grammars._VALUES_07:
        return _draft_04_schema(value)
    return value


class GeneratedFaithfulnessTests(unittest.TestCase):
    """Seeded schemas and instances: the original in its dialect and the conversion in 2020-12 agree."""

    SCHEMAS = 600

    @staticmethod
    def compare(original, schema, dialect, instances, disagreements, compared, refused):
        """Convert `schema` and note each instance the original and the conversion judge differently;
        returns the updated (compared, refused) counts."""
        try:
            result = to_draft_2020_12(schema, dialect=dialect)
        except SchemaConversionError:
            return compared, refused + 1
        ours = Validator(result)
        for instance in instances:
            if original.is_valid(instance) != ours.is_valid(instance):
                disagreements.append((schema, result, instance))
        return compared + len(instances), refused

    def test_original_and_converted_schemas_accept_the_same_instances(self):
        for dialect, (values, definitions) in _GRAMMARS.items():
            grammar = grammars._Grammar(grammars.SEED + 14, values, definitions)
            compared = refused = invalid = 0
            disagreements = []
            for _ in range(self.SCHEMAS):
                schema = grammar.root()
                if dialect == DRAFT_04:
                    schema = _draft_04_schema(schema)
                    if isinstance(schema, dict) and "$ref" in json.dumps(schema) and definitions not in schema:
                        grammars._drop_refs(schema)
                elif isinstance(schema, dict) and "$ref" in json.dumps(schema) and definitions not in schema:
                    grammars._drop_refs(schema)
                instances = [grammar.instance(3) for _ in range(grammars.INSTANCES_PER_SCHEMA)]
                if dialect == DRAFT_04:  # the documented integer difference: no integral floats
                    instances = [json.loads(json.dumps(item).replace(".0", ".5")) for item in instances]
                try:
                    original = Validator(schema, dialect=dialect)
                except SchemaError:
                    invalid += 1  # (draft-04's meta-schema refuses, e.g., an empty required list)
                    continue
                compared, refused = self.compare(original, schema, dialect, instances, disagreements,
                                                 compared, refused)
            with self.subTest(dialect=dialect):
                self.assertGreaterEqual(compared, 2000, (refused, invalid))
                self.assertEqual(disagreements[:3], [], f"{len(disagreements)} of {compared} verdicts differ")

    def test_2019_09_recursive_references_convert_faithfully_or_are_refused(self):
        grammar = grammars._RecursiveReferenceGrammar(grammars.SEED + 15)
        compared = refused = 0
        disagreements = []
        for _ in range(300):
            schema = grammar.root()
            instances = [grammar.instance() for _ in range(grammars.INSTANCES_PER_SCHEMA)]
            compared, refused = self.compare(Validator(schema), schema, DRAFT_2019_09, instances, disagreements,
                                             compared, refused)
        self.assertGreaterEqual(compared, 300, refused)
        self.assertEqual(disagreements[:3], [], f"{len(disagreements)} of {compared} verdicts differ")


class OriginalPointerTest(unittest.TestCase):
    """A pointer into the converted schema, read back into the schema as written (what a refusal of the
    converted schema, such as strict mode's, names)."""

    SCHEMA = {"$schema": DRAFT_07, "type": "object",
              "properties": {"slot": {"type": "array", "items": [{"type": "integer"}],
                                      "additionalItems": {"type": "string"}}},
              "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
              "definitions": {"x": {"type": "string", "maxLength": 3}}}

    def test_every_place_of_the_converted_schema_is_found_where_it_was_written(self) -> None:
        converted = to_draft_2020_12(self.SCHEMA)
        cases = {"": "", "/dependentRequired": "/dependencies", "/dependentRequired/a/0": "/dependencies/a/0",
                 "/dependentSchemas/c/required": "/dependencies/c/required",
                 "/properties/slot/prefixItems/0/type": "/properties/slot/items/0/type",
                 "/properties/slot/items": "/properties/slot/additionalItems",
                 "/$defs/x/maxLength": "/definitions/x/maxLength", "/properties/slot/type": "/properties/slot/type"}
        for new, old in cases.items():
            with self.subTest(pointer=new):
                self.assertTrue(_resolves(converted, new))
                self.assertEqual(original_pointer(self.SCHEMA, new), old)
                self.assertTrue(_resolves(self.SCHEMA, old))

    def test_a_2020_12_schema_keeps_its_pointers(self) -> None:
        self.assertEqual(original_pointer({"prefixItems": [{}], "$defs": {}}, "/prefixItems/0"), "/prefixItems/0")


def _resolves(document, pointer: str) -> bool:
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(document, list) and token.isdigit() and int(token) < len(document):
            document = document[int(token)]
        elif isinstance(document, dict) and token in document:
            document = document[token]
        else:
            return False
    return True


if __name__ == "__main__":
    unittest.main()
