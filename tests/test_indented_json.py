"""`agent_lab.jsonvalue.indented_json` writes what `json.dumps(..., ensure_ascii=False, indent=2)` writes."""

from __future__ import annotations

import json
import random
import unittest

from agent_lab.jsonvalue import indented_json

SCALARS = [None, True, False, 0, -3, 10 ** 30, 1.5, -0.0, 3.0, 1e300, float("nan"), float("inf"), -float("inf"),
           "", 'a"b\\c\n\u2028\x00\ud800', "ü"]


def value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 5 or roll < 0.4:
        return rng.choice(SCALARS)
    if roll < 0.6:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.7:
        return tuple(value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    return {rng.choice(["a", "B", "é", "x y", '"', "10", ""]) + str(rng.randint(0, 3)): value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


class StrSubclass(str):
    pass


class IndentedJsonTest(unittest.TestCase):
    def assertSame(self, item, sort_keys: bool) -> None:
        def outcome(write):
            try:
                return write()
            except (TypeError, ValueError) as error:
                return repr(error)
        self.assertEqual(outcome(lambda: indented_json(item, sort_keys=sort_keys)),
                         outcome(lambda: json.dumps(item, ensure_ascii=False, indent=2, sort_keys=sort_keys)))

    def test_plain_json_data_is_written_as_json_dumps_writes_it(self) -> None:
        rng = random.Random(7)
        for _ in range(3000):
            item = value(rng)
            self.assertSame(item, False)
            self.assertSame(item, True)

    def test_anything_else_is_left_to_json_dumps_errors_included(self) -> None:
        circular: list = []
        circular.append(circular)
        for item in ({1: 2}, {"a": 1, 2: 3}, {"a": StrSubclass("x")}, [True, {None: 1}], {"a": object()}, circular,
                     {"b": 1, "a": [1.0, {"c": set()}]}):
            self.assertSame(item, False)
            self.assertSame(item, True)


if __name__ == "__main__":
    unittest.main()
