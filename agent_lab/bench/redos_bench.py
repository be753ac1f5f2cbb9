"""ReDoS: the worst time a hostile argument costs at the tool boundary, for patterns known to be slow.

REDOS_CORPUS holds patterns with catastrophic backtracking (exponential: nested or overlapping
quantifiers, ambiguous alternation under repetition; polynomial: adjacent overlapping repetitions,
unanchored searches; lookarounds and backreferences that re-read the text), each with an attack
string built to fail after the most work in a backtracking engine, and a few ordinary strings.
The shapes are the ones that recur in ReDoS advisories and write-ups (OWASP's examples, copied
e-mail and URL validators, trim and comment regexes); the patterns and strings are written here.

For each pattern a ToolSpec is built with it in its input schema. A refused pattern is reported as
such (the reason is printed). Otherwise the attack, grown to the tool's whole input budget
(`ToolSpec.max_input_bytes`), is validated (`is_valid`, then `errors(limit=21)` as the registry asks)
and run through `Registry.invoke`; the worst of several rounds is printed in milliseconds, with the
engine that served the pattern. Then hostile strings for every asserted `format` (including
`format: regex`, which parses model-written patterns), and the cost of an invalid 4 MB argument with
2,000,000 failing items with and without `errors(limit=...)`.

Figures depend on the machine and its load; they are printed, never asserted. The unit test
`tests/test_redos_corpus.py` asserts the structural property on the same corpus instead.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from ..schema import Validator
from ..spec import DEFAULT_MAX_INPUT_BYTES, ToolSpec
from ._figures import json_bytes, table, worst_ms

__all__ = ["REDOS_CORPUS", "ReDoSCase", "attack_arguments", "main", "spec_for"]


@dataclass(frozen=True)
class ReDoSCase:
    """One pattern of the corpus. `attack(n)` is a string of about n characters that a backtracking
    engine takes longest to answer; `attack_matches` is the right answer for it (known by how it is
    built); `benign` are short strings that even Python's re answers quickly (so the two engines
    can be cross-checked on them)."""

    name: str
    pattern: str
    attack: Callable[[int], str]
    attack_matches: bool
    benign: Tuple[str, ...]
    shape: str


def _run(char: str, tail: str = "") -> Callable[[int], str]:
    return lambda n: char * max(n - len(tail), 1) + tail


def _repeat(unit: str, tail: str = "") -> Callable[[int], str]:
    return lambda n: unit * max((n - len(tail)) // len(unit), 1) + tail


def _eleven_a(n: int) -> str:
    gap = max(n // 12, 1)
    return ("x" * gap + "a") * 11 + "x" * gap


def _two_halves(n: int) -> str:
    half = max(n // 2 - 1, 1)
    return "a" * half + " " + "a" * (half - 1) + "b"


def _random_ab(n: int) -> str:
    generator = random.Random(7)
    return "".join(generator.choice("ab") for _ in range(n))


REDOS_CORPUS: Tuple[ReDoSCase, ...] = (
    ReDoSCase("nested-plus", r"^(a+)+$", _run("a", "!"), False, ("a", "aaaa", "", "b", "aa!"),
              "nested quantifier, the textbook case"),
    ReDoSCase("overlapping-alternatives", r"^(a|aa)+$", _run("a", "!"), False, ("a", "aaa", "ab", ""),
              "alternatives that match the same text, repeated"),
    ReDoSCase("identical-alternatives", r"(a|a)*b", _run("a"), False, ("ab", "b", "aaab", "c", ""),
              "identical alternatives under a star, unanchored"),
    ReDoSCase("any-then-a-twelve", r"(.*a){12}", _eleven_a, False, ("a" * 12, "xa" * 12, "a" * 11, "b"),
              "a counted group of .*a: polynomial of degree 12"),
    ReDoSCase("star-of-star", r"(a*)*b", _run("a"), False, ("b", "aab", "aaa", ""),
              "a repeated part that can match empty"),
    ReDoSCase("star-of-plus", r"(a+)*b", _run("a"), False, ("b", "aab", "aaa"),
              "nested quantifier before a literal that never comes"),
    ReDoSCase("words-and-spaces", r"^(\w+\s?)*$", _run("a", "!"), False, ("a b c", "abc", "a  b", "a!"),
              "words with optional separators (a common 'sentence' validator)"),
    ReDoSCase("owasp-letters", r"^(([a-z])+.)+[A-Z]([a-z])+$", _run("a", "!"), False,
              ("aaaaBaaa", "abAbc", "ab", "aA"), "OWASP's example of an evil regex"),
    ReDoSCase("owasp-email",
              r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}"
              r"(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$",
              _run("a", "!"), False, ("john.doe@mail.com", "a@b.co", "a@b", "a_b@c.de.fr"),
              "an e-mail validator from OWASP's list of evil regexes"),
    ReDoSCase("digit-runs", r"^(\d+)*$", _run("1", "x"), False, ("123", "", "12x"),
              "nested quantifier over digits"),
    ReDoSCase("one-or-two-digits", r"^(\d|\d\d)+$", _run("1", "x"), False, ("1", "12345", "1x"),
              "overlapping alternatives of different lengths"),
    ReDoSCase("word-or-digit", r"^(\w|\d)+$", _run("1", "!"), False, ("a1", "1", "a!"),
              "alternatives whose character sets overlap"),
    ReDoSCase("adjacent-digit-runs", r"^\d+\d+$", _run("1", "x"), False, ("12", "1", "123x"),
              "two adjacent repetitions of the same class: quadratic"),
    ReDoSCase("letters-before-at", r"[a-z]+@", _run("a"), False, ("ab@", "@", "AB@", "x y@"),
              "an unanchored repetition: every start position retried, quadratic"),
    ReDoSCase("non-space-mailbox", r"^\S+@\S+$", _run("@", " "), False, ("a@b", "a@", "a b@c", "@@"),
              "the shortest e-mail check: two overlapping repetitions around @"),
    ReDoSCase("x-plus-x-plus", r"(x+x+)+y", _run("x"), False, ("xxy", "xy", "xxxxy", "y"),
              "nested adjacent repetitions"),
    ReDoSCase("optional-then-required", r"^(a?){25}(a){25}$", lambda n: "a" * 25, True,
              ("a" * 50, "", "b", "ba"), "a?^n a^n: exponential paths on a^n"),
    ReDoSCase("domain-labels", r"^([a-z]+)+\.com$", _run("a", "!"), False, ("abc.com", "a.com", "a.org"),
              "nested quantifier in a host-name check"),
    ReDoSCase("copied-url", r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?$",
              lambda n: "http://a.com/" + "a" * max(n - 14, 1) + "!", False,
              ("http://example.com/a/b", "example.org", "http://a.com/!", "https://x.io/"),
              "a widely copied URL validator: nested star at the path"),
    ReDoSCase("trim-whitespace", "^[\\s\\u200c]+|[\\s\\u200c]+$", lambda n: "x" + " " * max(n - 2, 1) + "x",
              False, (" a", "a ", "a", "a b"), "the trim regex of a 2016 outage: quadratic"),
    ReDoSCase("dashes-and-spaces", r"^(\s*-?\s*)*$", _run(" ", "x"), False, (" - ", "", "--", " x"),
              "a repeated group that can match empty"),
    ReDoSCase("version-numbers", r"^(\d+\.?)+$", _run("1", "x"), False, ("1.2.3", "10", "1..2"),
              "a version-number check: digits with optional dots"),
    ReDoSCase("numbers-and-spaces", r"^([0-9]+\s?)+$", _run("1", "x"), False, ("1 2 3", "12", "1 x"),
              "numbers with optional spaces"),
    ReDoSCase("lookahead-run", r"(?=a+)b", _run("a"), False, ("ab", "b", "a", ""),
              "a lookahead that reads to the end at every position"),
    ReDoSCase("repeated-word", r"^(\w+)\s\1$", _two_halves, False, ("ab ab", "ab ac", "a a"),
              "a backreference to a group of any length"),
    ReDoSCase("a-b-or-ab", r"^(a|b|ab)*c$", _repeat("ab"), False, ("abc", "c", "abab", "ababc"),
              "an alternative that is the concatenation of two others"),
    ReDoSCase("one-two-three-x", r"^(x|xx|xxx)*y$", _run("x"), False, ("xy", "xxxxy", "y", "xx"),
              "three overlapping alternatives"),
    ReDoSCase("huge-counted-any", r"(.*){1,32000}[bc]", _run("a"), False, ("b", "ab", "a", ""),
              "a counted group of .* (from a JavaScript advisory)"),
    ReDoSCase("common-email", r"^([a-zA-Z0-9_\.\-])+@(([a-zA-Z0-9\-])+\.)+([a-zA-Z0-9]{2,4})+$",
              lambda n: "a@a." + "a" * max(n - 5, 1) + "!", False,
              ("john@example.com", "a@b.cd", "a@b", "x.y@a.b.c.io"), "a commonly copied e-mail regex"),
    ReDoSCase("a-or-maybe-a", r"^(a|a?)+$", _run("a", "!"), False, ("a", "aa", "", "b"),
              "an alternative that may match empty, repeated"),
    ReDoSCase("kth-from-the-end", r"[ab]*a[ab]{16}c", _random_ab, False, ("a" + "b" * 16 + "c", "abc", "c"),
              "small for backtracking, but its DFA needs 2^17 states"),
    ReDoSCase("unanchored-password", r"(?=.*\d)(?=.*[a-z]).{8,}", _run("a"), False,
              ("abcdefg1", "abcdefgh", "12345678", "a1"), "lookaheads to the end, tried at every position"),
    ReDoSCase("html-comment", r"<!--(.|\s)*?-->", lambda n: "<!--" + " " * max(n - 4, 1), False,
              ("<!-- a -->", "<!---->", "<!-- a", "a -->"), "an HTML comment matcher: . and \\s overlap"),
    ReDoSCase("escaped-quotes", r'^"(\\?.)*"$', lambda n: '"' + "\\" * max(n - 1, 1), False,
              ('"a"', '"\\""', '"a', '""'), "a quoted-string check: \\ matched two ways"),
    ReDoSCase("dotted-quad-ish", r"^(\d{1,3}\.?){4,}$", _run("1", "x"), False, ("1.2.3.4", "1234", "1.2"),
              "counted digits with optional dots, repeated"),
    ReDoSCase("comma-words", r"^(\w+,?)*;$", _run("a", "!"), False, ("a,b;", "ab;", "a,b", ";"),
              "a list with optional separators"),
)

ATTACKED_PROPERTY = "text"


def spec_for(case: ReDoSCase, **options) -> ToolSpec:
    """The tool whose input schema runs the case's pattern on one string argument (ValueError if refused)."""
    return ToolSpec(
        name="redos_" + case.name.replace("-", "_"),
        description="Accepts one string that must match a pattern from the ReDoS corpus.",
        input_schema={"type": "object", "properties": {ATTACKED_PROPERTY: {"type": "string", "pattern": case.pattern}},
                      "required": [ATTACKED_PROPERTY]},
        **options,
    )


def attack_arguments(case: ReDoSCase, budget: int) -> dict:
    """The case's attack, as long as fits the input budget (compact UTF-8 JSON of the arguments)."""
    length = budget
    while True:
        arguments = {ATTACKED_PROPERTY: case.attack(length)}
        size = json_bytes(arguments)
        if size <= budget or length <= 1:
            return arguments
        length = max(1, min(length - 1, length * budget // size))


def _corpus_rows(budget: int, rounds: int) -> List[Tuple[str, ...]]:
    from ..calls import ToolCall
    from ..policy import Actor
    from ..registry import Registry

    rows: List[Tuple[str, ...]] = []
    actor = Actor(id="bench", tenant="bench")
    for case in REDOS_CORPUS:
        try:
            spec = spec_for(case, max_input_bytes=budget)
        except ValueError as refusal:
            reason = str(refusal).split(": ", 1)[-1]
            rows.append((case.name, "refused", "-", "-", "-", reason[:70]))
            continue
        validator = spec.input_validator
        [finding] = validator.patterns
        arguments = attack_arguments(case, budget)
        validate_ms = worst_ms(lambda: (validator.is_valid(arguments),
                                         validator.errors(arguments, limit=21)), rounds)
        with Registry(run_inline=True) as registry:
            registry.register(spec, lambda _arguments: {})
            call = ToolCall(spec.name, arguments)
            invoke_ms = worst_ms(lambda: registry.invoke(call, actor=actor), rounds)
        rows.append((case.name, str(finding.safety.engine), f"{len(arguments[ATTACKED_PROPERTY]):,}",
                     f"{validate_ms:.2f}", f"{invoke_ms:.2f}", finding.safety.backtracking or "-"))
    return rows


# Hostile strings for the asserted formats: long runs of the characters each grammar repeats,
# ending in a character that makes it fail late.
FORMAT_ATTACKS: Tuple[Tuple[str, Callable[[int], str]], ...] = (
    ("date-time", lambda n: "2024-01-01T00:00:00." + "1" * n),
    ("duration", lambda n: "P" + "1" * n + "X"),
    ("email", lambda n: "a" * n + "@example.com"),
    ("email", lambda n: "a@" + "a." * (n // 2) + "-"),
    ("idn-email", lambda n: "é" * (n // 2) + "@example.com"),
    ("hostname", lambda n: "a-" * (n // 2) + "-"),
    ("idn-hostname", lambda n: "é" * (n // 2)),
    ("ipv6", lambda n: "1:" * (n // 2)),
    ("uri", lambda n: "http://" + "a" * n + "@"),
    ("uri", lambda n: "http://a/" + "%41" * (n // 3) + "%"),
    ("uri-reference", lambda n: "//" + ":" * n + "\\"),
    ("iri", lambda n: "http://" + "é" * (n // 2) + "\\"),
    ("iri-reference", lambda n: "/" * n + " "),
    ("uri-template", lambda n: "{" + "a," * (n // 2) + "}"),
    ("json-pointer", lambda n: "/~0" * (n // 3) + "~"),
    ("relative-json-pointer", lambda n: "1" * n + "/~"),
    ("uuid", lambda n: "0" * n),
    ("regex", lambda n: "(" * 60 + "a" * (n - 120) + ")" * 60),
    ("regex", lambda n: "(a)" * (n // 3)),
    ("regex", lambda n: "a|" * (n // 2) + "a"),
    ("regex", lambda n: "a*" * (n // 2)),
    ("regex", lambda n: "(?:a)" * (n // 5)),
    ("regex", lambda n: "|".join(["(?<n>a)"] * (n // 8))),
    ("regex", lambda n: "(" * 60 + "|".join(["(?<n>a)"] * (n // 8)) + ")" * 60),
    ("regex", lambda n: "\\u{" + "0" * n + "41}"),
    ("regex", lambda n: "[" + "a-z" * (n // 3) + "]"),
    ("regex", lambda n: "a{" + "9" * n + "}"),
)


def _format_rows(budget: int, rounds: int) -> List[Tuple[str, ...]]:
    rows: List[Tuple[str, ...]] = []
    for name, attack in FORMAT_ATTACKS:
        validator = Validator({"type": "string", "format": name}, format_assertion=True)
        length = budget
        value = attack(length)
        while json_bytes({ATTACKED_PROPERTY: value}) > budget and length > 1:
            length = max(1, min(length - 1, length * budget // json_bytes({ATTACKED_PROPERTY: value})))
            value = attack(length)
        valid = validator.is_valid(value)
        ms = worst_ms(lambda: validator.is_valid(value), rounds)
        rows.append((name, f"{len(value):,}", "valid" if valid else "invalid", f"{ms:.2f}"))
    return rows


def _amplification_rows(rounds: int) -> List[Tuple[str, ...]]:
    """Issue 8's amplification: 2,000,000 failing items (4 MB) against a valid argument of the same size."""
    import tracemalloc

    validator = Validator({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}})
    invalid = {"items": ["x"] * 2_000_000}
    valid = {"items": [1] * 2_000_000}
    rows: List[Tuple[str, ...]] = []
    for label, function in (
        ("is_valid, valid input", lambda: validator.is_valid(valid)),
        ("errors(), valid input", lambda: validator.errors(valid)),
        ("errors(limit=21), invalid input", lambda: validator.errors(invalid, limit=21)),
        ("errors() without limit, invalid input", lambda: validator.errors(invalid)),
    ):
        tracemalloc.start()
        ms = worst_ms(function, 1 if "without" in label else rounds)
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append((label, f"{ms:,.0f}", f"{peak / 1e6:,.1f}"))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="redos_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (the worst is kept)")
    parser.add_argument("--budget", type=int, default=DEFAULT_MAX_INPUT_BYTES,
                        help="input budget in bytes (default: ToolSpec's default max_input_bytes)")
    parser.add_argument("--skip-amplification", action="store_true", help="skip the 4 MB errors() figures")
    args = parser.parse_args(argv)
    rounds = max(1, args.rounds)
    print(f"ReDoS corpus: {len(REDOS_CORPUS)} patterns, attack grown to {args.budget:,} bytes of arguments; "
          f"worst of {rounds} rounds, ms")
    print(table(("pattern", "engine", "chars", "validate", "invoke", "backtracking elsewhere / refusal"),
                 _corpus_rows(args.budget, rounds)))
    print()
    print(f"formats asserted at the tool boundary: hostile strings up to {args.budget:,} bytes of arguments; worst ms")
    print(table(("format", "chars", "verdict", "is_valid"), _format_rows(args.budget, rounds)))
    if not args.skip_amplification:
        print()
        print("2,000,000 failing array items (4 MB) against a valid array of the same size: ms, peak MB")
        print(table(("call", "ms", "peak MB"), _amplification_rows(rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
