"""The `pretoken-v1` estimate, as `catalog-cost` and the lint budget rule charge it: pieces as a
byte-pair tokenizer pre-splits text (runs of ASCII letters, of ASCII digits, of whitespace, of
anything else), a letter run one token per 10 letters or part of 10, a digit run per 3, whitespace
free, any other run one token per 4 ASCII characters or part of 4 plus one per other character.
"""

from __future__ import annotations

import math
import random
import re
import unittest

from agent_lab.catalog_cost import estimate_tokens

PIECE = re.compile(r"[A-Za-z]+|[0-9]+|\s+|[^\sA-Za-z0-9]+")


def charged_piece_by_piece(text: str) -> int:
    """The definition above, one piece at a time."""
    tokens = 0
    for piece in PIECE.findall(text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            tokens += math.ceil(len(piece) / 10)
        elif first.isascii() and first.isdigit():
            tokens += math.ceil(len(piece) / 3)
        elif not first.isspace():
            ascii_characters = sum(1 for character in piece if character.isascii())
            tokens += math.ceil(ascii_characters / 4) + len(piece) - ascii_characters
    return tokens


class EstimateTest(unittest.TestCase):
    def test_each_kind_of_piece_is_charged_as_defined(self) -> None:
        cases = {
            "": 0,
            "get_ticket": 3,  # "get", "_", "ticket"
            "a" * 10: 1,
            "a" * 11: 2,
            "1234567": 3,
            '{"type":"object"}': 1 + 1 + 1 + 1 + 1,  # {"  type  ":"  object  "}
            "   \n\t": 0,
            "café": 1 + 1,  # "caf" and the run "é"
            "«»": 2,
        }
        for text, tokens in cases.items():
            with self.subTest(text=text):
                self.assertEqual(estimate_tokens(text), tokens)

    def test_any_text_is_charged_as_piece_by_piece(self) -> None:
        rng = random.Random(21)
        alphabet = 'aZq09 \t\n{}":,._-\u00e9\u6f22\u00a0\u2028\u3000\u0661\x1c\ud800'
        for _ in range(3000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
            self.assertEqual(estimate_tokens(text), charged_piece_by_piece(text), repr(text))
        for _ in range(3000):
            text = "".join(chr(rng.choice((rng.randint(0, 0x7F), rng.randint(0x80, 0x3000), rng.randint(0, 0x10FFFF))))
                           for _ in range(rng.randint(0, 40)))
            self.assertEqual(estimate_tokens(text), charged_piece_by_piece(text), repr(text))


if __name__ == "__main__":
    unittest.main()
