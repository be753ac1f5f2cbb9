"""measured_json_copy: the one walk that copies a value and bounds its JSON size.

The invoke hot path trusts three promises of it: the copy is the one `plain_json_snapshot` takes, the
bound is never below the exact compact UTF-8 JSON size (so a value within the bound is within the
budget), and the walk gives up early (OverBudget) only for a value that is really over its budget.
"""

from __future__ import annotations

import json
import random
import unittest

from agent_lab.execution import OverBudget, measured_json_copy, plain_json_snapshot, small_plain
from agent_lab.fingerprint import canonical_json


class Keyish(str):
    pass


class Count(int):
    pass


class Mapping(dict):
    pass


SCALARS = ["", "abc", "\x01\x1f\"\\", "é" * 5, "\ud800", "\U0001d11e", Keyish("sub"), 0, -5, 2**63, 2**70, 2**14001,
           Count(3), 1.5, -0.0, 1e308, float("nan"), float("inf"), True, False, None, (1, 2), {1: 2}, {"a", "b"}]


def hostile_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth < 5 and roll < 0.2:
        keys = ["a", "é", "\x00", "\U0001d11e", "ключ", Keyish("s")]
        return {rng.choice(keys) + str(rng.randint(0, 3)): hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if depth < 5 and roll < 0.35:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 5 and roll < 0.38:
        return Mapping({"x": hostile_value(rng, depth + 1)})
    return rng.choice(SCALARS)


def exact_size(value) -> int | None:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None
    return len(text.encode("utf-8", "surrogatepass"))


class MeasuredCopyTest(unittest.TestCase):
    def test_copy_bound_and_early_refusal_keep_their_promises_on_hostile_values(self) -> None:
        rng = random.Random(11)
        for _ in range(3000):
            value = hostile_value(rng)
            snapshot, snapshot_plain = plain_json_snapshot(value, 64)
            copy, plain, bound = measured_json_copy(value, 64)
            self.assertEqual(plain, snapshot_plain)
            self.assertEqual((repr(copy), type(copy)), (repr(snapshot), type(snapshot)))
            size = exact_size(copy)
            if plain and bound is not None:
                self.assertIsNotNone(size)
                self.assertLessEqual(size, bound, value)
                canonical_json(copy)  # a plain, bounded copy always has a canonical form
            if plain and size is not None:
                for budget in (0, 1, 5, 20, 100, 1000):
                    try:
                        measured_json_copy(value, 64, budget)
                    except OverBudget:
                        self.assertGreater(size, budget, value)

    def test_a_flat_object_and_a_nested_one_get_the_same_bound_rule(self) -> None:
        flat = {"ticket_id": "T-1001", "count": 3, "open": True, "note": None, "score": 0.5}
        copy, plain, bound = measured_json_copy(flat, 64)
        self.assertEqual((copy, plain), (flat, True))
        self.assertIsNot(copy, flat)
        self.assertGreaterEqual(bound, exact_size(flat))
        with self.assertRaises(OverBudget):
            measured_json_copy({"text": "x" * 100}, 64, 50)
        _, _, nested_bound = measured_json_copy({"outer": flat}, 64)
        self.assertGreaterEqual(nested_bound, exact_size({"outer": flat}))

    def test_what_the_bound_cannot_settle_is_left_to_the_encoder(self) -> None:
        for value in ({"n": 2**64}, {"m": Mapping(a=1)}, json.loads("[" * 40 + "]" * 40)):
            with self.subTest(value=str(value)[:30]):
                self.assertIsNone(measured_json_copy(value, 64)[2])


class SmallPlainTest(unittest.TestCase):
    """`small_plain` admits what `ainvoke` checks on the caller's loop: plain JSON of exact types only (no
    object whose reading could run code), within a count of values and characters."""

    def test_what_it_admits_is_plain_json_within_its_bounds(self) -> None:
        rng = random.Random(12)
        admitted = 0
        for _ in range(3000):
            value = hostile_value(rng)
            if not small_plain(value, 16, 40):
                continue
            admitted += 1
            copy, plain, _ = measured_json_copy(value, 64)
            self.assertTrue(plain, value)
            self.assertEqual(copy, value)
            self.assertIsNotNone(exact_size(value))
        self.assertGreater(admitted, 100)

    def test_a_subclass_anywhere_or_a_bound_passed_is_refused(self) -> None:
        for value in ({"a": Mapping()}, Mapping(), {Keyish("k"): 1}, [Count(1)], {"a": ["x", Keyish("y")]},
                      {"n": 2**64}, [float("nan")], {"t": (1, 2)}, {"x": "y" * 41}, list(range(16)),
                      [[[[]]]] * 4):
            with self.subTest(value=repr(value)[:40]):
                self.assertFalse(small_plain(value, 16, 40))
        for value in ({"x": "y" * 39}, list(range(15)), [[]] * 4, "text", 7, None):
            with self.subTest(value=repr(value)[:40]):
                self.assertTrue(small_plain(value, 16, 40))


if __name__ == "__main__":
    unittest.main()
