"""Issue 8, item 12: a ToolSpec's schemas cannot change after it is built.

The catalog and every export must advertise exactly the schema the validator enforces. So mutating
the dict passed to the spec, or anything reachable from the spec, changes neither; the spec's own
schemas refuse every ordinary mutation; exports are still plain dicts and JSON; and specs still
compare and hash sanely.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import unittest
from typing import Any

from agent_lab.adapters import export_catalog
from agent_lab.calls import ToolCall
from agent_lab.frozenjson import FrozenArray, FrozenObject
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


def schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"priority": {"enum": ["low", "high"]}, "title": {"type": "string", "maxLength": 5}},
        "required": ["title"],
        "additionalProperties": False,
    }


def spec_with(input_schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name="file_ticket", description="File a ticket.", input_schema=input_schema,
                    output_schema={"type": "object", "properties": {"id": {"type": "string"}}})


def mutations(target: Any) -> list[tuple[str, Any]]:
    """Every ordinary way of changing a schema (as callables), against the mapping `target`."""
    properties = target["properties"]
    enum = properties["priority"]["enum"]
    return [
        ("set a keyword", lambda: target.__setitem__("additionalProperties", True)),
        ("delete a keyword", lambda: target.__delitem__("required")),
        ("update", lambda: target.update(required=[])),
        ("setdefault", lambda: target.setdefault("minProperties", 3)),
        ("pop", lambda: target.pop("required")),
        ("popitem", lambda: target.popitem()),
        ("clear a subschema", lambda: properties["title"].clear()),
        ("in-place or", lambda: properties.__ior__({"extra": {}})),
        ("append to an enum", lambda: enum.append("urgent")),
        ("extend an enum", lambda: enum.extend(["urgent"])),
        ("insert into an enum", lambda: enum.insert(0, "urgent")),
        ("replace an enum item", lambda: enum.__setitem__(0, "urgent")),
        ("delete an enum item", lambda: enum.__delitem__(0)),
        ("in-place add", lambda: enum.__iadd__(["urgent"])),
        ("sort", lambda: enum.sort()),
        ("remove", lambda: enum.remove("low")),
        ("re-init", lambda: target.__init__({"type": "object"})),
    ]


class FrozenSchemaTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def assertCatalogAgreesWithValidator(self, spec: ToolSpec) -> None:
        advertised = self.registry.catalog()[0]["input_schema"]
        self.assertEqual(advertised, schema())
        for arguments, valid in (({"title": "ok"}, True), ({"title": "too long"}, False),
                                 ({"title": "ok", "priority": "urgent"}, False), ({"title": "a", "x": 1}, False),
                                 ({}, False)):
            result = self.registry.invoke(ToolCall("file_ticket", arguments), actor=ACTOR)
            self.assertEqual(result.ok, valid, arguments)

    def test_mutating_the_dict_passed_in_changes_neither_catalog_nor_validation(self) -> None:
        given = schema()
        spec = spec_with(given)
        self.registry.register(spec, lambda arguments: {"id": "1"})
        for name, mutate in mutations(given):
            with self.subTest(mutation=name):
                try:
                    mutate()
                except (KeyError, ValueError):
                    pass  # the plain dict was already changed by an earlier mutation
        self.assertCatalogAgreesWithValidator(spec)

    def test_every_ordinary_mutation_of_the_specs_schema_is_refused(self) -> None:
        spec = spec_with(schema())
        self.registry.register(spec, lambda arguments: {"id": "1"})
        for target in (spec.input_schema, spec.input_validator.schema):
            for name, mutate in mutations(target):
                with self.subTest(mutation=name), self.assertRaisesRegex(TypeError, "read-only"):
                    mutate()
        with self.assertRaises(TypeError):
            spec.output_schema["properties"]["id"]["type"] = "integer"
        self.assertCatalogAgreesWithValidator(spec)

    def test_a_model_schema_is_a_plain_copy_that_may_be_changed_freely(self) -> None:
        spec = spec_with(schema())
        exported = spec.model_schema()
        self.assertIs(type(exported["input_schema"]), dict)
        self.assertIs(type(exported["input_schema"]["properties"]["priority"]["enum"]), list)
        exported["input_schema"]["properties"]["priority"]["enum"].append("urgent")
        self.assertEqual(spec.model_schema()["input_schema"], schema())

    def test_exports_are_plain_json(self) -> None:
        self.registry.register(spec_with(schema()), lambda arguments: {"id": "1"})
        for fmt in ("openai", "openai-chat", "anthropic", "mcp"):
            with self.subTest(fmt=fmt):
                exported = export_catalog(self.registry, fmt)
                self.assertEqual(json.loads(json.dumps(exported)), exported)
                self.assertNotIn("Frozen", repr(exported))
        self.assertEqual(json.loads(json.dumps(spec_with(schema()).input_schema)), schema())

    def test_copies_of_a_frozen_schema_are_plain_and_mutable(self) -> None:
        spec = spec_with(schema())
        for copied in (copy.copy(spec.input_schema), copy.deepcopy(spec.input_schema),
                       dict(spec.input_schema), spec.input_schema | {}):
            with self.subTest(kind=type(copied).__name__):
                copied["required"] = []  # a plain dict at the top
        deep = copy.deepcopy(spec.input_schema)
        deep["properties"]["priority"]["enum"].append("urgent")
        self.assertEqual(spec.input_schema, schema())
        self.assertEqual(pickle.loads(pickle.dumps(spec.input_schema)), schema())
        self.assertIsInstance(pickle.loads(pickle.dumps(spec.input_schema)), FrozenObject)

    def test_specs_compare_and_hash_by_their_contract(self) -> None:
        first, second = spec_with(schema()), spec_with(schema())
        self.assertEqual(first, second)
        self.assertEqual(hash(first), hash(second))
        self.assertEqual(len({first, second}), 1)
        other = spec_with({**schema(), "required": []})
        self.assertNotEqual(first, other)
        replaced = dataclasses.replace(first, description="File a ticket now.")
        self.assertEqual(replaced.input_schema, first.input_schema)
        self.assertIsInstance(spec_with(schema()).input_schema["required"], FrozenArray)


if __name__ == "__main__":
    unittest.main()
