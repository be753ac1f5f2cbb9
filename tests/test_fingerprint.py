"""Canonical JSON and argument fingerprints: the contract the idempotency step relies on."""

import enum
import hashlib
import hmac
import json
import unittest
from collections import OrderedDict

from agent_lab.idempotency import MAX_CANONICAL_DEPTH, NotCanonicalJSON, canonical_json, fingerprint


def nested_arrays(levels):
    """``levels`` arrays inside one another, the innermost holding 0."""
    value = 0
    for _ in range(levels):
        value = [value]
    return value


class CanonicalTextTest(unittest.TestCase):
    def test_keys_are_sorted_and_separators_are_compact(self):
        self.assertEqual(canonical_json({"b": 1, "a": [1, 2], "c": {"z": None, "y": "s"}}),
                         '{"a":[1,2],"b":1,"c":{"y":"s","z":null}}')

    def test_key_order_does_not_change_the_text(self):
        first = {"title": "x", "ticket_id": 7, "meta": {"b": True, "a": False}}
        second = {"meta": {"a": False, "b": True}, "ticket_id": 7, "title": "x"}
        self.assertEqual(canonical_json(first), canonical_json(second))

    def test_integral_floats_are_written_as_integers(self):
        self.assertEqual(canonical_json(1.0), "1")
        self.assertEqual(canonical_json(-3.0), "-3")
        self.assertEqual(canonical_json(1e20), "100000000000000000000")

    def test_negative_zero_is_written_as_zero(self):
        self.assertEqual(canonical_json(-0.0), "0")
        self.assertEqual(canonical_json([-0.0, 0.0, 0]), "[0,0,0]")

    def test_other_floats_use_the_shortest_round_tripping_form(self):
        self.assertEqual(canonical_json(1.5), "1.5")
        self.assertEqual(canonical_json(0.1), "0.1")
        self.assertEqual(canonical_json(1e-7), "1e-07")
        self.assertEqual(float(canonical_json(2.5e-300)), 2.5e-300)

    def test_booleans_stay_booleans_and_never_equal_integers(self):
        self.assertEqual(canonical_json(True), "true")
        self.assertEqual(canonical_json(False), "false")
        self.assertNotEqual(canonical_json({"a": True}), canonical_json({"a": 1}))
        self.assertNotEqual(canonical_json([False]), canonical_json([0]))

    def test_null_is_written_as_null(self):
        self.assertEqual(canonical_json(None), "null")

    def test_unicode_is_written_as_itself_and_escapes_only_what_json_requires(self):
        self.assertEqual(canonical_json({"name": "Zoë 😀 \u2028"}), '{"name":"Zoë 😀 \u2028"}')
        self.assertEqual(canonical_json('quote " backslash \\ tab \t'), '"quote \\" backslash \\\\ tab \\t"')

    def test_a_lone_surrogate_is_escaped_so_the_text_always_encodes_as_utf8(self):
        text = canonical_json({"s": "a\ud800b"})
        self.assertEqual(text, '{"s":"a\\ud800b"}')
        text.encode("utf-8")  # must not raise
        self.assertEqual(json.loads(text), {"s": "a\ud800b"})

    def test_nested_values_are_canonicalised_at_every_level(self):
        value = {"outer": [{"b": 2.0, "a": [1.0, {"d": -0.0, "c": True}]}]}
        self.assertEqual(canonical_json(value), '{"outer":[{"a":[1,{"c":true,"d":0}],"b":2}]}')

    def test_subclasses_of_json_types_are_written_as_their_base_type(self):
        class Colour(str, enum.Enum):
            RED = "red"

        class Size(enum.IntEnum):
            LARGE = 3

        self.assertEqual(canonical_json(OrderedDict([("b", Colour.RED), ("a", Size.LARGE)])), '{"a":3,"b":"red"}')

    def test_the_text_parses_back_to_an_equal_value(self):
        value = {"list": [1, 2.5, "x", None, True], "nested": {"k": "v"}}
        self.assertEqual(json.loads(canonical_json(value)), value)

    def test_the_deepest_nesting_allowed_is_accepted(self):
        self.assertEqual(json.loads(canonical_json(nested_arrays(MAX_CANONICAL_DEPTH))),
                         nested_arrays(MAX_CANONICAL_DEPTH))


class RefusalTest(unittest.TestCase):
    def assertRefused(self, value, pointer, reason_fragment):
        with self.assertRaises(NotCanonicalJSON) as caught:
            canonical_json(value)
        self.assertEqual(caught.exception.pointer, pointer)
        self.assertIn(reason_fragment, caught.exception.reason)
        self.assertIn(reason_fragment, str(caught.exception))
        return caught.exception

    def test_refusal_is_a_value_error(self):
        self.assertTrue(issubclass(NotCanonicalJSON, ValueError))

    def test_nan_is_refused_where_it_occurs(self):
        self.assertRefused({"a": [1, float("nan")]}, "/a/1", "NaN")

    def test_infinity_is_refused_where_it_occurs(self):
        self.assertRefused({"x": {"y": float("inf")}}, "/x/y", "Infinity")
        self.assertRefused(float("-inf"), "", "Infinity")

    def test_a_tuple_is_refused(self):
        self.assertRefused({"pair": (1, 2)}, "/pair", "tuple")

    def test_a_set_is_refused(self):
        self.assertRefused([{"tags": {"a"}}], "/0/tags", "set")

    def test_bytes_are_refused(self):
        self.assertRefused({"blob": b"secret"}, "/blob", "bytes")

    def test_an_arbitrary_object_is_refused(self):
        self.assertRefused({"when": object()}, "/when", "object")

    def test_a_non_string_key_is_refused_at_its_object(self):
        self.assertRefused({"outer": {1: "one"}}, "/outer", "key of type int")

    def test_the_message_never_contains_the_offending_value(self):
        error = self.assertRefused({"password": b"hunter2-secret"}, "/password", "bytes")
        self.assertNotIn("hunter2", str(error))

    def test_pointer_tokens_are_escaped(self):
        self.assertRefused({"a/b": {"c~d": float("nan")}}, "/a~1b/c~0d", "NaN")

    def test_the_first_error_in_canonical_key_order_is_reported(self):
        self.assertRefused({"b": float("nan"), "a": b"x"}, "/a", "bytes")

    def test_nesting_deeper_than_the_limit_is_refused_without_recursion_error(self):
        error = self.assertRefused(nested_arrays(MAX_CANONICAL_DEPTH + 1), "/0" * MAX_CANONICAL_DEPTH, "nesting")
        self.assertIn(str(MAX_CANONICAL_DEPTH), error.reason)

    def test_absurd_nesting_is_refused_without_recursion_error(self):
        self.assertRefused(nested_arrays(100_000), "/0" * MAX_CANONICAL_DEPTH, "nesting")

    def test_a_cyclic_structure_is_refused(self):
        cycle = {}
        cycle["self"] = cycle
        self.assertRefused(cycle, "/self" * MAX_CANONICAL_DEPTH, "nesting")

    def test_an_absurdly_wide_integer_is_refused(self):
        self.assertRefused({"n": 10 ** 5000}, "/n", "integer")


KEY = b"k" * 32
OTHER_KEY = b"o" * 32


def fp(tool, arguments, key=KEY):
    return fingerprint(tool, arguments, key=key)


class FingerprintTest(unittest.TestCase):
    def test_a_known_value_has_a_stable_digest(self):
        expected_text = '{"arguments":{"amount":1,"note":"café","ticket_id":"T-1"},"tool":"record_followup"}'
        expected = "hmac-sha256:" + hmac.new(KEY, expected_text.encode("utf-8"), hashlib.sha256).hexdigest()
        arguments = {"ticket_id": "T-1", "note": "café", "amount": 1.0}
        self.assertEqual(fp("record_followup", arguments), expected)

    def test_the_format_is_hmac_sha256_and_64_hex_digits(self):
        value = fp("get_ticket", {"ticket_id": "T-1"})
        prefix, digest = value.split(":")
        self.assertEqual(prefix, "hmac-sha256")
        self.assertRegex(digest, "^[0-9a-f]{64}$")

    def test_it_hashes_the_canonical_text_of_tool_and_arguments_under_the_key(self):
        arguments = {"b": [1, {"c": None}], "a": "x"}
        text = canonical_json({"tool": "t", "arguments": arguments})
        self.assertEqual(fp("t", arguments), "hmac-sha256:" + hmac.new(KEY, text.encode("utf-8"), hashlib.sha256).hexdigest())

    def test_another_key_gives_another_fingerprint(self):
        self.assertNotEqual(fp("t", {"pin": "1234"}), fp("t", {"pin": "1234"}, key=OTHER_KEY))

    def test_the_key_must_be_long_enough_bytes(self):
        for bad in (b"", b"short", "a text key of enough length", None):
            with self.subTest(key=bad), self.assertRaises((TypeError, ValueError)):
                fingerprint("t", {}, key=bad)

    def test_one_and_one_point_zero_fingerprint_alike(self):
        self.assertEqual(fp("t", {"n": 1}), fp("t", {"n": 1.0}))

    def test_key_order_does_not_matter(self):
        self.assertEqual(fp("t", {"a": 1, "b": 2}), fp("t", {"b": 2, "a": 1}))

    def test_true_and_one_fingerprint_differently(self):
        self.assertNotEqual(fp("t", {"n": True}), fp("t", {"n": 1}))

    def test_the_tool_name_is_part_of_the_fingerprint(self):
        self.assertNotEqual(fp("close_ticket", {"id": 1}), fp("reopen_ticket", {"id": 1}))

    def test_different_arguments_fingerprint_differently(self):
        self.assertNotEqual(fp("t", {"amount": 10}), fp("t", {"amount": 100}))

    def test_refusals_point_into_the_arguments(self):
        with self.assertRaises(NotCanonicalJSON) as caught:
            fp("t", {"items": [float("nan")]})
        self.assertEqual(caught.exception.pointer, "/items/0")

    def test_arguments_at_the_deepest_allowed_nesting_still_fingerprint(self):
        self.assertTrue(fp("t", nested_arrays(MAX_CANONICAL_DEPTH)).startswith("hmac-sha256:"))

    def test_a_tool_name_that_is_not_a_string_is_refused(self):
        with self.assertRaises(NotCanonicalJSON):
            fp(1, {})


if __name__ == "__main__":
    unittest.main()
