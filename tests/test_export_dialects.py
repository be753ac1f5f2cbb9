"""Tools whose schemas are written in older dialects register, run and export; tools without arguments
export as strict objects.

- The official MCP reference servers' tool shapes (tests/fixtures/mcp_reference_tools.json: draft-07 from
  the TypeScript servers, 2020-12 from the Python ones) register as ToolSpecs and export in all four
  formats, as 2020-12; strict OpenAI export succeeds where the fixture says it can and otherwise refuses
  with the keyword and pointer it names.
- What export does with a draft-07 schema: `definitions` -> `$defs` with references rewritten,
  `dependencies` split, list-form `items` -> `prefixItems`, `$schema` dropped (see agent_lab/docs/exports.md).
- ToolSpec, @tool, Registry.invoke and the MCP server accept every dialect.
"""

from __future__ import annotations

import copy
import json
import unittest
from pathlib import Path

from agent_lab import Actor, ToolCall, ToolSpec, tool
from agent_lab.adapters import EXPORT_FORMATS, ExportSchemaError, StrictSchemaError, export_catalog, to_strict_schema
from agent_lab.registry import Registry
from agent_lab.schema import DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, DRAFT_2020_12, Validator

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mcp_reference_tools.json"
ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


def reference_tools() -> list:
    return json.loads(FIXTURES.read_text(encoding="utf-8"))["tools"]


def spec_of(fixture: dict) -> ToolSpec:
    return ToolSpec(name=fixture["name"], description=fixture["description"], input_schema=fixture["inputSchema"],
                    output_schema=fixture.get("outputSchema"))


def exported_schemas(tool_entry: dict) -> list:
    function = tool_entry.get("function", {})
    return [schema for schema in (tool_entry.get("parameters"), function.get("parameters"),
                                  tool_entry.get("input_schema"), tool_entry.get("inputSchema"),
                                  tool_entry.get("outputSchema")) if schema is not None]


DRAFT_07_TOOL = {
    "$schema": DRAFT_07,
    "type": "object",
    "properties": {
        "when": {"$ref": "#/definitions/date", "description": "Day of the meeting"},
        "room": {"type": "string", "maxLength": 20},
        "card": {"type": "string"}, "billing": {"type": "string"},
        "slot": {"type": "array", "items": [{"type": "integer"}, {"type": "integer"}], "additionalItems": False},
    },
    "required": ["when"],
    "dependencies": {"card": ["billing"]},
    "definitions": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
    "additionalProperties": False,
}


class ReferenceServerToolsTest(unittest.TestCase):
    def test_the_fixture_holds_the_draft_07_shapes_of_the_typescript_servers(self):
        tools = reference_tools()
        draft_07 = [fixture for fixture in tools if fixture["inputSchema"].get("$schema") == DRAFT_07]
        self.assertGreaterEqual(len(draft_07), 20)
        self.assertLessEqual({"filesystem", "memory", "git", "time", "fetch", "sequentialthinking"},
                             {fixture["server"] for fixture in tools})

    def test_reference_server_tools_register_and_export_in_all_four_formats_as_2020_12(self):
        specs = [spec_of(fixture) for fixture in reference_tools()]
        registry = Registry()
        for spec in specs:
            registry.register(spec, lambda arguments: {"content": "ok"})
        self.assertEqual(sorted(registry.names()), sorted(spec.name for spec in specs))
        for fmt in EXPORT_FORMATS:
            exported = export_catalog(registry, fmt)
            self.assertEqual(len(exported), len(specs))
            for entry in exported:
                for schema in exported_schemas(entry):
                    with self.subTest(fmt=fmt, tool=entry.get("name") or entry["function"]["name"]):
                        self.assertNotIn("$schema", schema)  # draft-07 converted; 2020-12 is the hosts' default
                        self.assertEqual(Validator(schema).dialect, DRAFT_2020_12)  # a valid 2020-12 schema

    def test_strict_export_converts_what_it_can_and_refuses_the_rest_with_the_keyword_and_pointer(self):
        for fixture in reference_tools():
            spec = spec_of(fixture)
            for fmt in ("openai", "openai-chat"):
                with self.subTest(tool=spec.name, fmt=fmt):
                    if "ok" in fixture["strict"]:
                        [entry] = export_catalog([spec], fmt, strict=True)
                        parameters = entry.get("parameters") or entry["function"]["parameters"]
                        self.assertIs(parameters["additionalProperties"], False)
                        self.assertEqual(parameters["required"], list(parameters["properties"]))
                    else:
                        with self.assertRaises(StrictSchemaError) as caught:
                            export_catalog([spec], fmt, strict=True)
                        refusal = fixture["strict"]["refused"]
                        self.assertEqual((caught.exception.tool, caught.exception.keyword, caught.exception.path),
                                         (spec.name, refusal["keyword"], refusal["path"]))

    def test_converted_reference_schemas_judge_arguments_as_the_originals_do(self):
        samples = [{}, {"path": "/tmp/a"}, {"path": 1}, {"path": "/tmp/a", "extra": True},
                   {"repo_path": "."}, {"timezone": "Europe/Paris"}, {"url": "https://example.com", "max_length": 0},
                   {"entities": [{"name": "a", "entityType": "b", "observations": []}]}]
        for fixture in reference_tools():
            spec = spec_of(fixture)
            [entry] = export_catalog([spec], "mcp")
            converted = Validator(entry["inputSchema"])
            for sample in samples:
                with self.subTest(tool=spec.name, sample=sample):
                    self.assertEqual(converted.is_valid(sample), spec.input_validator.is_valid(sample))


class DraftSevenExportTest(unittest.TestCase):
    """What `export` does with a draft-07 schema (agent_lab/docs/exports.md says the same)."""

    def test_a_draft_07_schema_exports_as_its_2020_12_equivalent_in_every_format(self):
        spec = ToolSpec(name="book_room", description="Book a room.", input_schema=DRAFT_07_TOOL)
        expected = {
            "type": "object",
            "properties": {
                "when": {"$ref": "#/$defs/date", "description": "Day of the meeting"},
                "room": {"type": "string", "maxLength": 20},
                "card": {"type": "string"}, "billing": {"type": "string"},
                "slot": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": False},
            },
            "required": ["when"],
            "dependentRequired": {"card": ["billing"]},
            "$defs": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
            "additionalProperties": False,
        }
        for fmt in EXPORT_FORMATS:
            with self.subTest(fmt=fmt):
                [entry] = export_catalog([spec], fmt)
                self.assertEqual(exported_schemas(entry)[0], expected)
        self.assertEqual(spec.input_schema, DRAFT_07_TOOL)  # the spec keeps its own schema, untouched

    def test_strict_export_of_a_draft_07_schema_names_what_strict_mode_cannot_say(self):
        spec = ToolSpec(name="book_room", description="Book a room.", input_schema=DRAFT_07_TOOL)
        with self.assertRaises(StrictSchemaError) as caught:
            export_catalog([spec], "openai", strict=True)
        # named as written (draft-07's dependencies), the reason says what it became in 2020-12
        self.assertEqual((caught.exception.keyword, caught.exception.path, caught.exception.tool),
                         ("dependencies", "/dependencies", "book_room"))
        self.assertIn("dependentRequired", caught.exception.reason)
        simple = copy.deepcopy(DRAFT_07_TOOL)
        del simple["dependencies"], simple["properties"]["slot"]
        [entry] = export_catalog([ToolSpec(name="book_room", description="Book a room.", input_schema=simple)],
                                 "openai", strict=True)
        self.assertEqual(entry["parameters"]["properties"]["when"], {"anyOf": [{"$ref": "#/$defs/date"}],
                                                                     "description": "Day of the meeting"})
        self.assertIn("date", entry["parameters"]["$defs"])

    def test_a_schema_without_a_faithful_2020_12_form_is_refused_with_its_pointer_except_for_mcp(self):
        schema = {"$schema": DRAFT_2019_09, "$recursiveAnchor": True, "type": "object",
                  "properties": {"children": {"type": "array", "items": {"$recursiveRef": "#"}}}}
        spec = ToolSpec(name="tree", description="A tree.", input_schema=schema)
        for fmt in ("openai", "openai-chat", "anthropic"):
            with self.subTest(fmt=fmt):
                with self.assertRaises(ExportSchemaError) as caught:
                    export_catalog([spec], fmt)
                self.assertEqual((caught.exception.tool, caught.exception.keyword, caught.exception.path),
                                 ("tree", "$recursiveRef", "/properties/children/items/$recursiveRef"))
                self.assertIn("#/properties/children/items/$recursiveRef", str(caught.exception))
        [entry] = export_catalog([spec], "mcp")  # MCP lets a schema declare its dialect: served as written
        self.assertEqual(entry["inputSchema"], schema)


class NoArgumentToolTest(unittest.TestCase):
    """A tool without arguments exports as an object with no properties; strict: closed, nothing required."""

    SHAPES = ({"type": "object", "properties": {}}, {"type": "object"},
              {"$schema": DRAFT_07, "type": "object", "properties": {}, "additionalProperties": False})
    STRICT = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}

    def test_strict_export_of_a_tool_without_arguments_is_a_closed_object_with_no_properties(self):
        for shape in self.SHAPES:
            spec = ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
            with self.subTest(shape=shape):
                [responses] = export_catalog([spec], "openai", strict=True)
                [chat] = export_catalog([spec], "openai-chat", strict=True)
                self.assertEqual(responses["parameters"], self.STRICT)
                self.assertTrue(responses["strict"])
                self.assertEqual(chat["function"]["parameters"], self.STRICT)
                self.assertTrue(chat["function"]["strict"])
                self.assertEqual(to_strict_schema(shape if "$schema" not in shape else self.STRICT), self.STRICT)

    def test_every_format_exports_a_tool_without_arguments_with_an_empty_properties_list(self):
        for shape in self.SHAPES:
            spec = ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
            for fmt in EXPORT_FORMATS:
                with self.subTest(shape=shape, fmt=fmt):
                    [entry] = export_catalog([spec], fmt)
                    schema = exported_schemas(entry)[0]
                    self.assertEqual((schema["type"], schema["properties"]), ("object", {}))
                    self.assertNotIn("required", schema)
                    # what the host is shown accepts what the tool accepts (an open object stays open)
                    self.assertEqual(Validator(schema).is_valid({"x": 1}), spec.input_validator.is_valid({"x": 1}))

    def test_a_nested_free_form_object_is_still_refused_in_strict_mode(self):
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema({"type": "object", "properties": {"metadata": {"type": "object"}}})
        self.assertEqual(caught.exception.path, "/properties/metadata")
        nested_empty = to_strict_schema({"type": "object", "properties": {"flags": {"type": "object", "properties": {}}}})
        self.assertEqual(nested_empty["properties"]["flags"], {"type": ["object", "null"], "properties": {},
                                                                "required": [], "additionalProperties": False})

    def test_conversion_never_mutates_the_spec_schema(self):
        shape = {"type": "object"}
        spec = ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
        for fmt in EXPORT_FORMATS:
            export_catalog([spec], fmt)
        export_catalog([spec], "openai", strict=True)
        self.assertEqual((shape, spec.input_schema), ({"type": "object"}, {"type": "object"}))


class EveryDialectRunsTest(unittest.TestCase):
    """ToolSpec, @tool and Registry.invoke accept a schema of every dialect and judge it in that dialect."""

    def test_registry_invoke_validates_arguments_in_the_schema_s_own_dialect(self):
        for dialect in (DRAFT_2020_12, DRAFT_2019_09, DRAFT_07, DRAFT_06, DRAFT_04):
            # "unit" must come with "n": dependentRequired from 2019-09 on, dependencies before.
            together = "dependentRequired" if dialect in (DRAFT_2020_12, DRAFT_2019_09) else "dependencies"
            schema = {"$schema": dialect, "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                      "required": ["n"], together: {"n": ["unit"]}}
            registry = Registry()
            registry.register(ToolSpec(name="count", description="Count.", input_schema=schema),
                              lambda arguments: {"ok": True})
            with self.subTest(dialect=dialect):
                self.assertTrue(registry.invoke(ToolCall("count", {"n": 2, "unit": "m"}), actor=ACTOR).ok)
                refused = registry.invoke(ToolCall("count", {"n": 2}), actor=ACTOR)
                self.assertEqual(refused.error.code, "invalid_arguments")
                self.assertIn("unit", json.dumps(refused.to_model()))
            registry.close()

    def test_draft_04_boolean_exclusive_minimum_is_enforced_by_invoke(self):
        schema = {"$schema": DRAFT_04, "type": "object",
                  "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}}
        registry = Registry()
        registry.register(ToolSpec(name="positive", description="Positive.", input_schema=schema),
                          lambda arguments: {"ok": True})
        self.assertEqual(registry.invoke(ToolCall("positive", {"n": 0}), actor=ACTOR).error.code, "invalid_arguments")
        self.assertTrue(registry.invoke(ToolCall("positive", {"n": 0.5}), actor=ACTOR).ok)
        registry.close()

    def test_tool_decorator_accepts_an_output_schema_of_an_older_dialect(self):
        @tool(output_schema={"$schema": DRAFT_07, "type": "object", "properties": {"total": {"type": "integer"}},
                             "required": ["total"]})
        def add(a: int, b: int) -> dict:
            """Add two numbers."""
            return {"total": a + b}

        self.assertEqual(add.spec.output_validator.dialect, DRAFT_07)
        [entry] = export_catalog([add.spec], "mcp")
        self.assertNotIn("$schema", entry["outputSchema"])

    def test_an_invalid_draft_07_schema_is_refused_naming_its_dialect(self):
        with self.assertRaisesRegex(ValueError, "not a valid JSON Schema draft-07 document"):
            ToolSpec(name="bad", description="Bad.",
                     input_schema={"$schema": DRAFT_07, "type": "object", "properties": {"a": {"minLength": -1}}})


class McpServerDialectTest(unittest.TestCase):
    def test_the_mcp_server_lists_converted_schemas_and_validates_in_the_original_dialect(self):
        import test_mcp_server as server_tests

        registry = Registry()
        registry.register(ToolSpec(name="book_room", description="Book a room.", input_schema=DRAFT_07_TOOL),
                          lambda arguments: {"booked": True})
        pipe = server_tests.Pipe(registry)
        try:
            pipe.initialize()
            [listed] = pipe.request("tools/list")["result"]["tools"]
            self.assertEqual(listed["inputSchema"]["$defs"], DRAFT_07_TOOL["definitions"])
            self.assertNotIn("$schema", listed["inputSchema"])
            good = pipe.request("tools/call", {"name": "book_room", "arguments": {"when": "2026-12-01"}})["result"]
            self.assertFalse(good["isError"])
            bad = pipe.request("tools/call", {"name": "book_room",
                                              "arguments": {"when": "2026-12-01", "card": "4111"}})["result"]
            self.assertTrue(bad["isError"])
            self.assertIn("invalid_arguments", bad["content"][0]["text"])
        finally:
            pipe.close()
            registry.close()


if __name__ == "__main__":
    unittest.main()
