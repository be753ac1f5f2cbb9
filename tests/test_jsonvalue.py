"""The shared JSON data model: one answer to "what JSON type is this?" and "are these equal?"."""

from __future__ import annotations

import collections
import enum
import unittest

from agent_lab.jsonvalue import check_json_value, escape_pointer_token, find_non_json, json_equal, json_type


class Colour(str, enum.Enum):
    RED = "red"


class JsonTypeTests(unittest.TestCase):
    def test_bool_is_a_boolean_and_never_a_number(self):
        self.assertEqual(json_type(True), "boolean")
        self.assertEqual(json_type(False), "boolean")

    def test_integral_float_is_an_integer(self):
        self.assertEqual(json_type(1.0), "integer")
        self.assertEqual(json_type(-0.0), "integer")
        self.assertEqual(json_type(1.5), "number")

    def test_big_integers_are_integers(self):
        self.assertEqual(json_type(10**40), "integer")

    def test_nan_and_infinities_are_not_json(self):
        for value in (float("nan"), float("inf"), float("-inf")):
            self.assertIsNone(json_type(value))

    def test_containers_and_scalars_have_their_json_names(self):
        self.assertEqual(json_type(None), "null")
        self.assertEqual(json_type("x"), "string")
        self.assertEqual(json_type([]), "array")
        self.assertEqual(json_type({}), "object")

    def test_python_only_values_are_not_json(self):
        for value in ((1, 2), {1, 2}, b"x", object(), 1j):
            self.assertIsNone(json_type(value), repr(value))

    def test_subclasses_count_as_their_json_base_type(self):
        self.assertEqual(json_type(Colour.RED), "string")
        self.assertEqual(json_type(collections.OrderedDict()), "object")


class JsonEqualTests(unittest.TestCase):
    def test_one_equals_one_point_zero(self):
        self.assertTrue(json_equal(1, 1.0))

    def test_true_is_not_one_and_false_is_not_zero(self):
        self.assertFalse(json_equal(True, 1))
        self.assertFalse(json_equal(0, False))
        self.assertFalse(json_equal([True], [1]))
        self.assertFalse(json_equal({"a": False}, {"a": 0}))

    def test_containers_compare_deeply(self):
        self.assertTrue(json_equal({"a": [1, {"b": 2.0}]}, {"a": [1.0, {"b": 2}]}))
        self.assertFalse(json_equal({"a": [1, 2]}, {"a": [2, 1]}))
        self.assertFalse(json_equal({"a": 1}, {"a": 1, "b": 2}))

    def test_different_types_are_not_equal(self):
        self.assertFalse(json_equal("1", 1))
        self.assertFalse(json_equal(None, False))
        self.assertFalse(json_equal([], {}))


class CheckJsonValueTests(unittest.TestCase):
    def test_plain_json_passes(self):
        self.assertIsNone(check_json_value({"a": [1, 2.5, "x", None, True, {"b": []}]}))

    def test_each_python_only_value_is_named_by_its_pointer(self):
        cases = {
            "tuple": {"a": (1, 2)},
            "set": {"a": {1}},
            "bytes": {"a": b"x"},
            "object": {"a": object()},
        }
        for type_name, value in cases.items():
            with self.subTest(type_name):
                reason = check_json_value(value)
                self.assertIn("/a", reason)
                self.assertIn(type_name, reason)

    def test_nan_and_infinity_are_refused(self):
        self.assertIn("NaN", check_json_value([1, float("nan")]))
        self.assertIn("/0", check_json_value([float("inf")]))

    def test_non_string_keys_are_refused(self):
        reason = check_json_value({"a": {1: "x"}})
        self.assertIn("/a", reason)
        self.assertIn("keys must be strings", reason)

    def test_nesting_beyond_the_limit_is_refused_without_recursion(self):
        deep: list = []
        for _ in range(10_000):
            deep = [deep]
        self.assertIn("deeper than the limit of 64", check_json_value(deep, max_depth=64))

    def test_nesting_at_the_limit_is_accepted(self):
        value: list = []
        for _ in range(63):
            value = [value]
        self.assertIsNone(check_json_value(value, max_depth=64))
        self.assertIsNotNone(check_json_value([value], max_depth=64))

    def test_reason_never_contains_the_value(self):
        secret = "hunter2-secret"
        reason = check_json_value({"password": (secret,)})
        self.assertNotIn(secret, reason)

    def test_first_bad_place_is_reported_in_document_order(self):
        pointer, _reason = find_non_json({"a": 1, "b": (1,), "c": {2}})
        self.assertEqual(pointer, "/b")

    def test_pointer_tokens_escape_tilde_and_slash(self):
        self.assertEqual(escape_pointer_token("a/b~c"), "a~1b~0c")
        pointer, _reason = find_non_json({"a/b": (1,)})
        self.assertEqual(pointer, "/a~1b")


if __name__ == "__main__":
    unittest.main()
