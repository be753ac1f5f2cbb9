"""Issue 11: compiled validators are shared by schema content, and the catalog shares read-only schemas.

Building a spec twice compiles its schemas once: equal content (same JSON text, same options) gets the
very same Validator, from any thread; different content never does, not even content Python calls
equal (1, 1.0 and true); the cache stays within its bound; a schema that fails to compile fails every
time. Compiled parts shared between different schemas (a common leaf, a value-only keyword) still
report each schema's own patterns. What `Registry.catalog()` returns cannot be used to change a spec.
"""

from __future__ import annotations

import gc
import json
import threading
import unittest
from typing import Any, Dict, List
from unittest import mock

from agent_lab import Actor, Registry, ToolCall, ToolSpec, Validator
from agent_lab.schema import DRAFT_07, SchemaError, ValidatorCache, formats, shared_validator, validator_cache

ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


def tool_schema(limit: int) -> Dict[str, Any]:
    """A tool schema whose content depends on `limit` (the longest title it accepts)."""
    return {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": limit}, "code": {"type": "string", "pattern": "^[A-Z]{2}$"}},
        "required": ["title"],
        "additionalProperties": False,
    }


def run_in_threads(count: int, work) -> List[Any]:
    """Run `work(index)` on `count` threads released at once; the results by index (errors re-raised)."""
    barrier = threading.Barrier(count)
    results: List[Any] = [None] * count
    errors: List[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


class SharedValidatorsUnderThreadsTest(unittest.TestCase):
    def test_equal_content_shares_one_validator_and_distinct_content_never_does(self) -> None:
        cache = ValidatorCache(max_entries=64)
        limits = [3, 5, 8, 13]

        def build(index: int) -> Any:
            limit = limits[index % len(limits)]
            # a new dict every time: sharing must come from content, not identity
            return limit, cache.validator(json.loads(json.dumps(tool_schema(limit))))

        results = run_in_threads(32, build)
        by_limit: Dict[int, set] = {}
        for limit, validator in results:
            by_limit.setdefault(limit, set()).add(id(validator))
            self.assertTrue(validator.is_valid({"title": "a" * limit, "code": "AB"}))
            self.assertFalse(validator.is_valid({"title": "a" * (limit + 1)}))
            self.assertFalse(validator.is_valid({"title": "ok", "code": "abc"}))
        self.assertEqual({limit: len(ids) for limit, ids in by_limit.items()}, {limit: 1 for limit in limits})
        self.assertEqual(len(set().union(*by_limit.values())), len(limits))

    def test_specs_built_on_many_threads_share_validators_and_validate_correctly(self) -> None:
        def build(index: int) -> ToolSpec:
            limit = 4 + index % 3
            return ToolSpec(name=f"tool_{index}", description="A tool.", input_schema=tool_schema(limit),
                            output_schema={"type": "object", "properties": {"id": {"type": "string"}}})

        specs = run_in_threads(24, build)
        for spec in specs:
            limit = spec.input_schema["properties"]["title"]["maxLength"]
            twin = next(other for other in specs if other.input_schema["properties"]["title"]["maxLength"] == limit)
            self.assertIs(spec.input_validator, twin.input_validator)
            self.assertIs(spec.input_schema, spec.input_validator.schema)  # one frozen copy, not two
            self.assertIs(spec.output_validator, specs[0].output_validator)
            self.assertTrue(spec.input_validator.is_valid({"title": "a" * limit}))
            self.assertFalse(spec.input_validator.is_valid({"title": "a" * (limit + 1)}))
        self.assertEqual(len({id(spec.input_validator) for spec in specs}), 3)

    def test_the_cache_stays_within_its_bound(self) -> None:
        cache = ValidatorCache(max_entries=5)
        held = run_in_threads(20, lambda index: cache.validator(tool_schema(100 + index)))
        self.assertLessEqual(len(cache), 5)
        self.assertTrue(all(cache.cached(tool_schema(100 + index)) is held[index] for index in range(20)))
        del held
        gc.collect()
        self.assertLessEqual(len(cache), 5)
        self.assertLessEqual(cache.live(), 5)  # nothing else holds the others: they are gone

    def test_a_schema_that_fails_to_compile_raises_every_time_and_is_never_cached(self) -> None:
        cache = ValidatorCache()
        bad = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(unclosed"}}}

        def build(index: int) -> str:
            try:
                cache.validator(json.loads(json.dumps(bad)))
            except SchemaError as error:
                return str(error)
            return "compiled"

        outcomes = run_in_threads(12, build)
        self.assertEqual(len(set(outcomes)), 1)
        self.assertIn("regular expression", outcomes[0])
        self.assertIsNone(cache.cached(bad))
        self.assertEqual(len(cache), 0)
        for _ in range(2):
            with self.assertRaises(ValueError):
                ToolSpec(name="bad", description="A tool.", input_schema=bad)


class CacheKeyTest(unittest.TestCase):
    def test_content_python_calls_equal_is_not_shared(self) -> None:
        one, true, one_float = (shared_validator({"const": value}) for value in (1, True, 1.0))
        self.assertIsNot(one, true)
        self.assertIsNot(one, one_float)
        self.assertTrue(one.is_valid(1))
        self.assertFalse(one.is_valid(True))
        self.assertTrue(true.is_valid(True))
        self.assertFalse(true.is_valid(1))

    def test_options_that_change_compilation_are_part_of_the_key(self) -> None:
        schema = {"type": "string", "format": "email"}
        annotation, assertion = shared_validator(schema), shared_validator(schema, format_assertion=True)
        self.assertIsNot(annotation, assertion)
        self.assertTrue(annotation.is_valid("not an email"))
        self.assertFalse(assertion.is_valid("not an email"))
        prefix = {"prefixItems": [{"type": "string"}]}  # draft-07 does not know prefixItems
        self.assertIsNot(shared_validator(prefix), shared_validator(prefix, dialect=DRAFT_07))
        self.assertFalse(shared_validator(prefix).is_valid([1]))
        self.assertTrue(shared_validator(prefix, dialect=DRAFT_07).is_valid([1]))

    def test_key_order_is_part_of_the_key(self) -> None:
        forward = {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
        backward = {"properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
        first, second = shared_validator(forward), shared_validator(backward)
        self.assertIsNot(first, second)
        self.assertEqual([v.instance_path for v in second.errors({"a": 1, "b": 2})], ["/b", "/a"])

    def test_a_schema_that_is_not_json_is_refused_even_when_its_text_matches_a_cached_one(self) -> None:
        shared_validator({"properties": {"1": {"type": "string"}}})
        with self.assertRaises(SchemaError):
            shared_validator({"properties": {1: {"type": "string"}}})
        with self.assertRaises(SchemaError):
            shared_validator({"maximum": float("nan")})

    def test_a_changed_format_checker_table_compiles_again(self) -> None:
        schema = {"type": "string", "format": "counted-for-cache-test"}
        calls: List[str] = []
        counting = dict(formats.FORMAT_CHECKERS, **{"counted-for-cache-test": lambda value: not calls.append(value)})
        refusing = dict(formats.FORMAT_CHECKERS, **{"counted-for-cache-test": lambda value: False})
        with mock.patch.object(formats, "FORMAT_CHECKERS", counting):
            self.assertTrue(shared_validator(schema, format_assertion=True).is_valid("x"))
        with mock.patch.object(formats, "FORMAT_CHECKERS", refusing):
            self.assertFalse(shared_validator(schema, format_assertion=True).is_valid("x"))
        self.assertEqual(calls, ["x"])

    def test_validators_cannot_be_changed_once_built(self) -> None:
        validator = shared_validator(tool_schema(7))
        with self.assertRaises(AttributeError):
            validator.is_valid = lambda instance: True  # type: ignore[method-assign]
        with self.assertRaises(AttributeError):
            del validator.schema
        with self.assertRaises(AttributeError):
            Validator({"type": "string"}).schema = {}
        self.assertFalse(validator.is_valid({"title": "much too long"}))

    def test_the_process_wide_cache_counts_a_repeated_spec_as_a_hit(self) -> None:
        schema = tool_schema(321)
        ToolSpec(name="first", description="A tool.", input_schema=schema)
        hits = validator_cache.hits
        again = ToolSpec(name="again", description="Another tool.", input_schema=json.loads(json.dumps(schema)))
        self.assertGreater(validator_cache.hits, hits)
        self.assertIs(again.input_validator, validator_cache.cached(schema, format_assertion=True))


class RebuiltSpecTest(unittest.TestCase):
    """A spec rebuilt from another (`dataclasses.replace`, as the ticket lab binds each world's guard)
    hands the cache the frozen copy it was compiled from: the same validator, found by that copy."""

    def test_a_replaced_spec_shares_its_validators_and_enforces_the_same_contract(self) -> None:
        import dataclasses

        cache = ValidatorCache()
        with mock.patch("agent_lab.schema._cache.validator_cache", cache), \
                mock.patch("agent_lab.schema.validator_cache", cache):
            spec = ToolSpec(name="t", description="d.", input_schema=tool_schema(7), output_schema=tool_schema(9))
            rebuilt = dataclasses.replace(spec, resource_guard=lambda arguments, actor: True)
            self.assertIs(rebuilt.input_validator, spec.input_validator)
            self.assertIs(rebuilt.output_validator, spec.output_validator)
            self.assertIs(rebuilt.input_schema, spec.input_schema)
            self.assertFalse(rebuilt.input_validator.is_valid({"title": "x" * 8}))
            self.assertTrue(rebuilt.input_validator.is_valid({"title": "x" * 7}))
            # The options still decide: the same frozen copy without format checks is another validator.
            unformatted = dataclasses.replace(spec, format_assertion=False)
            self.assertIsNot(unformatted.input_validator, spec.input_validator)

    def test_the_copies_it_finds_by_identity_stay_within_the_bound(self) -> None:
        cache = ValidatorCache(max_entries=2)
        validators = [cache.validator(tool_schema(limit)) for limit in range(5)]
        self.assertEqual(len(cache._by_copy), 2)
        self.assertIs(cache.cached(validators[-1].schema), validators[-1])
        self.assertIs(cache.cached(validators[0].schema), validators[0])  # by content, while something holds it


class SharedPartsTest(unittest.TestCase):
    def test_schemas_sharing_a_leaf_still_list_their_own_patterns_at_their_own_pointers(self) -> None:
        leaf = {"type": "string", "pattern": "^[a-z]+$"}
        first = Validator({"type": "object", "properties": {"a": dict(leaf)}})
        second = Validator({"type": "object", "properties": {"x": {"type": "object", "properties": {"b": dict(leaf)}}}})
        self.assertEqual([finding.pointer for finding in first.patterns], ["/properties/a/pattern"])
        self.assertEqual([finding.pointer for finding in second.patterns], ["/properties/x/properties/b/pattern"])
        self.assertFalse(second.is_valid({"x": {"b": "ABC"}}))
        self.assertEqual([v.instance_path for v in second.errors({"x": {"b": "ABC"}})], ["/x/b"])

    def test_schemas_differing_only_in_descriptions_validate_alike(self) -> None:
        first = Validator({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3, "description": "one"}}})
        second = Validator({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3, "description": "two"}}})
        other = Validator({"type": "object", "properties": {"a": {"type": "integer", "maximum": 4}}})
        for validator, accepts_four in ((first, False), (second, False), (other, True)):
            self.assertEqual(validator.is_valid({"a": 4}), accepts_four)
            self.assertTrue(validator.is_valid({"a": 3}))

    def test_draft_04_exclusive_bounds_are_not_confused_with_inclusive_ones(self) -> None:
        draft4 = "http://json-schema.org/draft-04/schema#"
        inclusive = Validator({"$schema": draft4, "properties": {"a": {"maximum": 3}}})
        exclusive = Validator({"$schema": draft4, "properties": {"a": {"maximum": 3, "exclusiveMaximum": True}}})
        self.assertTrue(inclusive.is_valid({"a": 3}))
        self.assertFalse(exclusive.is_valid({"a": 3}))


class CatalogIsReadOnlyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry(run_inline=True)
        self.addCleanup(self.registry.close)
        self.spec = ToolSpec(name="file_ticket", description="File a ticket.", input_schema=tool_schema(5))
        self.registry.register(self.spec, lambda arguments: {"ok": True})

    def test_catalog_output_cannot_change_what_the_spec_advertises_or_enforces(self) -> None:
        entry = self.registry.catalog()[0]
        schema = entry["input_schema"]
        for mutate in (lambda: schema.__setitem__("additionalProperties", True),
                       lambda: schema["properties"]["title"].__setitem__("maxLength", 1000),
                       lambda: schema["required"].append("code"),
                       lambda: schema["properties"].pop("title")):
            with self.assertRaises(TypeError):
                mutate()
        entry["input_schema"] = {"type": "object"}  # the entry itself is the caller's own dict
        entry["name"] = "renamed"
        again = self.registry.catalog()[0]
        self.assertEqual(again["name"], "file_ticket")
        self.assertEqual(again["input_schema"], tool_schema(5))
        self.assertEqual(again, self.spec.model_schema())
        self.assertFalse(self.registry.invoke(ToolCall("file_ticket", {"title": "too long"}), actor=ACTOR).ok)
        self.assertTrue(self.registry.invoke(ToolCall("file_ticket", {"title": "short"}), actor=ACTOR).ok)

    def test_catalog_output_is_plain_json_and_shares_the_specs_schema(self) -> None:
        catalog = self.registry.catalog()
        self.assertEqual(json.loads(json.dumps(catalog)), [self.spec.model_schema()])
        self.assertIs(catalog[0]["input_schema"], self.spec.input_schema)
        self.assertIsNot(self.registry.catalog()[0], catalog[0])


if __name__ == "__main__":
    unittest.main()
