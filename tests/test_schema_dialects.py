"""Each dialect's own keywords report where they failed (keyword, instance path, schema path), and the
dialect is chosen by `$schema`, by `dialect=`, or by the referencing schema, never by guessing."""

from __future__ import annotations

import unittest

from agent_lab.schema import DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, DRAFT_2020_12, SchemaError, Validator


def located(validator: Validator, instance) -> list:
    return [(item.keyword, item.instance_path, item.keyword_path) for item in validator.errors(instance)]


class DialectChoiceTests(unittest.TestCase):
    def test_schema_keyword_wins_over_the_dialect_argument(self):
        validator = Validator({"$schema": DRAFT_07, "items": [{"type": "string"}]}, dialect=DRAFT_2020_12)
        self.assertEqual(validator.dialect, DRAFT_07)
        self.assertFalse(validator.is_valid([1]))

    def test_without_schema_the_dialect_argument_decides_and_2020_12_is_the_default(self):
        schema = {"items": [{"type": "string"}]}  # a list-form items: meaningful only before 2020-12
        self.assertEqual(Validator(schema, dialect=DRAFT_06).dialect, DRAFT_06)
        self.assertFalse(Validator(schema, dialect=DRAFT_06).is_valid([1]))
        with self.assertRaises(SchemaError):  # 2020-12's meta-schema: items must be one schema
            Validator(schema)

    def test_a_document_without_schema_is_read_in_the_dialect_of_the_schema_that_references_it(self):
        resources = {"https://example.com/pair.json": {"items": [{"type": "string"}, {"type": "integer"}]}}
        validator = Validator({"$schema": DRAFT_07, "$ref": "https://example.com/pair.json"}, resources=resources)
        self.assertTrue(validator.is_valid(["a", 1]))
        self.assertEqual(located(validator, ["a", "b"]), [("type", "/1", "/$ref/items/1/type")])

    def test_a_2020_12_schema_reads_a_referenced_draft_07_document_as_draft_07(self):
        draft_07 = {"$schema": DRAFT_07, "$ref": "#/definitions/text", "maxLength": 1,
                    "definitions": {"text": {"type": "string"}}}
        validator = Validator({"$ref": "https://example.com/legacy.json"},
                              resources={"https://example.com/legacy.json": draft_07})
        self.assertTrue(validator.is_valid("a long text"))  # maxLength beside $ref is ignored in draft-07


class DialectPathTests(unittest.TestCase):
    def test_dependencies_report_under_the_trigger(self):
        validator = Validator({"dependencies": {"card": ["billing"], "vip": {"required": ["tier"]}}}, dialect=DRAFT_07)
        self.assertEqual(located(validator, {"card": 1, "vip": True}), [
            ("dependencies", "", "/dependencies/card"),
            ("required", "", "/dependencies/vip/required"),
        ])
        self.assertEqual(validator.errors({"card": 1})[0].message, "'billing' is required when 'card' is present")

    def test_additional_items_reports_each_extra_item(self):
        validator = Validator({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}, dialect=DRAFT_04)
        self.assertEqual(located(validator, ["a", 1, "b"]), [("type", "/2", "/additionalItems/type")])
        closed = Validator({"items": [{}], "additionalItems": False}, dialect=DRAFT_06)
        self.assertEqual(closed.errors([1, 2])[0].message, "value must have at most 1 item")

    def test_draft_04_exclusive_bounds_report_at_minimum_and_maximum(self):
        validator = Validator({"minimum": 1, "exclusiveMinimum": True, "maximum": 3, "exclusiveMaximum": True},
                              dialect=DRAFT_04)
        self.assertEqual(located(validator, 1), [("minimum", "", "/minimum")])
        self.assertEqual(validator.errors(3)[0].message, "value must be less than 3")
        self.assertEqual(Validator({"type": "integer"}, dialect=DRAFT_04).errors(1.0)[0].message,
                         "value must be of type integer (it is of type number)")

    def test_ref_hides_its_siblings_before_2019_09_and_not_after(self):
        schema = {"$ref": "#/definitions/text", "maxLength": 1, "definitions": {"text": {"type": "string"}}}
        for dialect in (DRAFT_04, DRAFT_06, DRAFT_07):
            self.assertTrue(Validator(schema, dialect=dialect).is_valid("long"), dialect)
        later = dict(schema, **{"$defs": schema["definitions"], "$ref": "#/$defs/text"})
        for dialect in (DRAFT_2019_09, DRAFT_2020_12):
            self.assertEqual(located(Validator(later, dialect=dialect), "long"), [("maxLength", "", "/maxLength")])

    def test_recursive_ref_lands_on_the_outermost_recursive_anchor(self):
        tree = {"$schema": DRAFT_2019_09, "$id": "https://example.com/tree", "$recursiveAnchor": True,
                "type": "object", "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}}}}
        strict_tree = {"$schema": DRAFT_2019_09, "$id": "https://example.com/strict-tree", "$recursiveAnchor": True,
                       "$ref": "tree", "unevaluatedProperties": False}
        validator = Validator(strict_tree, resources={"https://example.com/tree": tree})
        self.assertTrue(validator.is_valid({"kids": [{"kids": []}]}))
        # The inner node is judged by the outermost schema (strict-tree), so its extra member is refused;
        # and since $ref then fails, it evaluates nothing, so 'kids' is unevaluated at the root too.
        self.assertEqual(located(validator, {"kids": [{"extra": 1}]}), [
            ("unevaluatedProperties", "/kids/0/extra", "/$ref/properties/kids/items/$recursiveRef/unevaluatedProperties"),
            ("unevaluatedProperties", "/kids", "/unevaluatedProperties"),
        ])

    def test_a_custom_2019_09_meta_schema_without_core_keeps_2019_09_references(self):
        meta = {"$schema": DRAFT_2019_09, "$id": "https://example.com/meta",
                "$vocabulary": {"https://json-schema.org/draft/2019-09/vocab/applicator": True}}
        validator = Validator({"$schema": "https://example.com/meta", "$recursiveAnchor": True,
                               "properties": {"child": {"$recursiveRef": "#"}}, "additionalProperties": False},
                              resources={"https://example.com/meta": meta})
        self.assertTrue(validator.is_valid({"child": {"child": {}}}))
        self.assertFalse(validator.is_valid({"child": {"other": 1}}))


if __name__ == "__main__":
    unittest.main()
