"""Validation work a model cannot make superlinear (issue 8).

A model chooses the instance: how deep it nests, how wide it is, which branch fails last. Whatever
it sends, validating costs work polynomial in (schema size x instance size): a subschema that
several combinators apply to the same value (a recursive `anyOf`, `allOf`, `oneOf`, `if`, `not`,
`dependentSchemas`, the annotations `unevaluated*` reads, `$dynamicRef`, `$recursiveRef`, in every
dialect) checks each value once per call, and `uniqueItems` compares items by keys a sender cannot
make collide. Work is counted, never timed: a `format` checker placed in the recursive subschema
counts how often validation asks it, and past the allowance (the product of the schema's and the
instance's sizes) it stops the validation at once, so code with exponential work fails these tests
in milliseconds instead of running for hours.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import sys
import threading
import unittest
from typing import Any, Callable, Dict, Tuple
from unittest import mock

from agent_lab import Actor, Registry, ToolCall, ToolSpec, Validator
from agent_lab.schema import DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, MAX_INSTANCE_DEPTH, formats
from agent_lab.spec import DEFAULT_MAX_INPUT_BYTES

COUNTED = {"format": "counted"}
SELF = {"$ref": "#/$defs/n"}
ACTOR = Actor(id="agent", tenant="t")


class TooMuchWork(BaseException):
    """Raised by CountedWork past its allowance. A BaseException, so that nothing in the validator
    (whose format checks treat an Exception as "not valid") can swallow it."""


class CountedWork:
    """A `format` checker that accepts every string and counts how often validation asks it.

    The default allowance is far above what any test here needs, and far below what exponential
    work reaches at the depths they use."""

    def __init__(self, allowance: int = 200_000) -> None:
        self.calls = 0
        self.allowance = allowance

    def __call__(self, value: str) -> bool:
        self.calls += 1
        if self.calls > self.allowance:
            raise TooMuchWork(f"more than {self.allowance} checks")
        return True


def counted_validator(schema: Any, counter: CountedWork, **options: Any) -> Validator:
    with mock.patch.object(formats, "FORMAT_CHECKERS", {"counted": counter}):
        return Validator(schema, format_assertion=True, **options)


def json_values(value: Any) -> int:
    """The size of a JSON document: how many values it holds (itself included)."""
    if isinstance(value, dict):
        return 1 + sum(json_values(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(json_values(item) for item in value)
    return 1


def compact_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def object_chain(depth: int, *, valid: bool) -> Dict[str, Any]:
    """`depth` objects nested under "x"; the innermost breaks the schemas below unless `valid`."""
    value: Dict[str, Any] = {"y": 2 if valid else 3, "c": "s"}
    for _ in range(depth - 1):
        value = {"x": value, "y": 2, "c": "s"}
    return value


def array_chain(depth: int, *, valid: bool) -> list:
    """`depth` arrays nested at index 1; the innermost breaks ARRAY_SCHEMA unless `valid`."""
    value: list = ["s"] if valid else ["s", 5]
    for _ in range(depth - 1):
        value = ["s", value]
    return value


def forest(make: Callable[..., Any], *, valid: bool, budget: int = DEFAULT_MAX_INPUT_BYTES) -> Dict[str, Any]:
    """As many chains of 24 levels as fit the input budget, side by side under "z"; only the last one
    may fail, so that nothing short of the whole instance decides the verdict."""
    last = make(24, valid=valid)
    tree_bytes = compact_bytes(make(24, valid=True)) + 1  # and its comma
    room = budget - compact_bytes({"z": [last], "y": 2, "c": "s"})
    return {"z": [make(24, valid=True) for _ in range(room // tree_bytes)] + [last], "y": 2, "c": "s"}


def with_defs(dialect: str, definition: Dict[str, Any], defs: str = "$defs") -> Dict[str, Any]:
    text = json.dumps({"$schema": dialect, defs: {"n": definition}, "$ref": f"#/{defs}/n"})
    return json.loads(text.replace("#/$defs/n", f"#/{defs}/n"))


def branch(**properties: Any) -> Dict[str, Any]:
    return {"properties": {"x": SELF, "z": {"type": "array", "items": SELF}, **properties}}


# Each schema applies one recursive subschema to the same value along several paths: without a memo,
# every level of the instance doubles the work. The counted format sits in the recursive subschema.
HOSTILE_SCHEMAS: Dict[str, Tuple[Any, Callable[..., Any]]] = {
    "anyOf (the reported reproducer)": (
        {"$defs": {"n": {"propertyNames": COUNTED, "anyOf": [branch(y={"const": 1}), branch(y={"const": 2})]}},
         "$ref": "#/$defs/n"}, object_chain),
    "oneOf": (
        {"$defs": {"n": {"propertyNames": COUNTED, "oneOf": [branch(y={"const": 1}), branch(y={"const": 2})]}},
         "$ref": "#/$defs/n"}, object_chain),
    "allOf": (
        {"$defs": {"n": {"propertyNames": COUNTED, "allOf": [branch(), branch(y={"const": 2})]}}, "$ref": "#/$defs/n"},
        object_chain),
    "if/then/else": (
        {"$defs": {"n": {"propertyNames": COUNTED, "if": branch(), "then": branch(y={"const": 2}), "else": branch()}},
         "$ref": "#/$defs/n"}, object_chain),
    "not": (
        {"$defs": {"n": {"propertyNames": COUNTED,
                         "properties": {"x": {"not": {"not": SELF}}, "y": {"const": 2}},
                         "not": {"required": ["x"], "properties": {"x": {"not": SELF}}}}},
         "$ref": "#/$defs/n"}, object_chain),
    "dependentSchemas": (
        {"$defs": {"n": {"propertyNames": COUNTED,
                         "dependentSchemas": {"x": branch(), "y": branch(y={"const": 2})}}}, "$ref": "#/$defs/n"},
        object_chain),
    "unevaluatedProperties": (
        {"$defs": {"n": {"propertyNames": COUNTED, "allOf": [branch(y={"const": 2})],
                         "unevaluatedProperties": {"type": "string"}}}, "$ref": "#/$defs/n"},
        object_chain),
    "unevaluatedItems": (
        {"$defs": {"n": {"type": "array", "prefixItems": [COUNTED],
                         "anyOf": [{"prefixItems": [True, SELF]}, {"contains": SELF}],
                         "unevaluatedItems": False}}, "$ref": "#/$defs/n"},
        array_chain),
    "$dynamicRef": (
        {"$id": "https://example.com/node", "$dynamicAnchor": "node", "propertyNames": COUNTED,
         "anyOf": [{"properties": {"x": {"$dynamicRef": "#node"}, "y": {"const": 1}}},
                   {"properties": {"x": {"$dynamicRef": "#node"}, "y": {"const": 2},
                                   "z": {"type": "array", "items": {"$dynamicRef": "#node"}}}}]},
        object_chain),
    "$recursiveRef (2019-09)": (
        {"$schema": DRAFT_2019_09, "$id": "https://example.com/node", "$recursiveAnchor": True,
         "propertyNames": COUNTED,
         "anyOf": [{"properties": {"x": {"$recursiveRef": "#"}, "y": {"const": 1}}},
                   {"properties": {"x": {"$recursiveRef": "#"}, "y": {"const": 2},
                                   "z": {"type": "array", "items": {"$recursiveRef": "#"}}}}]},
        object_chain),
    "allOf (2019-09)": (
        with_defs(DRAFT_2019_09, {"propertyNames": COUNTED, "allOf": [branch(), branch(y={"const": 2})]}),
        object_chain),
    "anyOf (draft-07)": (
        with_defs(DRAFT_07, {"propertyNames": COUNTED, "anyOf": [branch(y={"const": 1}), branch(y={"const": 2})]},
                  "definitions"), object_chain),
    "if/then/else (draft-07)": (
        with_defs(DRAFT_07, {"propertyNames": COUNTED, "if": branch(), "then": branch(y={"const": 2}),
                             "else": branch()}, "definitions"), object_chain),
    "oneOf (draft-06)": (
        with_defs(DRAFT_06, {"propertyNames": COUNTED, "oneOf": [branch(y={"const": 1}), branch(y={"const": 2})]},
                  "definitions"), object_chain),
    "anyOf (draft-04)": (  # no propertyNames before draft-06: the counted check is the extra member "c"
        with_defs(DRAFT_04, {"additionalProperties": COUNTED,
                             "anyOf": [branch(y={"enum": [1]}), branch(y={"enum": [2]})]}, "definitions"),
        object_chain),
}


class RecursiveCombinatorsTest(unittest.TestCase):
    """The reproducer of issue 8 and its relatives: work bounded by (schema size x instance size)."""

    def assertBoundedWork(self, schema: Any, instance: Any, counter: CountedWork, validator: Validator) -> None:
        allowance = json_values(schema) * json_values(instance)
        verdict = None
        for call in ("is_valid", "errors", "errors(limit=21)"):
            with self.subTest(call=call):
                counter.calls, counter.allowance = 0, allowance
                try:
                    if call == "is_valid":
                        verdict = validator.is_valid(instance)
                    elif call == "errors":
                        self.assertEqual(validator.errors(instance) == [], verdict)
                    else:
                        self.assertEqual(validator.errors(instance, limit=21) == [], verdict)
                except TooMuchWork:
                    self.fail(f"{call} asked for more than {allowance} checks "
                              f"(schema of {json_values(schema)} values x instance of {json_values(instance)})")
                self.assertGreater(counter.calls, 0)  # the counted check is on the recursive path

    def test_hostile_instances_up_to_the_input_budget_cost_at_most_schema_times_instance(self) -> None:
        for name, (schema, make) in HOSTILE_SCHEMAS.items():
            counter = CountedWork()
            validator = counted_validator(schema, counter)
            instances = {
                "deepest chain, valid": make(MAX_INSTANCE_DEPTH, valid=True),
                "deepest chain, failing at the bottom": make(MAX_INSTANCE_DEPTH, valid=False),
            }
            if make is object_chain:
                instances["forest of chains filling the budget"] = forest(make, valid=False)
            for label, instance in instances.items():
                with self.subTest(schema=name, instance=label):
                    self.assertLessEqual(compact_bytes(instance), DEFAULT_MAX_INPUT_BYTES)
                    self.assertBoundedWork(schema, instance, counter, validator)

    def test_a_budget_raised_to_one_mebibyte_keeps_the_bound(self) -> None:
        schema, make = HOSTILE_SCHEMAS["anyOf (the reported reproducer)"]
        counter = CountedWork()
        validator = counted_validator(schema, counter)
        instance = forest(make, valid=False, budget=1024 * 1024)
        self.assertGreater(compact_bytes(instance), 1000 * 1024)
        self.assertBoundedWork(schema, instance, counter, validator)

    def test_the_verdicts_are_those_of_the_schemas(self) -> None:
        for name, (schema, make) in HOSTILE_SCHEMAS.items():
            validator = counted_validator(schema, CountedWork())
            with self.subTest(schema=name):
                self.assertTrue(validator.is_valid(make(12, valid=True)))
                self.assertFalse(validator.is_valid(make(12, valid=False)))
                self.assertEqual(validator.errors(make(12, valid=True)), [])
                self.assertNotEqual(validator.errors(make(12, valid=False)), [])

    def test_work_grows_linearly_with_the_depth_a_model_chooses(self) -> None:
        schema, make = HOSTILE_SCHEMAS["anyOf (the reported reproducer)"]
        counter = CountedWork()
        validator = counted_validator(schema, counter)
        counts = {}
        for depth in (8, 16, 32, MAX_INSTANCE_DEPTH):
            counter.calls, counter.allowance = 0, 100 * depth
            self.assertFalse(validator.is_valid(make(depth, valid=False)))
            counts[depth] = counter.calls
        # Each level adds the same work (its three member names, each checked once), nothing doubles.
        steps = {counts[16] - counts[8], (counts[32] - counts[16]) // 2}
        self.assertEqual(len(steps), 1, counts)
        self.assertEqual(counts[MAX_INSTANCE_DEPTH] - counts[32], steps.pop() * (MAX_INSTANCE_DEPTH - 32) // 8)

    def test_the_tool_boundary_answers_the_deepest_reproducer_with_bounded_work(self) -> None:
        schema, make = HOSTILE_SCHEMAS["anyOf (the reported reproducer)"]
        counter = CountedWork()
        with mock.patch.object(formats, "FORMAT_CHECKERS", {"counted": counter}):
            spec = ToolSpec(name="tree", description="Takes a tree.", input_schema={"type": "object", **schema})
        arguments = make(MAX_INSTANCE_DEPTH, valid=False)
        counter.allowance = json_values(schema) * json_values(arguments) * 3  # is_valid, then errors(limit)
        with Registry() as registry:
            registry.register(spec, lambda _arguments: {})
            result = registry.invoke(ToolCall("tree", arguments), actor=ACTOR)
        self.assertEqual(result.error.code if result.error else None, "invalid_arguments")
        self.assertGreater(counter.calls, 0)


class SchemaSizeTest(unittest.TestCase):
    """Work stays polynomial in the schema too: sharing and annotations never multiply it."""

    def test_definitions_that_each_apply_the_next_twice_do_not_double_per_level(self) -> None:
        levels = 24
        defs: Dict[str, Any] = {f"d{levels}": {"type": "string", "format": "counted"}}
        for index in range(levels):
            following = {"$ref": f"#/$defs/d{index + 1}"}
            defs[f"d{index}"] = {"allOf": [following, {"not": {"not": following}}]}
        schema = {"$defs": defs, "$ref": "#/$defs/d0"}
        counter = CountedWork()
        validator = counted_validator(schema, counter)
        counter.allowance = json_values(schema)
        self.assertTrue(validator.is_valid("s"))
        self.assertEqual(validator.errors("s"), [])
        self.assertFalse(validator.is_valid(5))
        violations = validator.errors(5)  # the type at the bottom, then each level's second branch
        self.assertEqual(violations[0].keyword_path, "/$ref" + "/allOf/0/$ref" * levels + "/type")
        self.assertEqual([violation.keyword for violation in violations], ["type"] + ["not"] * levels)

    def test_nested_unevaluated_properties_ask_each_branch_once(self) -> None:
        schema: Any = {"properties": {"a": {"type": "string", "format": "counted"}}}
        for _ in range(24):
            schema = {"allOf": [schema], "unevaluatedProperties": False}
        counter = CountedWork()
        validator = counted_validator(schema, counter)
        counter.allowance = json_values(schema)
        self.assertTrue(validator.is_valid({"a": "s"}))
        self.assertFalse(validator.is_valid({"a": "s", "b": 1}))
        violations = validator.errors({"a": "s", "b": 1})
        # The innermost level refuses "b"; each level above refuses "a" and "b" (its branch failed).
        self.assertEqual(len(violations), 2 * 24 - 1)
        self.assertEqual((violations[0].instance_path, violations[0].keyword_path),
                         ("/b", "/allOf/0" * 23 + "/unevaluatedProperties"))


class MemoisedViolationsTest(unittest.TestCase):
    """errors() stays exact where verdicts are memoised: paths, order, aliasing, limits."""

    ALL_OF = HOSTILE_SCHEMAS["allOf"][0]

    def test_a_violation_reached_along_many_paths_is_reported_once_where_it_is(self) -> None:
        validator = counted_validator(self.ALL_OF, CountedWork())
        depth = 20
        [only] = validator.errors(object_chain(depth, valid=False))
        self.assertEqual(only.instance_path, "/x" * (depth - 1) + "/y")
        self.assertEqual(only.keyword_path,
                         "/$ref" + "/allOf/0/properties/x/$ref" * (depth - 1) + "/allOf/1/properties/y/const")
        self.assertEqual(only.keyword, "const")

    def test_errors_with_a_limit_are_the_first_of_the_full_list(self) -> None:
        validator = counted_validator(self.ALL_OF, CountedWork())
        instance = {"x": object_chain(6, valid=False), "z": [object_chain(3, valid=False), {"y": 9}], "y": 5}
        every = validator.errors(instance)
        self.assertEqual([violation.instance_path for violation in every],
                         ["/x/x/x/x/x/x/y", "/z/0/x/x/y", "/z/1/y", "/y"])
        for limit in range(1, len(every) + 2):
            with self.subTest(limit=limit):
                self.assertEqual(validator.errors(instance, limit=limit), every[:limit])

    def test_one_python_object_in_two_places_is_reported_at_both(self) -> None:
        validator = counted_validator(self.ALL_OF, CountedWork())
        shared = object_chain(3, valid=False)
        aliased = {"x": shared, "z": [shared, shared], "y": 2}
        separate = copy.deepcopy(aliased)
        self.assertEqual(validator.errors(aliased), validator.errors(separate))
        self.assertEqual([violation.instance_path for violation in validator.errors(aliased)],
                         ["/x/x/x/y", "/z/0/x/x/y", "/z/1/x/x/y"])
        self.assertFalse(validator.is_valid(aliased))
        shared["x"]["x"]["y"] = 2
        self.assertTrue(validator.is_valid(aliased))
        self.assertEqual(validator.errors(aliased), [])

    def test_verdicts_last_one_call(self) -> None:
        schema, _make = HOSTILE_SCHEMAS["anyOf (the reported reproducer)"]
        validator = counted_validator(schema, CountedWork())
        instance = object_chain(40, valid=True)
        self.assertTrue(validator.is_valid(instance))
        innermost = instance
        while "x" in innermost:
            innermost = innermost["x"]
        innermost["y"] = 3  # the same objects, now invalid: nothing remembered from the last call
        self.assertFalse(validator.is_valid(instance))
        self.assertNotEqual(validator.errors(instance), [])
        innermost["y"] = 1
        self.assertTrue(validator.is_valid(instance))

    def test_threads_sharing_a_validator_keep_their_own_verdicts(self) -> None:
        schema, _make = HOSTILE_SCHEMAS["anyOf (the reported reproducer)"]
        counter = CountedWork()
        validator = counted_validator(schema, counter)
        instances = [object_chain(depth, valid=depth % 2 == 0) for depth in range(2, 40)]
        expected = [validator.is_valid(instance) for instance in instances]
        counter.allowance = counter.calls * 100  # 4 threads x 20 rounds, and room for a racy count
        wrong: list = []
        start = threading.Barrier(4)

        def work() -> None:
            start.wait()
            try:
                for _ in range(20):
                    got = [validator.is_valid(instance) for instance in instances]
                    if got != expected:
                        wrong.append(got)
            except BaseException as stopped:  # TooMuchWork: reported by the test, not lost in a thread
                wrong.append(stopped)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(wrong, [])
        self.assertEqual(expected, [depth % 2 == 0 for depth in range(2, 40)])


def child_chain(depth: int) -> Dict[str, Any]:
    """A tree `depth` levels deep, one child per level; the leaf has a member no tree defines."""
    value: Dict[str, Any] = {"data": 1, "extra": 1}
    for _ in range(depth - 1):
        value = {"children": [value]}
    return value


class DynamicScopeTest(unittest.TestCase):
    """A verdict depends on the dynamic scope: one value checked under two scopes gets two verdicts,
    and each is still reached with bounded work (two branches apply the dynamic reference per level)."""

    def twice(self, reference: Dict[str, Any]) -> Dict[str, Any]:
        return {"type": "array", "items": {"anyOf": [reference, dict(reference)]}}

    def test_one_value_under_a_loose_and_a_strict_scope(self) -> None:
        tree = {"$id": "https://example.com/tree", "$dynamicAnchor": "node", "type": "object",
                "propertyNames": COUNTED,
                "properties": {"data": True, "children": self.twice({"$dynamicRef": "#node"})}}
        strict = {"$id": "https://example.com/strict-tree", "$dynamicAnchor": "node",
                  "$ref": "tree", "unevaluatedProperties": False}
        resources = {"https://example.com/tree": tree, "https://example.com/strict-tree": strict}
        self.assertScopesKeptApart({}, resources)

    def test_recursive_ref_under_two_scopes(self) -> None:
        tree = {"$schema": DRAFT_2019_09, "$id": "https://example.com/tree", "$recursiveAnchor": True,
                "type": "object", "propertyNames": COUNTED,
                "properties": {"data": True, "children": self.twice({"$recursiveRef": "#"})}}
        strict = {"$schema": DRAFT_2019_09, "$id": "https://example.com/strict-tree", "$recursiveAnchor": True,
                  "$ref": "tree", "unevaluatedProperties": False}
        resources = {"https://example.com/tree": tree, "https://example.com/strict-tree": strict}
        self.assertScopesKeptApart({"$schema": DRAFT_2019_09}, resources)

    def assertScopesKeptApart(self, dialect: Dict[str, Any], resources: Dict[str, Any]) -> None:
        shared = child_chain(30)
        for order in (("loose", "strict"), ("strict", "loose")):
            schema = {**dialect, "properties": {
                name: {"$ref": "https://example.com/" + ("tree" if name == "loose" else "strict-tree")}
                for name in order}}
            counter = CountedWork()
            validator = counted_validator(schema, counter, resources=resources)
            instance = {name: shared for name in order}
            counter.allowance = json_values(schema) * json_values(instance) * 4
            with self.subTest(order=order):
                self.assertTrue(validator.is_valid({"loose": shared}))
                self.assertFalse(validator.is_valid({"strict": shared}))
                self.assertFalse(validator.is_valid(instance))
                # The first child matches no anyOf branch (its leaf has "extra"), so "children" is
                # unevaluated at the top; nothing is said about the loose copy of the same value.
                self.assertEqual([violation.instance_path for violation in validator.errors(instance)],
                                 ["/strict/children/0", "/strict/children"])


class UniqueItemsTest(unittest.TestCase):
    """uniqueItems hashes each item once, by a key a sender cannot make collide, with JSON equality."""

    def test_integers_python_hashes_alike_get_distinct_keys(self) -> None:
        from agent_lab.schema._keywords import unique_key

        modulus = sys.hash_info.modulus  # Python hashes every multiple of it to 0
        colliding = [index * modulus for index in range(1, 1001)]
        self.assertEqual(len({hash(value) for value in colliding}), 1)
        self.assertGreater(len({hash(unique_key(value)) for value in colliding}), 990)
        fractions = [index + 0.5 for index in range(1000)]
        self.assertEqual(len({hash(unique_key(value)) for value in fractions}), 1000)

    def test_json_equality_decides_what_is_a_duplicate(self) -> None:
        validator = Validator({"uniqueItems": True})
        modulus = sys.hash_info.modulus
        # A float is the decimal it is written as (json_number): 1e300 is 10**300, while float(2**70),
        # written 1.1805916207174113e+21, is not 2**70 = 1180591620717411303424.
        duplicates = ([1, 1.0], [1e300, 10 ** 300], [1e23, 10 ** 23], [2.0 ** 53, 2 ** 53], [1e18, 10 ** 18],
                      [[1, 2], [1.0, 2]], [{"a": 1, "b": [True]}, {"b": [True], "a": 1.0}], [-0.0, 0],
                      [None, None], ["é", "é"], [10 ** 400, 10 ** 400], [0.5, 0.5])
        distinct = ([True, 1], [False, 0], [modulus, 0], [2 * modulus, modulus], [-1, -2],
                    [2 ** 70, float(2 ** 70)], [2 ** 61, float(2 ** 61)], [1e23, 99999999999999991611392],
                    [[1], [True]], [{"a": 1}, {"a": 1, "b": 1}], ["1", 1], [None, False], [0.5, 0.25],
                    [{}, []], [10 ** 400, 10 ** 400 + 1])
        for items in duplicates:
            with self.subTest(items=items):
                self.assertFalse(validator.is_valid(items))
                self.assertEqual([violation.keyword for violation in validator.errors(items)], ["uniqueItems"])
        for items in distinct:
            with self.subTest(items=items):
                self.assertTrue(validator.is_valid(items))

    def test_colliding_integers_across_the_whole_budget_get_the_right_answer(self) -> None:
        validator = Validator({"type": "array", "uniqueItems": True})
        modulus = sys.hash_info.modulus
        items = []
        while compact_bytes(items) < DEFAULT_MAX_INPUT_BYTES - 40:
            items.append((len(items) + 1) * modulus)
        self.assertTrue(validator.is_valid(items))
        self.assertFalse(validator.is_valid(items + [items[len(items) // 2]]))


class RefusalCostTest(unittest.TestCase):
    """The registry asks `is_valid` first (what a valid value costs) and `errors` only for a value it
    refused, telling it so (`known_invalid=True`): a refusal costs what `errors` alone costs, and the
    whole value is not checked a second time before its violations are collected."""

    def test_a_refused_argument_or_output_is_checked_no_more_often_than_errors_alone_checks_it(self) -> None:
        checked: list = []

        def counted(value: str) -> bool:
            checked.append(value)
            return value != "bad"

        property_schema = {"type": "string", "format": "counted", "$comment": "RefusalCostTest"}
        with mock.patch.object(formats, "FORMAT_CHECKERS", {"counted": counted}):
            spec = ToolSpec(name="t", description="d",
                            input_schema={"type": "object", "properties": {"p": property_schema}},
                            output_schema={"type": "object", "properties": {"q": property_schema}})
        with Registry() as registry:
            registry.register(spec, lambda arguments: {"q": "bad"})
            for case, arguments, validator, instance, code in (
                    ("argument", {"p": "bad"}, spec.input_validator, {"p": "bad"}, "invalid_arguments"),
                    ("output", {"p": "good"}, spec.output_validator, {"q": "bad"}, "invalid_tool_output")):
                with self.subTest(case=case):
                    checked.clear()
                    refused = registry.invoke(ToolCall("t", arguments), actor=ACTOR)
                    self.assertEqual(refused.error.code, code)
                    in_invoke = checked.count("bad")
                    checked.clear()
                    alone = validator.errors(instance)
                    self.assertEqual(in_invoke, checked.count("bad"))
                    self.assertEqual(validator.errors(instance, known_invalid=True), alone)

    def test_known_invalid_on_a_valid_value_still_answers_a_violation_never_none(self) -> None:
        validator = Validator({"type": "string"})
        self.assertEqual(validator.errors("fine"), [])
        [violation] = validator.errors("fine", known_invalid=True)
        self.assertEqual(violation.keyword, "schema")


class RecursionBenchTest(unittest.TestCase):
    """`python run_lab.py bench --only recursion` measures the reported reproducer (figures printed only)."""

    def test_the_bench_instance_is_the_reported_one_at_each_depth(self) -> None:
        from agent_lab.bench import recursion_bench

        validator = Validator(recursion_bench.REPRODUCER)
        for depth in recursion_bench.DEPTHS:
            instance = recursion_bench.reproducer_instance(depth)
            nested, innermost = 1, instance
            while "x" in innermost:
                nested, innermost = nested + 1, innermost["x"]
            self.assertEqual((nested, innermost), (depth, {"y": 3}))
            self.assertFalse(validator.is_valid(instance))
            self.assertEqual([violation.keyword for violation in validator.errors(instance)], ["anyOf"])

    def test_main_prints_every_depth(self) -> None:
        from agent_lab.bench import recursion_bench

        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            self.assertEqual(recursion_bench.main(["--rounds", "1", "--give-up-after", "1e9"]), 0)
        rows = [line.split()[0] for line in output.getvalue().splitlines() if line[:1].isdigit()]
        self.assertEqual(rows[:len(recursion_bench.DEPTHS)], [str(depth) for depth in recursion_bench.DEPTHS])
        self.assertNotIn("not run", output.getvalue())


if __name__ == "__main__":
    unittest.main()
