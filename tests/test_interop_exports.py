"""Our exports checked against the hosts' own SDK types (openai, anthropic, mcp) and python-jsonschema.

Every test skips with the reason when its package is missing; `.ci/run` installs them in a throwaway
venv so CI always runs them. For the SDKs' TypedDicts we check the keys (no unknown key, every required
key present) and, when pydantic is importable, the value types with pydantic.TypeAdapter.
"""

import importlib
import json
import unittest
from pathlib import Path

from agent_lab.adapters import (
    export_catalog,
    parse_anthropic_call,
    parse_openai_call,
    parse_openai_chat_call,
    render_anthropic_result,
    render_mcp_result,
    render_openai_chat_result,
    render_openai_result,
)
from agent_lab.calls import ToolResult
from agent_lab.errors import Outcome, ToolError
from agent_lab.lab.candidate import candidate_specs
from agent_lab.spec import Effect, ToolSpec


def optional_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


openai_responses = optional_module("openai.types.responses")
openai_chat = optional_module("openai.types.chat")
anthropic_types = optional_module("anthropic.types")
mcp_types = optional_module("mcp.types")
jsonschema = optional_module("jsonschema")
pydantic = optional_module("pydantic")


def first_attribute(module, *names):
    for name in names:
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"{module.__name__} has none of {names}")


def catalog() -> list:
    """The lab's candidate catalog plus a dotted, long-named, destructive tool to exercise name mapping,
    a tool without arguments and a draft-07 tool (converted to 2020-12 on export)."""
    extra = ToolSpec(
        name="admin." + "purge_everything_in_the_archive_" * 3,
        description="Purge the archive.",
        input_schema={"type": "object", "properties": {"before": {"type": "string", "format": "date"}},
                      "required": ["before"], "additionalProperties": False},
        effect=Effect.DESTRUCTIVE,
    )
    no_arguments = ToolSpec(name="whoami", description="Who the caller is.", input_schema={"type": "object"})
    draft_07 = ToolSpec(
        name="book_room", description="Book a room.",
        input_schema={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                      "properties": {"when": {"$ref": "#/definitions/date"}, "room": {"type": "string"}},
                      "required": ["when"], "additionalProperties": False,
                      "definitions": {"date": {"type": "string", "format": "date"}}},
    )
    return [*candidate_specs(), extra, no_arguments, draft_07]


def reference_server_specs() -> list:
    """The official MCP reference servers' tool shapes (tests/fixtures/mcp_reference_tools.json)."""
    path = Path(__file__).resolve().parent / "fixtures" / "mcp_reference_tools.json"
    return [(ToolSpec(name=fixture["name"], description=fixture["description"], input_schema=fixture["inputSchema"],
                      output_schema=fixture.get("outputSchema")), "ok" in fixture["strict"])
            for fixture in json.loads(path.read_text(encoding="utf-8"))["tools"]]


NO_ARGUMENT_SHAPES = ({"type": "object", "properties": {}}, {"type": "object"},
                      {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {},
                       "additionalProperties": False})


def ok_result() -> ToolResult:
    return ToolResult(ok=True, outcome=Outcome.SUCCEEDED, tool="get_ticket", output={"ticket": {"id": "T-1001"}},
                      call_id="call_1")


def error_result() -> ToolResult:
    return ToolResult(ok=False, outcome=Outcome.REJECTED, tool="get_ticket", call_id="call_1",
                      error=ToolError.from_code("invalid_arguments"))


class TypedDictChecks(unittest.TestCase):
    def assert_fits_typeddict(self, value: dict, typed_dict: type) -> None:
        declared = set(typed_dict.__annotations__)  # a TypedDict's annotations include inherited keys
        self.assertLessEqual(set(value), declared, f"keys unknown to {typed_dict.__name__}")
        self.assertLessEqual(set(typed_dict.__required_keys__), set(value),
                             f"required keys of {typed_dict.__name__} missing")
        if pydantic is not None:
            pydantic.TypeAdapter(typed_dict).validate_python(value, strict=False)


@unittest.skipIf(openai_responses is None or openai_chat is None, "the openai package is not installed")
class OpenAIInteropTest(TypedDictChecks):
    def test_responses_tools_fit_function_tool_param(self):
        tool_param = first_attribute(openai_responses, "FunctionToolParam")
        for strict in (False, True):
            for tool in export_catalog(catalog(), "openai", strict=strict):
                with self.subTest(tool=tool["name"], strict=strict):
                    self.assert_fits_typeddict(tool, tool_param)
                    self.assertRegex(tool["name"], r"^[A-Za-z0-9_-]{1,64}$")

    def test_chat_tools_fit_the_chat_completion_tool_param(self):
        tool_param = first_attribute(openai_chat, "ChatCompletionFunctionToolParam", "ChatCompletionToolParam")
        function_definition = importlib.import_module("openai.types.shared_params").FunctionDefinition
        for strict in (False, True):
            for tool in export_catalog(catalog(), "openai-chat", strict=strict):
                with self.subTest(tool=tool["function"]["name"], strict=strict):
                    self.assert_fits_typeddict(tool, tool_param)
                    self.assert_fits_typeddict(tool["function"], function_definition)

    def test_a_tool_without_arguments_exports_as_the_strict_object_the_sdk_itself_builds(self):
        expected = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
        strict_json_schema = getattr(optional_module("openai.lib._pydantic"), "to_strict_json_schema", None)
        if strict_json_schema is not None and pydantic is not None:  # the SDK's own strict form of a model without fields
            sdk_schema = strict_json_schema(pydantic.create_model("NoArguments"))
            sdk_schema.pop("title", None)
            self.assertEqual(sdk_schema, expected)
        tool_param = first_attribute(openai_responses, "FunctionToolParam")
        chat_param = first_attribute(openai_chat, "ChatCompletionFunctionToolParam", "ChatCompletionToolParam")
        function_definition = importlib.import_module("openai.types.shared_params").FunctionDefinition
        for shape in NO_ARGUMENT_SHAPES:
            spec = ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
            with self.subTest(shape=shape):
                [responses] = export_catalog([spec], "openai", strict=True)
                self.assert_fits_typeddict(responses, tool_param)
                self.assertEqual((responses["parameters"], responses["strict"]), (expected, True))
                [chat] = export_catalog([spec], "openai-chat", strict=True)
                self.assert_fits_typeddict(chat, chat_param)
                self.assert_fits_typeddict(chat["function"], function_definition)
                self.assertEqual((chat["function"]["parameters"], chat["function"]["strict"]), (expected, True))

    def test_reference_server_tools_fit_the_sdk_types_strict_where_they_can_be(self):
        tool_param = first_attribute(openai_responses, "FunctionToolParam")
        for spec, strict_ok in reference_server_specs():
            for strict in (False, True) if strict_ok else (False,):
                with self.subTest(tool=spec.name, strict=strict):
                    [entry] = export_catalog([spec], "openai", strict=strict)
                    self.assert_fits_typeddict(entry, tool_param)
                    self.assertNotIn("$schema", entry["parameters"])

    def test_sdk_function_call_objects_parse_and_our_outputs_fit_the_input_items(self):
        call_model = first_attribute(openai_responses, "ResponseFunctionToolCall")
        item = call_model(type="function_call", name="get_ticket", arguments='{"ticket_id": "T-1001"}',
                          call_id="call_1", id="fc_1")
        call = parse_openai_call(item)
        self.assertEqual((call.name, call.arguments, call.call_id), ("get_ticket", {"ticket_id": "T-1001"}, "call_1"))
        output_param = importlib.import_module("openai.types.responses.response_input_item_param").FunctionCallOutput
        for result in (ok_result(), error_result()):
            self.assert_fits_typeddict(render_openai_result(result), output_param)

    def test_sdk_chat_tool_calls_parse_and_tool_messages_fit(self):
        call_model = first_attribute(openai_chat, "ChatCompletionMessageFunctionToolCall", "ChatCompletionMessageToolCall")
        tool_call = call_model.model_validate({"id": "call_2", "type": "function",
                                               "function": {"name": "get_ticket", "arguments": "{oops"}})
        call = parse_openai_chat_call(tool_call)
        self.assertEqual((call.name, call.call_id), ("get_ticket", "call_2"))
        self.assertNotIsInstance(call.arguments, dict)
        message_param = first_attribute(openai_chat, "ChatCompletionToolMessageParam")
        self.assert_fits_typeddict(render_openai_chat_result(ok_result()), message_param)


@unittest.skipIf(anthropic_types is None, "the anthropic package is not installed")
class AnthropicInteropTest(TypedDictChecks):
    def test_tools_fit_tool_param(self):
        for tool in export_catalog(catalog(), "anthropic"):
            with self.subTest(tool=tool["name"]):
                self.assert_fits_typeddict(tool, anthropic_types.ToolParam)
                self.assertRegex(tool["name"], r"^[a-zA-Z0-9_-]{1,64}$")

    def test_reference_server_tools_and_a_tool_without_arguments_fit_tool_param(self):
        specs = [spec for spec, _strict_ok in reference_server_specs()]
        specs += [ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
                  for shape in NO_ARGUMENT_SHAPES[:1]]
        for entry in export_catalog(specs, "anthropic"):
            with self.subTest(tool=entry["name"]):
                self.assert_fits_typeddict(entry, anthropic_types.ToolParam)
                self.assertEqual(entry["input_schema"]["type"], "object")
                self.assertIn("properties", entry["input_schema"])

    def test_sdk_tool_use_blocks_parse_and_tool_results_fit(self):
        block = anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="get_ticket",
                                             input={"ticket_id": "T-1001"})
        call = parse_anthropic_call(block)
        self.assertEqual((call.name, call.arguments, call.call_id), ("get_ticket", {"ticket_id": "T-1001"}, "toolu_1"))
        for result in (ok_result(), error_result()):
            self.assert_fits_typeddict(render_anthropic_result(result), anthropic_types.ToolResultBlockParam)


@unittest.skipIf(mcp_types is None, "the mcp package is not installed")
class MCPInteropTest(unittest.TestCase):
    def test_tools_validate_as_mcp_tool_and_lose_nothing(self):
        for tool in export_catalog(catalog(), "mcp"):
            with self.subTest(tool=tool["name"]):
                model = mcp_types.Tool.model_validate(tool)
                self.assertEqual(model.model_dump(by_alias=True, exclude_none=True, mode="json"), tool)

    def test_reference_server_tools_validate_as_mcp_tool(self):
        specs = [spec for spec, _strict_ok in reference_server_specs()]
        specs += [ToolSpec(name="whoami", description="Who the caller is.", input_schema=shape)
                  for shape in NO_ARGUMENT_SHAPES]
        for tool in export_catalog(specs, "mcp"):
            with self.subTest(tool=tool["name"]):
                model = mcp_types.Tool.model_validate(tool)
                self.assertEqual(model.model_dump(by_alias=True, exclude_none=True, mode="json"), tool)

    def test_results_validate_as_call_tool_result(self):
        for result in (ok_result(), error_result()):
            rendered = render_mcp_result(result)
            model = mcp_types.CallToolResult.model_validate(rendered)
            self.assertEqual(model.is_error if hasattr(model, "is_error") else model.isError, not result.ok)
            shown = rendered["structuredContent"] if result.ok else result.to_model()
            self.assertEqual(json.loads(model.content[0].text), shown)


@unittest.skipIf(jsonschema is None, "python-jsonschema is not installed")
class JsonSchemaInteropTest(unittest.TestCase):
    def test_reference_server_schemas_export_as_valid_draft_2020_12(self):
        specs = [spec for spec, _strict_ok in reference_server_specs()]
        strict_specs = [spec for spec, strict_ok in reference_server_specs() if strict_ok]
        for fmt, strict, chosen in (("openai", False, specs), ("openai", True, strict_specs),
                                    ("anthropic", False, specs), ("mcp", False, specs)):
            for tool in export_catalog(chosen, fmt, strict=strict):
                for schema in filter(None, [tool.get("parameters"), tool.get("input_schema"), tool.get("inputSchema"),
                                            tool.get("outputSchema")]):
                    with self.subTest(fmt=fmt, strict=strict, tool=tool["name"]):
                        jsonschema.Draft202012Validator.check_schema(schema)

    def test_every_exported_schema_is_valid_draft_2020_12(self):
        for fmt, strict in (("openai", False), ("openai", True), ("anthropic", False), ("mcp", False)):
            for tool in export_catalog(catalog(), fmt, strict=strict):
                schemas = [tool.get("parameters"), tool.get("input_schema"), tool.get("inputSchema"),
                           tool.get("outputSchema")]
                for schema in filter(None, schemas):
                    with self.subTest(fmt=fmt, strict=strict, tool=tool["name"]):
                        jsonschema.Draft202012Validator.check_schema(schema)


if __name__ == "__main__":
    unittest.main()
