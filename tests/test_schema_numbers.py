"""A JSON number is the decimal it is written as, whichever Python type a parser gives it.

Python's json reads `100000000000000000000000` as an int and `1e23` as a float whose binary value is
99999999999999991611392, so Python alone says they differ. JSON has one number type: const, enum,
uniqueItems and the bounds compare the decimals (agent_lab.jsonvalue.json_number), as multipleOf
already did.
"""

from __future__ import annotations

import json
import unittest

from agent_lab.jsonvalue import json_equal, json_number
from agent_lab.schema import DRAFT_04, DRAFT_07, Validator


def number(text: str):
    """What a JSON parser gives for `text`."""
    return json.loads(text)


class JsonNumberTest(unittest.TestCase):
    def test_a_large_float_is_the_integer_its_decimal_spells(self) -> None:
        self.assertEqual(json_number(number("1e23")), 10 ** 23)
        self.assertEqual(json_number(number("-1.5e300")), -15 * 10 ** 299)
        self.assertIs(type(json_number(number("1e23"))), int)

    def test_ints_ordinary_floats_and_infinities_are_themselves(self) -> None:
        for value in (0, 10 ** 400, 0.5, 1.0, 2.0 ** 52, float("inf"), float("-inf")):
            with self.subTest(value=value):
                self.assertIs(json_number(value), value)

    def test_json_equality_compares_the_decimals(self) -> None:
        self.assertTrue(json_equal(number("1e23"), number("100000000000000000000000")))
        self.assertTrue(json_equal([number("1e23")], [10 ** 23]))
        self.assertFalse(json_equal(number("1e23"), 99999999999999991611392))  # its binary value
        self.assertTrue(json_equal(1, 1.0))
        self.assertFalse(json_equal(True, 1))


class DecimalValuesInKeywordsTest(unittest.TestCase):
    big_float = number("1e23")
    big_int = number("100000000000000000000000")

    def assert_valid(self, schema, instance, valid=True) -> None:
        for dialect in (None, DRAFT_07):
            validator = Validator(schema) if dialect is None else Validator(schema, dialect=dialect)
            with self.subTest(schema=schema, instance=instance, dialect=dialect and "draft-07"):
                self.assertIs(validator.is_valid(instance), valid)
                self.assertEqual(validator.errors(instance) == [], valid)

    def test_const_and_enum_accept_either_spelling_of_the_same_number(self) -> None:
        for schema_value, instance in ((self.big_float, self.big_int), (self.big_int, self.big_float)):
            self.assert_valid({"const": schema_value}, instance)
            self.assert_valid({"enum": ["x", schema_value]}, instance)
            self.assert_valid({"type": "integer", "enum": [1, schema_value]}, instance)
            self.assert_valid({"enum": [[schema_value], {"n": schema_value}]}, [instance])
            self.assert_valid({"enum": [[schema_value], {"n": schema_value}]}, {"n": instance})

    def test_const_and_enum_still_tell_different_numbers_apart(self) -> None:
        self.assert_valid({"const": self.big_float}, 99999999999999991611392, valid=False)
        self.assert_valid({"enum": [self.big_int]}, number("1.0000000000000001e23"), valid=False)
        self.assert_valid({"enum": [1, 2.5]}, self.big_float, valid=False)
        self.assert_valid({"enum": [1, 2.5]}, 1.0)

    def test_unique_items_finds_the_same_number_written_two_ways(self) -> None:
        self.assert_valid({"uniqueItems": True}, [self.big_float, self.big_int], valid=False)
        self.assert_valid({"uniqueItems": True}, [[self.big_float], [self.big_int]], valid=False)
        self.assert_valid({"uniqueItems": True}, [self.big_float, 99999999999999991611392])

    def test_bounds_compare_the_decimals(self) -> None:
        for schema_value, instance in ((self.big_float, self.big_int), (self.big_int, self.big_float)):
            self.assert_valid({"maximum": schema_value}, instance)
            self.assert_valid({"minimum": schema_value}, instance)
            self.assert_valid({"type": "integer", "maximum": schema_value}, instance)
            self.assert_valid({"type": "number", "minimum": schema_value, "maximum": schema_value}, instance)
        self.assert_valid({"maximum": self.big_float}, self.big_int + 1, valid=False)
        self.assert_valid({"minimum": self.big_float}, self.big_int - 1, valid=False)

    def test_exclusive_bounds_compare_the_decimals(self) -> None:
        self.assert_valid({"exclusiveMaximum": self.big_float}, self.big_int, valid=False)
        self.assert_valid({"exclusiveMinimum": self.big_int}, self.big_float, valid=False)
        self.assert_valid({"exclusiveMaximum": self.big_float}, self.big_int - 1)
        for keyword, bound in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
            validator = Validator({keyword: self.big_float, bound: True}, dialect=DRAFT_04)
            with self.subTest(draft4=keyword):
                self.assertFalse(validator.is_valid(self.big_int))

    def test_ordinary_numbers_keep_their_answers(self) -> None:
        self.assert_valid({"maximum": 0.1}, 0.1)
        self.assert_valid({"exclusiveMaximum": 1}, 0.9999999999999999)
        self.assert_valid({"minimum": 2 ** 53}, 2.0 ** 53)
        self.assert_valid({"maximum": 2 ** 53 - 1}, 2.0 ** 53, valid=False)
        self.assert_valid({"maximum": 10 ** 400}, self.big_float)
        self.assert_valid({"minimum": -10 ** 400, "maximum": 1e308}, 10 ** 308)


if __name__ == "__main__":
    unittest.main()
