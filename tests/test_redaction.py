"""redact() and redact_text(): secrets are masked everywhere, nothing else changes, input is never mutated."""

import copy
import sys
import unittest
from types import MappingProxyType

from agent_lab.redaction import (
    MAX_REDACTION_DEPTH,
    MIN_SECRET_LENGTH,
    REDACTED,
    collect_secrets,
    redact,
    redact_text,
)


def nested_lists(levels, leaf):
    value = leaf
    for _ in range(levels - 1):
        value = [value]
    return [value] if levels else leaf


class RedactTest(unittest.TestCase):
    def test_named_member_at_the_top_level_is_masked(self):
        self.assertEqual(
            redact({"api_token": "tok-123", "title": "hi"}, ["api_token"]),
            {"api_token": REDACTED, "title": "hi"},
        )

    def test_named_member_is_masked_at_any_depth_inside_objects_and_arrays(self):
        value = {"a": [{"b": {"api_token": "x"}}, ({"api_token": 5},)], "api_token": {"nested": "y"}}
        self.assertEqual(
            redact(value, {"api_token"}),
            {"a": [{"b": {"api_token": REDACTED}}, ({"api_token": REDACTED},)], "api_token": REDACTED},
        )

    def test_whole_value_of_a_named_member_is_masked_even_when_it_is_a_container(self):
        self.assertEqual(redact({"secret": [1, {"x": 2}]}, ["secret"]), {"secret": REDACTED})

    def test_input_is_never_mutated(self):
        value = {"outer": [{"api_token": "s3cret", "keep": [1, 2]}], "api_token": "top"}
        before = copy.deepcopy(value)
        redact(value, ["api_token"])
        self.assertEqual(value, before)

    def test_result_shares_no_container_with_the_input(self):
        inner = {"keep": [1, 2]}
        value = {"outer": [inner]}
        result = redact(value, ["nothing"])
        self.assertEqual(result, value)
        self.assertIsNot(result, value)
        self.assertIsNot(result["outer"], value["outer"])
        self.assertIsNot(result["outer"][0], inner)
        self.assertIsNot(result["outer"][0]["keep"], inner["keep"])

    def test_names_match_exactly_and_case_sensitively(self):
        value = {"API_TOKEN": "a", "api_token_hint": "b", "api_token": "c"}
        self.assertEqual(
            redact(value, ["api_token"]), {"API_TOKEN": "a", "api_token_hint": "b", "api_token": REDACTED}
        )

    def test_member_and_item_order_is_kept(self):
        value = {"z": [3, {"b": 1, "a": 2}, 1], "pw": "s", "a": {"y": 1, "x": 2}, "m": 0}
        result = redact(value, ["pw"])
        self.assertEqual(list(result), ["z", "pw", "a", "m"])
        self.assertEqual(list(result["z"][1]), ["b", "a"])
        self.assertEqual(list(result["a"]), ["y", "x"])
        self.assertEqual(result["z"], [3, {"b": 1, "a": 2}, 1])

    def test_array_items_are_not_member_names(self):
        self.assertEqual(redact(["api_token", "x"], ["api_token"]), ["api_token", "x"])

    def test_scalars_and_non_json_leaves_are_returned_as_they_are(self):
        marker = object()
        self.assertIs(redact(marker, ["x"]), marker)
        self.assertEqual(redact("plain", ["plain"]), "plain")
        self.assertEqual(redact({"k": marker, "s": {1, 2}}, ["x"]), {"k": marker, "s": {1, 2}})

    def test_tuples_stay_tuples_and_mappings_become_dicts(self):
        result = redact(MappingProxyType({"t": (1, {"pw": 2})}), ["pw"])
        self.assertEqual(type(result), dict)
        self.assertEqual(result, {"t": (1, {"pw": REDACTED})})
        self.assertIsInstance(result["t"], tuple)

    def test_non_string_member_names_are_kept_and_never_match(self):
        self.assertEqual(redact({1: "one", None: "n"}, ["1", "None"]), {1: "one", None: "n"})

    def test_a_single_string_is_one_field_name_not_a_set_of_letters(self):
        self.assertEqual(redact({"api_token": "t", "a": 1}, "api_token"), {"api_token": REDACTED, "a": 1})
        self.assertEqual(collect_secrets({"api_token": "tok-1", "a": "x"}, "api_token"), ["tok-1"])
        self.assertEqual(redact_text("key abcdef and a", "abcdef"), f"key {REDACTED} and a")

    def test_no_fields_still_returns_a_copy(self):
        value = {"a": [1]}
        result = redact(value, ())
        self.assertEqual(result, value)
        self.assertIsNot(result["a"], value["a"])

    def test_nesting_up_to_the_limit_is_kept_whole(self):
        value = nested_lists(MAX_REDACTION_DEPTH - 1, {"pw": "s"})  # the object is the last level
        result = redact(value, ["pw"])
        for _ in range(MAX_REDACTION_DEPTH - 1):
            self.assertIsInstance(result, list)
            result = result[0]
        self.assertEqual(result, {"pw": REDACTED})

    def test_nesting_past_the_limit_is_replaced_rather_than_risk_a_leak(self):
        value = nested_lists(MAX_REDACTION_DEPTH + 1, "deep-leaf")
        result = redact(value, ["pw"])
        for _ in range(MAX_REDACTION_DEPTH - 1):
            result = result[0]
        self.assertEqual(result, [REDACTED])

    def test_hostile_nesting_far_beyond_the_recursion_limit_does_not_raise(self):
        depth = sys.getrecursionlimit() * 20
        value = nested_lists(depth, "deep-leaf")
        result = redact(value, ["pw"])
        for _ in range(MAX_REDACTION_DEPTH - 1):
            result = result[0]
        self.assertEqual(result, [REDACTED])

    def test_a_container_that_contains_itself_is_cut_at_the_cycle(self):
        value = {"name": "loop"}
        value["self"] = value
        items = [1]
        items.append(items)
        self.assertEqual(redact(value, ()), {"name": "loop", "self": REDACTED})
        self.assertEqual(redact(items, ()), [1, REDACTED])

    def test_a_container_shared_by_two_members_is_copied_for_both(self):
        shared = {"pw": "s", "v": 1}
        self.assertEqual(
            redact({"a": shared, "b": [shared]}, ["pw"]),
            {"a": {"pw": REDACTED, "v": 1}, "b": [{"pw": REDACTED, "v": 1}]},
        )


class RedactTextTest(unittest.TestCase):
    def test_each_occurrence_of_a_secret_is_masked(self):
        self.assertEqual(
            redact_text("token=abcd1234 again abcd1234.", ["abcd1234"]),
            f"token={REDACTED} again {REDACTED}.",
        )

    def test_longer_secret_containing_a_shorter_one_is_masked_whole(self):
        self.assertEqual(redact_text("x=secret-long y=secret", ["secret", "secret-long"]), f"x={REDACTED} y={REDACTED}")

    def test_secrets_are_literal_text_not_patterns(self):
        self.assertEqual(redact_text("a.b*c and axbbc", ["a.b*c"]), f"{REDACTED} and axbbc")

    def test_empty_blank_and_non_string_secrets_are_ignored(self):
        self.assertEqual(redact_text("xxx abc  12345", ["", " ", "\n", None, 12345]), "xxx abc  12345")

    def test_a_short_secret_is_masked_as_a_whole_token_and_never_inside_a_longer_number(self):
        self.assertLess(len("737"), MIN_SECRET_LENGTH)
        text = "CVV 737 (cvv737, 737-A, 737.5) is not order 17375, 7370 or 0737, nor 7.37"
        self.assertEqual(redact_text(text, ["737"]),
                         f"CVV {REDACTED} (cvv{REDACTED}, {REDACTED}-A, {REDACTED}.5) is not order 17375, 7370 or 0737,"
                         " nor 7.37")

    def test_a_short_secret_of_letters_is_masked_where_no_letter_continues_it(self):
        self.assertEqual(redact_text("pw=xq, xq9, (xq) but not xqz, axq or xq_id", ["xq"]),
                         f"pw={REDACTED}, {REDACTED}9, ({REDACTED}) but not xqz, axq or xq_id")
        self.assertEqual(redact_text("a 7 in 17 and 7", "7"), f"a {REDACTED} in 17 and {REDACTED}")

    def test_text_without_secrets_is_unchanged(self):
        self.assertEqual(redact_text("nothing here", ["abcdef"]), "nothing here")

    def test_a_text_shows_a_secret_exactly_where_redact_text_would_mask_one(self):
        from agent_lab.redaction import contains_secret

        for text in ("CVV 737", "cvv737", "737-A", "order 17375", "0737", "a token sk-1234 here", "no secret"):
            with self.subTest(text=text):
                shown = redact_text(text, ["737", "sk-1234"]) != text
                self.assertEqual(contains_secret(text, ["737", "sk-1234"]), shown)
                self.assertEqual(contains_secret(text, frozenset({"737", "sk-1234"})), shown)
        self.assertFalse(contains_secret("  ", [" ", ""]))  # blank secrets are never found, as never masked


class CollectSecretsTest(unittest.TestCase):
    def test_collects_strings_and_numbers_under_named_members_at_any_depth(self):
        value = {"api_token": "tok-1", "list": [{"api_token": 12345}], "card": {"pin": {"deep": "0000x"}}}
        self.assertEqual(sorted(collect_secrets(value, ["api_token", "pin"])), ["0000x", "12345", "tok-1"])

    def test_ignores_values_outside_named_members(self):
        self.assertEqual(collect_secrets({"title": "public", "n": 1}, ["api_token"]), [])

    def test_collected_secrets_mask_a_summary(self):
        arguments = {"email": "person@example.com", "amount": 10}
        summary = "send to person@example.com amount 10"
        self.assertEqual(
            redact_text(summary, collect_secrets(arguments, ["email"])), f"send to {REDACTED} amount 10"
        )


if __name__ == "__main__":
    unittest.main()
