"""Where violations point: instance paths, keyword paths, keywords, order and messages, per keyword.

Also the promises about bad input: non-JSON values, nesting limits, reference cycles and invalid
schemas give values or SchemaErrors that say where, never a crash, and never echo the instance value.
"""

from __future__ import annotations

import enum
import threading
import unittest
from fractions import Fraction

from agent_lab.schema import MAX_INSTANCE_DEPTH, MAX_SCHEMA_DEPTH, SchemaError, Validator, Violation

SECRET = "sk-live-51HSECRETTOKEN"


def only(violations):
    """The single violation of a list (fails loudly when there are several)."""
    if len(violations) != 1:
        raise AssertionError(f"expected one violation, got {violations}")
    return violations[0]


class ViolationPathTests(unittest.TestCase):
    def assertViolation(self, schema, instance, instance_path, keyword_path, keyword, **options):
        validator = Validator(schema, **options)
        self.assertFalse(validator.is_valid(instance))
        found = only(validator.errors(instance))
        self.assertEqual((found.instance_path, found.keyword_path, found.keyword),
                         (instance_path, keyword_path, keyword), found.message)
        return found

    def test_type_at_the_root(self):
        found = self.assertViolation({"type": "string"}, 3, "", "/type", "type")
        self.assertEqual(found.message, "value must be of type string (it is of type integer)")

    def test_nested_property_names_the_field(self):
        schema = {"properties": {"name": {"type": "string", "maxLength": 3}}}
        found = self.assertViolation(schema, {"name": "abcd"}, "/name", "/properties/name/maxLength", "maxLength")
        self.assertEqual(found.message, "'name' must be at most 3 characters long")

    def test_enum_message_lists_the_allowed_values(self):
        schema = {"properties": {"priority": {"enum": ["low", "normal", "high"]}}}
        found = self.assertViolation(schema, {"priority": "urgent"}, "/priority", "/properties/priority/enum", "enum")
        self.assertEqual(found.message, "'priority' must be one of: low, normal, high")

    def test_items_point_at_the_item_index(self):
        schema = {"items": {"type": "integer"}}
        self.assertViolation(schema, [1, 2, "x"], "/2", "/items/type", "type")

    def test_prefix_items_point_at_their_position(self):
        schema = {"prefixItems": [{"type": "integer"}, {"type": "string"}]}
        self.assertViolation(schema, [1, 2], "/1", "/prefixItems/1/type", "type")

    def test_items_false_after_prefix_items_limits_the_length(self):
        schema = {"prefixItems": [{}], "items": False}
        self.assertViolation(schema, [1, 2], "", "/items", "items")

    def test_required_is_reported_on_the_object_and_names_the_missing_field(self):
        found = self.assertViolation({"required": ["name"]}, {}, "", "/required", "required")
        self.assertEqual(found.message, "'name' is required")
        nested = {"properties": {"owner": {"required": ["id"]}}}
        found = self.assertViolation(nested, {"owner": {}}, "/owner", "/properties/owner/required", "required")
        self.assertEqual(found.message, "'owner/id' is required")

    def test_additional_property_points_at_the_extra_member(self):
        schema = {"properties": {"a": {}}, "additionalProperties": False}
        found = self.assertViolation(schema, {"a": 1, "b": 2}, "/b", "/additionalProperties", "additionalProperties")
        self.assertEqual(found.message, "'b' is not an allowed property")

    def test_pointer_tokens_are_escaped(self):
        schema = {"properties": {"a/b~c": {"type": "string"}}}
        self.assertViolation(schema, {"a/b~c": 1}, "/a~1b~0c", "/properties/a~1b~0c/type", "type")

    def test_ref_appears_in_the_keyword_path(self):
        schema = {"$defs": {"count": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/count"}}}
        self.assertViolation(schema, {"n": -1}, "/n", "/properties/n/$ref/minimum", "minimum")

    def test_all_of_points_into_the_failing_branch(self):
        schema = {"allOf": [{"type": "integer"}, {"minimum": 5}]}
        self.assertViolation(schema, 3, "", "/allOf/1/minimum", "minimum")

    def test_any_of_and_one_of_report_one_violation(self):
        self.assertViolation({"anyOf": [{"type": "string"}, {"type": "null"}]}, 1, "", "/anyOf", "anyOf")
        found = self.assertViolation({"oneOf": [{"minimum": 0}, {"maximum": 10}]}, 5, "", "/oneOf", "oneOf")
        self.assertIn("it matches 2", found.message)

    def test_any_of_over_plain_types_says_which_types(self):
        schema = {"properties": {"due": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
        found = self.assertViolation(schema, {"due": 3}, "/due", "/properties/due/anyOf", "anyOf")
        self.assertEqual(found.message, "'due' must be of type string or null")

    def test_not_reports_the_not_keyword(self):
        self.assertViolation({"not": {"type": "string"}}, "x", "", "/not", "not")

    def test_if_then_else_points_into_the_branch_taken(self):
        schema = {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]},
                  "else": {"required": ["y"]}}
        self.assertViolation(schema, {"kind": "a"}, "", "/then/required", "required")
        self.assertViolation(schema, {"kind": "b"}, "", "/else/required", "required")

    def test_dependent_required_names_the_trigger(self):
        found = self.assertViolation({"dependentRequired": {"card": ["cvc"]}}, {"card": "1"}, "",
                                     "/dependentRequired/card", "dependentRequired")
        self.assertEqual(found.message, "'cvc' is required when 'card' is present")

    def test_dependent_schemas_point_into_the_dependent_schema(self):
        schema = {"dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}}
        self.assertViolation(schema, {"a": 1, "b": "x"}, "/b", "/dependentSchemas/a/properties/b/type", "type")

    def test_property_names_point_at_the_offending_name(self):
        self.assertViolation({"propertyNames": {"maxLength": 2}}, {"abc": 1}, "/abc", "/propertyNames", "propertyNames")

    def test_pattern_properties_use_the_pattern_as_a_token(self):
        schema = {"patternProperties": {"^x": {"type": "integer"}}}
        self.assertViolation(schema, {"xa": "no"}, "/xa", "/patternProperties/^x/type", "type")

    def test_contains_and_max_contains(self):
        self.assertViolation({"contains": {"type": "string"}}, [1, 2], "", "/contains", "contains")
        self.assertViolation({"contains": {"type": "string"}, "maxContains": 1}, ["a", "b"], "",
                             "/maxContains", "maxContains")
        self.assertViolation({"contains": {"type": "string"}, "minContains": 2}, ["a", 1], "",
                             "/minContains", "minContains")

    def test_validation_keywords_name_themselves(self):
        cases = [
            ({"const": "x"}, "y", "const"),
            ({"multipleOf": 3}, 4, "multipleOf"),
            ({"exclusiveMaximum": 3}, 3, "exclusiveMaximum"),
            ({"exclusiveMinimum": 3}, 3, "exclusiveMinimum"),
            ({"maximum": 3}, 4, "maximum"),
            ({"minLength": 2}, "a", "minLength"),
            ({"pattern": "^a"}, "b", "pattern"),
            ({"maxItems": 1}, [1, 2], "maxItems"),
            ({"minItems": 1}, [], "minItems"),
            ({"uniqueItems": True}, [1, 1.0], "uniqueItems"),
            ({"maxProperties": 0}, {"a": 1}, "maxProperties"),
            ({"minProperties": 1}, {}, "minProperties"),
        ]
        for schema, instance, keyword in cases:
            with self.subTest(keyword):
                self.assertViolation(schema, instance, "", "/" + keyword, keyword)

    def test_false_schema_is_reported_as_false(self):
        self.assertViolation(False, 1, "", "", "false")
        self.assertViolation({"properties": {"a": False}}, {"a": 1}, "/a", "/properties/a", "false")

    def test_unevaluated_properties_point_at_the_unevaluated_member(self):
        schema = {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}
        self.assertViolation(schema, {"a": 1, "b": 2}, "/b", "/unevaluatedProperties", "unevaluatedProperties")

    def test_unevaluated_items_point_at_the_unevaluated_item(self):
        schema = {"prefixItems": [{}], "unevaluatedItems": False}
        self.assertViolation(schema, [1, 2], "/1", "/unevaluatedItems", "unevaluatedItems")

    def test_format_is_an_annotation_unless_asserted(self):
        self.assertTrue(Validator({"format": "ipv4"}).is_valid("not an address"))
        found = self.assertViolation({"format": "ipv4"}, "not an address", "", "/format", "format",
                                     format_assertion=True)
        self.assertEqual(found.message, "value must be a valid ipv4")


class OrderingTests(unittest.TestCase):
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 5}, "count": {"type": "integer", "minimum": 1}},
        "required": ["title", "owner"],
        "additionalProperties": False,
    }

    def test_every_violation_is_reported_in_schema_order(self):
        found = Validator(self.schema).errors({"title": "too long", "count": 0, "zzz": 1})
        self.assertEqual(
            [(item.instance_path, item.keyword) for item in found],
            [("/title", "maxLength"), ("/count", "minimum"), ("", "required"), ("/zzz", "additionalProperties")],
        )

    def test_order_is_the_same_on_every_call(self):
        validator = Validator(self.schema)
        instance = {"zzz": 1, "count": "x", "title": 3}
        self.assertEqual(validator.errors(instance), validator.errors(instance))

    def test_errors_is_empty_exactly_when_is_valid(self):
        validator = Validator(self.schema)
        for instance in ({"title": "ok", "owner": 1}, {"title": "ok", "owner": 1, "count": 2}, {}, [], "x"):
            with self.subTest(instance=instance):
                self.assertEqual(validator.is_valid(instance), validator.errors(instance) == [])

    def test_violations_are_frozen_values(self):
        found = Validator({"type": "string"}).errors(1)[0]
        self.assertEqual(found, Violation("", "/type", "type", found.message))
        with self.assertRaises(AttributeError):
            found.keyword = "x"  # type: ignore[misc]


class DataModelTests(unittest.TestCase):
    def test_bool_is_not_a_number_and_integral_float_is_an_integer(self):
        validator = Validator({"type": "integer"})
        self.assertFalse(validator.is_valid(True))
        self.assertTrue(validator.is_valid(1.0))
        self.assertTrue(validator.is_valid(10**30))

    def test_enum_treats_one_and_one_point_zero_alike_but_not_true(self):
        validator = Validator({"enum": [1, [0]]})
        self.assertTrue(validator.is_valid(1.0))
        self.assertFalse(validator.is_valid(True))
        self.assertFalse(validator.is_valid([False]))

    def test_multiple_of_has_no_binary_float_error(self):
        self.assertTrue(Validator({"multipleOf": 0.0001}).is_valid(0.0075))
        self.assertFalse(Validator({"multipleOf": 0.0001}).is_valid(0.00751))
        self.assertTrue(Validator({"multipleOf": 0.01}).is_valid(19.99))

    def test_multiple_of_reads_a_large_float_as_the_decimal_it_was_written_as(self):
        # json.loads("1e23") is the float nearest 10**23 (99999999999999991611392 in binary); the JSON
        # text means 10**23, a multiple of 10 and of 2.5 alike, so an integer divisor must agree.
        for divisor in (10, 2.5, 7):
            with self.subTest(divisor=divisor):
                validator = Validator({"multipleOf": divisor})
                expected = Fraction(10**23) % Fraction(str(divisor)) == 0
                self.assertEqual(validator.is_valid(1e23), expected)
                self.assertEqual(validator.is_valid(10**23), expected)
                self.assertEqual(validator.errors(1e23) == [], expected)

    def test_str_and_int_subclasses_count_as_their_json_values(self):
        class Level(str, enum.Enum):
            LOW = "low"

        class Count(enum.IntEnum):
            THREE = 3

        self.assertTrue(Validator({"type": "string", "enum": ["low", "high"]}).is_valid(Level.LOW))
        self.assertTrue(Validator({"enum": [3, "x"]}).is_valid(Count.THREE))
        self.assertFalse(Validator({"uniqueItems": True}).is_valid([Level.LOW, "low"]))
        self.assertFalse(Validator({"uniqueItems": True}).is_valid([Count.THREE, 3.0]))

    def test_min_length_counts_code_points(self):
        self.assertTrue(Validator({"maxLength": 1}).is_valid("\U0001F600"))


class BadInputTests(unittest.TestCase):
    fused = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}

    def test_non_json_values_give_a_json_violation(self):
        cases = [
            ((1, 2), ""), ({1}, ""), (b"x", ""), (float("nan"), ""), (float("inf"), ""), (object(), ""),
            ({"a": (1,)}, "/a"), ({1: "x"}, ""), ([1, {"b": b"x"}], "/1/b"),
        ]
        for schema in ({}, True, {"type": "array"}, self.fused):
            validator = Validator(schema)
            for instance, pointer in cases:
                with self.subTest(schema=schema, instance=repr(instance)):
                    self.assertFalse(validator.is_valid(instance))
                    found = only(validator.errors(instance))
                    self.assertEqual((found.keyword, found.instance_path), ("json", pointer))

    def test_nesting_deeper_than_the_limit_is_a_violation_not_a_recursion_error(self):
        deep: list = []
        for _ in range(5_000):
            deep = [deep]
        recursive = {"$defs": {"node": {"items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"}
        for schema in ({}, recursive):
            validator = Validator(schema)
            self.assertFalse(validator.is_valid(deep))
            found = only(validator.errors(deep))
            self.assertEqual(found.keyword, "json")
            self.assertIn(str(MAX_INSTANCE_DEPTH), found.message)

    def test_schema_nested_too_deeply_to_check_says_so_instead_of_calling_itself_invalid(self):
        schema: dict = {"type": "string"}
        for _ in range(MAX_SCHEMA_DEPTH - 8):  # within the JSON nesting limit, one subschema per level
            schema = {"not": schema}
        try:
            validator = Validator(schema)
        except SchemaError as error:
            message = str(error)
            self.assertIn("nested too deeply", message)
            self.assertNotIn("not a valid", message)
            self.assertNotIn("reference", message)
        else:
            self.assertTrue(validator.is_valid(1) is not validator.is_valid("x"))

    def test_recursive_schema_validates_nesting_up_to_the_limit(self):
        tree = {"type": "object", "properties": {"child": {"$ref": "#"}}}
        instance: dict = {}
        for _ in range(MAX_INSTANCE_DEPTH - 1):
            instance = {"child": instance}
        self.assertTrue(Validator(tree).is_valid(instance))

    def test_reference_cycles_that_never_consume_the_instance_are_schema_errors(self):
        for schema in (
            {"$ref": "#"},
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
            {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        ):
            with self.subTest(schema=schema):
                with self.assertRaisesRegex(SchemaError, "cycle"):
                    Validator(schema)

    def test_dynamic_reference_loop_is_bounded_at_run_time(self):
        # Statically $dynamicRef "#x" lands on inner's own anchor (no cycle); dynamically it lands on the
        # root, which refers to inner again: an endless loop that only evaluation can discover.
        schema = {
            "$id": "https://example.com/root", "$dynamicAnchor": "x", "$ref": "inner",
            "$defs": {"inner": {"$id": "inner", "$dynamicRef": "#x",
                                "$defs": {"a": {"$dynamicAnchor": "x", "type": "string"}}}},
        }
        validator = Validator(schema)
        self.assertFalse(validator.is_valid("text"))
        found = only(validator.errors("text"))
        self.assertEqual(found.keyword, "$ref")

    def test_schema_error_says_where(self):
        cases = [
            ({"properties": {"a": {"type": 5}}}, "/properties/a/type"),
            ({"properties": {"a": {"pattern": "(?<x"}}}, "/properties/a/pattern"),
            ({"items": {"minLength": -1}}, "/items/minLength"),
            ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "/properties/a/$ref"),
        ]
        for schema, where in cases:
            with self.subTest(schema=schema):
                with self.assertRaises(SchemaError) as caught:
                    Validator(schema)
                self.assertIn(where, str(caught.exception))

    def test_invalid_pattern_is_called_invalid_once_with_its_position(self):
        with self.assertRaises(SchemaError) as caught:
            Validator({"properties": {"a": {"pattern": "(?<x"}}})
        message = str(caught.exception)
        self.assertEqual(message.count("invalid"), 1, message)
        self.assertIn("/properties/a/pattern", message)
        self.assertIn("position 3", message)

    def test_valid_pattern_python_cannot_run_is_not_called_invalid(self):
        # Variable-width lookbehind is valid ECMA-262; Python's re cannot run it, so no validator can
        # be built, but the author must learn the pattern is valid and needs rewriting, not fixing.
        for keyword, schema in (("pattern", {"pattern": "(?<=a+)b"}),
                                ("patternProperties", {"patternProperties": {"(?<=a+)b": {}}})):
            with self.subTest(keyword=keyword):
                with self.assertRaises(SchemaError) as caught:
                    Validator(schema)
                message = str(caught.exception)
                self.assertIn("valid ECMA-262 but not supported here", message)
                self.assertNotIn("invalid", message)
                self.assertIn("/" + keyword, message)

    def test_schema_error_is_a_value_error(self):
        self.assertTrue(issubclass(SchemaError, ValueError))

    def test_unknown_remote_reference_is_refused_not_fetched(self):
        with self.assertRaisesRegex(SchemaError, "nothing is fetched"):
            Validator({"$ref": "https://example.com/schema.json"})

    def test_remote_reference_is_served_from_resources(self):
        validator = Validator({"$ref": "https://example.com/int.json"},
                              resources={"https://example.com/int.json": {"type": "integer"}})
        self.assertTrue(validator.is_valid(3))
        self.assertEqual(only(validator.errors("x")).keyword_path, "/$ref/type")

    def test_resources_that_are_not_a_mapping_of_uris_are_refused(self):
        for resources in ([("https://example.com/a", {})], {1: {}}, "https://example.com/a"):
            with self.subTest(resources=resources):
                with self.assertRaisesRegex(SchemaError, "resources"):
                    Validator({"$ref": "https://example.com/a"}, resources=resources)  # type: ignore[arg-type]

    def test_unknown_dialect_is_refused(self):
        with self.assertRaisesRegex(SchemaError, r"\$schema"):
            Validator({"$schema": "http://json-schema.org/draft-03/schema#"})

    def test_self_describing_custom_metaschema_does_not_loop(self):
        meta = {
            "$schema": "https://example.com/meta", "$id": "https://example.com/meta",
            "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True,
                            "https://json-schema.org/draft/2020-12/vocab/validation": True},
            "type": "object",
        }
        validator = Validator({"$schema": "https://example.com/meta", "type": "string"},
                              resources={"https://example.com/meta": meta})
        self.assertTrue(validator.is_valid("x"))
        self.assertFalse(validator.is_valid(1))

    def test_metaschema_requiring_an_unknown_vocabulary_is_refused(self):
        meta = {
            "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/meta",
            "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True,
                            "https://example.com/vocab/secret-sauce": True},
        }
        with self.assertRaisesRegex(SchemaError, "secret-sauce"):
            Validator({"$schema": "https://example.com/meta"}, resources={"https://example.com/meta": meta})

    def test_schema_that_is_not_json_is_refused(self):
        with self.assertRaises(SchemaError):
            Validator({"enum": [float("nan")]})
        with self.assertRaises(SchemaError):
            Validator("not a schema")  # type: ignore[arg-type]


class SecretTests(unittest.TestCase):
    """Messages name fields and rules; the instance's values never appear in them."""

    schemas = [
        {"type": "integer"},
        {"enum": ["a", "b"]},
        {"const": "a"},
        {"maxLength": 3},
        {"minLength": 100},
        {"pattern": "^[0-9]+$"},
        {"format": "email"},
        {"not": {"type": "string"}},
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        {"oneOf": [{"type": "string"}, {"minLength": 1}]},
        {"items": {"type": "integer"}},
        {"contains": {"type": "integer"}},
        {"uniqueItems": True},
        {"properties": {"token": {"type": "integer"}}},
        {"additionalProperties": {"type": "integer"}},
        {"propertyNames": {"maxLength": 1}},
        {"unevaluatedProperties": {"type": "integer"}},
        {"if": {"type": "string"}, "then": {"type": "integer"}},
    ]
    instances = [SECRET, [SECRET, SECRET], {"token": SECRET}, {"x": SECRET}]

    def test_no_message_contains_the_instance_value(self):
        for schema in self.schemas:
            validator = Validator(schema, format_assertion=True)
            for instance in self.instances:
                for found in validator.errors(instance):
                    with self.subTest(schema=schema, instance=instance):
                        self.assertNotIn(SECRET, found.message)
                        self.assertNotIn("SECRET", found.message)


class ConcurrencyTests(unittest.TestCase):
    def test_dynamic_reference_validator_is_safe_across_threads(self):
        schema = {
            "$id": "https://example.com/list",
            "$defs": {"item": {"$dynamicAnchor": "item", "type": "string"}},
            "items": {"$dynamicRef": "#item"},
        }
        validator = Validator(schema)
        failures = []

        def work():
            for index in range(300):
                if validator.is_valid(["a", "b"]) is not True or validator.is_valid([1]) is not False:
                    failures.append(index)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(failures, [])


if __name__ == "__main__":
    unittest.main()
