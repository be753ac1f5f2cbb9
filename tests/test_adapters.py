"""Host exports: each host's tool shape, strict conversion, name mapping, call parsing and result rendering."""

import contextlib
import copy
import io
import json
import unittest
from unittest import mock

from agent_lab.adapters import (
    HOST_NAME_PATTERN,
    HostBridge,
    InvalidJSONArguments,
    NameMap,
    StrictSchemaError,
    anthropic_tool,
    export_catalog,
    mcp_annotations,
    mcp_tool,
    openai_chat_tool,
    openai_tool,
    parse_anthropic_call,
    parse_mcp_call,
    parse_openai_call,
    parse_openai_chat_call,
    render_anthropic_result,
    render_mcp_result,
    render_openai_chat_result,
    render_openai_result,
    strip_strict_nulls,
    to_strict_schema,
)
from agent_lab.adapters import _NullStripper  # counting its branch tries
from agent_lab.calls import ToolCall, ToolResult
from agent_lab.errors import Outcome, ToolError
from agent_lab.policy import Actor
from agent_lab.schema import Validator
from agent_lab.spec import ApprovalPolicy, Effect, RetryPolicy, ToolSpec

NOTE_SCHEMA = {
    "type": "object",
    "properties": {
        "ticket_id": {"type": "string", "pattern": "^T-[0-9]{4}$"},
        "note": {"type": "string", "minLength": 1, "maxLength": 500, "description": "The note."},
        "action_id": {"type": "string"},
        "visibility": {"enum": ["public", "internal"]},
        "options": {
            "type": "object",
            "properties": {"notify": {"type": "boolean"}, "cc": {"type": "array", "items": {"type": "string"}}},
            "required": ["notify"],
            "additionalProperties": False,
        },
    },
    "required": ["ticket_id", "note", "action_id"],
    "additionalProperties": False,
}


def write_spec(name: str = "tickets.add_note", **overrides) -> ToolSpec:
    options = dict(
        name=name,
        title="Add a note",
        description="Add a note to a ticket.",
        input_schema=NOTE_SCHEMA,
        output_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        required_permission="tickets:write-secret-scope",
        effect=Effect.WRITE,
        approval=ApprovalPolicy.ALWAYS,
        idempotency_key="action_id",
        retry_policy=RetryPolicy.TRANSIENT,
        timeout_ms=4321,
        max_output_bytes=12345,
        redact=("customer_email",),
    )
    options.update(overrides)
    return ToolSpec(**options)


def read_spec(name: str = "get_ticket", **overrides) -> ToolSpec:
    options = dict(
        name=name,
        description="Read a ticket.",
        input_schema={"type": "object", "properties": {"ticket_id": {"type": "string"}}, "required": ["ticket_id"],
                      "additionalProperties": False},
        required_permission="tickets:read",
    )
    options.update(overrides)
    return ToolSpec(**options)


def ok_result(output=None, call_id="call_1", redact=()) -> ToolResult:
    return ToolResult(ok=True, outcome=Outcome.SUCCEEDED, tool="get_ticket", output=output, call_id=call_id,
                      redact=frozenset(redact))


def error_result(call_id="call_1") -> ToolResult:
    return ToolResult(ok=False, outcome=Outcome.REJECTED, tool="get_ticket", call_id=call_id,
                      error=ToolError.from_code("approval_required"))


class ExportShapeTest(unittest.TestCase):
    def test_openai_responses_tool_shape(self):
        tool = openai_tool(read_spec())
        self.assertEqual(set(tool), {"type", "name", "description", "parameters", "strict"})
        self.assertEqual((tool["type"], tool["name"], tool["strict"]), ("function", "get_ticket", False))
        self.assertEqual(tool["parameters"], read_spec().input_schema)

    def test_openai_chat_tool_shape(self):
        tool = openai_chat_tool(read_spec())
        self.assertEqual(set(tool), {"type", "function"})
        self.assertEqual(set(tool["function"]), {"name", "description", "parameters"})
        strict = openai_chat_tool(read_spec(), strict=True)
        self.assertIs(strict["function"]["strict"], True)

    def test_anthropic_tool_shape(self):
        tool = anthropic_tool(read_spec())
        self.assertEqual(set(tool), {"name", "description", "input_schema"})
        self.assertEqual(tool["input_schema"], read_spec().input_schema)

    def test_mcp_tool_shape_is_camel_case_with_title_and_output_schema(self):
        tool = mcp_tool(write_spec())
        self.assertEqual(set(tool), {"name", "title", "description", "inputSchema", "outputSchema", "annotations"})
        self.assertEqual(tool["name"], "tickets.add_note")  # MCP allows dots: unchanged
        self.assertEqual(tool["title"], "Add a note")

    def test_mcp_omits_an_output_schema_that_is_not_an_object(self):
        spec = read_spec(output_schema={"type": "array", "items": {"type": "string"}})
        self.assertNotIn("outputSchema", mcp_tool(spec))

    def test_the_redacted_view_of_a_valid_output_fits_the_advertised_mcp_output_schema(self):
        from agent_lab.redaction import redact

        pin = {"type": "string", "pattern": "^[0-9]{4}$"}
        cases = [  # (output schema, an output that fits it); the tool redacts "pin"
            ({"type": "object", "properties": {"pin": pin}, "required": ["pin"]}, {"pin": "1234"}),
            ({"type": "object", "properties": {"cards": {"type": "array", "items": {"$ref": "#/$defs/card"}}},
              "$defs": {"card": {"type": "object", "properties": {"pin": {"type": "integer"}}}}},
             {"cards": [{"pin": 1234}]}),
            ({"type": "object", "additionalProperties": {"type": "integer"}}, {"pin": 1234, "n": 1}),
            ({"type": "object", "properties": {"cards": {"type": "array", "uniqueItems": True,
                                                         "items": {"type": "object", "properties": {"pin": pin}}}}},
             {"cards": [{"pin": "1111"}, {"pin": "2222"}]}),
            ({"type": "object", "properties": {"pin": {"oneOf": [pin, {"type": "integer"}]}}}, {"pin": "1234"}),
        ]
        for schema, output in cases:
            with self.subTest(schema=schema):
                spec = read_spec(output_schema=schema, redact=("pin",))
                self.assertTrue(Validator(schema).is_valid(output))
                advertised = mcp_tool(spec).get("outputSchema")
                if advertised is not None:
                    self.assertTrue(Validator(advertised).is_valid(redact(output, {"pin"})), advertised)
        self.assertIn("outputSchema", mcp_tool(read_spec(output_schema=cases[0][0], redact=("pin",))))

    def test_mcp_annotations_follow_the_runtime_contract(self):
        read = mcp_annotations(read_spec(open_world=True))
        self.assertEqual(read, {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                "openWorldHint": True})
        keyed_write = mcp_annotations(write_spec())
        self.assertEqual((keyed_write["readOnlyHint"], keyed_write["destructiveHint"], keyed_write["idempotentHint"],
                          keyed_write["openWorldHint"]), (False, False, True, False))
        self.assertEqual(keyed_write["title"], "Add a note")
        unkeyed = mcp_annotations(write_spec(effect=Effect.DESTRUCTIVE, idempotency_key=None))
        self.assertEqual((unkeyed["destructiveHint"], unkeyed["idempotentHint"]), (True, False))

    def test_no_runtime_field_appears_in_any_export(self):
        spec = write_spec()
        runtime_words = ["required_permission", "tickets:write-secret-scope", "idempotency_key", "timeout", "4321",
                         "12345", "max_output_bytes", "retry", "approval", "redact", "customer_email",
                         "resource_guard"]
        for fmt in ("openai", "openai-chat", "anthropic", "mcp"):
            for strict in ((False, True) if fmt.startswith("openai") else (False,)):
                with self.subTest(fmt=fmt, strict=strict):
                    text = json.dumps(export_catalog([spec], fmt, strict=strict))
                    for word in runtime_words:
                        self.assertNotIn(word, text)

    def test_exports_never_share_or_change_the_specs_schemas(self):
        spec = write_spec()
        before = copy.deepcopy(spec.input_schema)
        tools = export_catalog([spec], "openai", strict=True)
        tools[0]["parameters"]["properties"].clear()
        self.assertEqual(spec.input_schema, before)

    def test_export_accepts_a_registry(self):
        from agent_lab.registry import Registry

        with Registry() as registry:
            registry.register(read_spec(), lambda arguments: {})
            self.assertEqual([tool["name"] for tool in export_catalog(registry, "mcp")], ["get_ticket"])

    def test_export_for_an_actor_offers_only_the_tools_it_may_call(self):
        reader = Actor(id="u1", tenant="t1", permissions={"tickets:read"})
        tools = export_catalog([read_spec(), write_spec()], "anthropic", actor=reader)
        self.assertEqual([tool["name"] for tool in tools], ["get_ticket"])

    def test_unknown_format_and_strict_for_a_non_openai_host_are_errors(self):
        with self.assertRaises(ValueError):
            export_catalog([read_spec()], "gemini")
        with self.assertRaises(ValueError):
            export_catalog([read_spec()], "mcp", strict=True)


class StrictSchemaTest(unittest.TestCase):
    def test_every_object_is_closed_and_every_property_required(self):
        strict = to_strict_schema(NOTE_SCHEMA)
        self.assertEqual(strict["required"], list(NOTE_SCHEMA["properties"]))
        options = strict["properties"]["options"]
        self.assertEqual(options["required"], ["notify", "cc"])
        self.assertIs(options["additionalProperties"], False)

    def test_optional_properties_become_nullable(self):
        strict = to_strict_schema(NOTE_SCHEMA)
        self.assertEqual(strict["properties"]["visibility"]["enum"], ["public", "internal", None])
        self.assertEqual(strict["properties"]["options"]["type"], ["object", "null"])
        self.assertEqual(strict["properties"]["options"]["properties"]["cc"]["type"], ["array", "null"])
        self.assertEqual(strict["properties"]["ticket_id"]["type"], "string")  # required: unchanged

    def test_a_nullable_type_with_an_enum_without_null_gets_null_once(self):
        schema = {"type": "object", "properties": {"s": {"type": ["string", "null"], "enum": ["a", "b"]}}}
        strict = to_strict_schema(schema)["properties"]["s"]
        self.assertEqual(strict, {"type": ["string", "null"], "enum": ["a", "b", None]})
        Validator(to_strict_schema(schema))

    def test_required_names_that_are_not_properties_cannot_be_strict(self):
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]})
        self.assertEqual(caught.exception.path, "/required")

    def test_an_open_object_is_closed(self):
        strict = to_strict_schema({"type": "object", "properties": {"a": {"type": "string"}}})
        self.assertIs(strict["additionalProperties"], False)

    def test_string_lengths_move_into_the_description(self):
        note = to_strict_schema(NOTE_SCHEMA)["properties"]["note"]
        self.assertNotIn("minLength", note)
        self.assertNotIn("maxLength", note)
        self.assertEqual(note["description"], "The note. Length: 1 to 500 characters.")

    def test_conversion_never_mutates_its_input(self):
        before = copy.deepcopy(NOTE_SCHEMA)
        to_strict_schema(NOTE_SCHEMA)
        self.assertEqual(NOTE_SCHEMA, before)

    def test_the_strict_schema_is_still_valid_2020_12(self):
        Validator(to_strict_schema(NOTE_SCHEMA))

    def test_unsupported_keywords_are_refused_with_their_path(self):
        cases = {
            "/properties/tags/patternProperties": {"type": "object", "properties": {"tags": {
                "type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {}}}}},
            "/properties/a/oneOf": {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}},
            "/properties/a/anyOf/1/if": {"type": "object", "properties": {"a": {"anyOf": [
                {"type": "string"}, {"type": "integer", "if": {"minimum": 1}}]}}},
            "/unevaluatedProperties": {"type": "object", "properties": {"a": {"type": "string"}},
                                       "unevaluatedProperties": False},
            "/properties/a/dependentRequired": {"type": "object", "properties": {"a": {
                "type": "object", "properties": {"b": {"type": "string"}}, "dependentRequired": {"b": []}}}},
            "/properties/a/format": {"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}},
            "/properties/a/items/uniqueItems": {"type": "object", "properties": {"a": {
                "type": "array", "items": {"type": "string", "uniqueItems": True}}}},
        }
        for path, schema in cases.items():
            with self.subTest(path=path):
                with self.assertRaises(StrictSchemaError) as caught:
                    to_strict_schema(schema)
                self.assertEqual(caught.exception.path, path)
                self.assertEqual(caught.exception.keyword, path.rsplit("/", 1)[1])
                self.assertIn(path, str(caught.exception))

    def test_an_object_with_additional_properties_other_than_false_cannot_be_strict(self):
        for additional in (True, {"type": "string"}):
            schema = {"type": "object", "properties": {"m": {"type": "object", "properties": {"a": {"type": "string"}},
                                                               "additionalProperties": additional}}}
            with self.subTest(additional=additional):
                with self.assertRaises(StrictSchemaError) as caught:
                    to_strict_schema(schema)
                self.assertEqual(caught.exception.path, "/properties/m/additionalProperties")

    def test_a_free_form_object_or_an_untyped_value_cannot_be_strict(self):
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema({"type": "object", "properties": {"m": {"type": "object"}}})
        self.assertEqual(caught.exception.path, "/properties/m")
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema({"type": "object", "properties": {"any": {}}})
        self.assertEqual(caught.exception.path, "/properties/any")

    def test_a_reference_with_annotations_beside_it_keeps_them_without_a_keyword_next_to_ref(self):
        # OpenAI refuses "$ref cannot have keywords {'description'}"; an anyOf of one reference means the same.
        schema = {
            "type": "object",
            "$defs": {"Contact": {"type": "object", "properties": {"email": {"type": "string"}},
                                  "required": ["email"]}},
            "properties": {
                "to": {"$ref": "#/$defs/Contact", "description": "Who gets it."},
                "cc": {"$ref": "#/$defs/Contact", "title": "Copy", "description": "Optional copy."},
            },
            "required": ["to"],
        }
        strict = to_strict_schema(schema)

        def refs_with_siblings(node):
            if isinstance(node, dict):
                if "$ref" in node and len(node) > 1:
                    yield node
                for value in node.values():
                    yield from refs_with_siblings(value)
            elif isinstance(node, list):
                for value in node:
                    yield from refs_with_siblings(value)

        self.assertEqual(list(refs_with_siblings(strict)), [])
        self.assertEqual(strict["properties"]["to"],
                         {"anyOf": [{"$ref": "#/$defs/Contact"}], "description": "Who gets it."})
        self.assertEqual(strict["properties"]["cc"]["anyOf"], [{"$ref": "#/$defs/Contact"}, {"type": "null"}])
        self.assertEqual(strict["properties"]["cc"]["description"], "Optional copy.")
        validator = Validator(strict)
        self.assertTrue(validator.is_valid({"to": {"email": "a@b"}, "cc": None}))
        self.assertFalse(validator.is_valid({"to": {"email": 1}, "cc": None}))

    def test_a_reference_with_constraints_beside_it_cannot_be_strict(self):
        schema = {"type": "object", "$defs": {"S": {"type": "string"}},
                  "properties": {"a": {"$ref": "#/$defs/S", "pattern": "^x"}}, "required": ["a"]}
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema(schema)
        self.assertEqual(caught.exception.path, "/properties/a/$ref")

    def test_the_root_must_be_an_object(self):
        with self.assertRaises(StrictSchemaError) as caught:
            to_strict_schema({"anyOf": [{"type": "object"}]})
        self.assertEqual(caught.exception.path, "")

    def test_a_strict_export_names_the_tool_in_its_error(self):
        spec = read_spec(input_schema={"type": "object", "properties": {"a": {"not": {"type": "string"}}}})
        with self.assertRaises(StrictSchemaError) as caught:
            export_catalog([spec], "openai", strict=True)
        self.assertIn("get_ticket", str(caught.exception))
        self.assertEqual(caught.exception.path, "/properties/a/not")

    def test_the_candidate_catalog_exports_strictly(self):
        from agent_lab.lab.candidate import candidate_specs

        specs = candidate_specs()
        for fmt in ("openai", "openai-chat"):
            tools = export_catalog(specs, fmt, strict=True)
            self.assertEqual(len(tools), len(specs))
            for tool in tools:
                parameters = tool["parameters"] if fmt == "openai" else tool["function"]["parameters"]
                Validator(parameters)
                self.assertEqual(set(parameters["required"]), set(parameters["properties"]))


class StripStrictNullsTest(unittest.TestCase):
    def test_null_for_an_optional_property_means_absent_and_the_original_schema_accepts_the_result(self):
        arguments = {"ticket_id": "T-1001", "note": "hi", "action_id": "a1", "visibility": None,
                     "options": {"notify": True, "cc": None}}
        strict_validator = Validator(to_strict_schema(NOTE_SCHEMA))
        self.assertTrue(strict_validator.is_valid(arguments))
        self.assertFalse(Validator(NOTE_SCHEMA).is_valid(arguments))
        stripped = strip_strict_nulls(arguments, NOTE_SCHEMA)
        self.assertEqual(stripped, {"ticket_id": "T-1001", "note": "hi", "action_id": "a1",
                                    "options": {"notify": True}})
        self.assertTrue(Validator(NOTE_SCHEMA).is_valid(stripped))
        self.assertIsNone(arguments["visibility"])  # not mutated

    def test_null_is_kept_where_the_original_schema_accepts_null(self):
        schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
        self.assertEqual(strip_strict_nulls({"a": None}, schema), {"a": None})

    def test_null_for_a_required_property_is_kept_for_the_registry_to_reject(self):
        self.assertEqual(strip_strict_nulls({"ticket_id": None}, NOTE_SCHEMA), {"ticket_id": None})

    def test_nulls_inside_arrays_and_references_are_stripped(self):
        schema = {
            "type": "object",
            "$defs": {"item": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
                               "required": ["k"]}},
            "properties": {"list": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
        }
        self.assertEqual(strip_strict_nulls({"list": [{"k": "a", "v": None}]}, schema), {"list": [{"k": "a"}]})

    def test_references_are_read_as_the_validator_reads_them_percent_escapes_and_empty_names_too(self):
        note = {"type": "object", "properties": {"text": {"type": "string"}, "tag": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}
        for name, reference in (("", "#/$defs/"), ("a b", "#/$defs/a%20b"), ("a/b", "#/$defs/a~1b")):
            with self.subTest(reference=reference):
                schema = {"type": "object", "$defs": {name: note}, "properties": {"note": {"$ref": reference}},
                          "required": ["note"], "additionalProperties": False}
                stripped = strip_strict_nulls({"note": {"text": "x", "tag": None}}, schema)
                self.assertEqual(stripped, {"note": {"text": "x"}})
                self.assertTrue(Validator(schema).is_valid(stripped))  # the registry's reading of the same $ref

    def test_a_plain_name_anchor_is_never_read_as_a_member_of_the_root(self):
        # "#x" names the anchor (an object of any members), not the root's unknown keyword "x", whose
        # schema would have the note's null tag dropped
        schema = {"type": "object", "properties": {"note": {"$ref": "#x"}},
                  "x": {"type": "object", "properties": {"tag": {"type": "string"}}},
                  "$defs": {"any": {"$anchor": "x", "type": "object"}}}
        self.assertEqual(strip_strict_nulls({"note": {"tag": None}}, schema), {"note": {"tag": None}})
        self.assertTrue(Validator(schema).is_valid({"note": {"tag": None}}))

    def test_an_object_in_an_any_of_is_stripped_by_the_branch_whose_properties_it_names_exactly(self):
        # Strict mode sends every property of the branch the model chose, so the key set names the branch.
        schema = {"type": "object", "properties": {"target": {"anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
             "required": ["name"]},
            {"type": "object", "properties": {"id": {"type": ["string", "null"]}}, "required": ["id"]},
        ]}}, "required": ["target"]}
        arguments = {"target": {"id": None}}
        self.assertTrue(Validator(to_strict_schema(schema)).is_valid(arguments))
        stripped = strip_strict_nulls(arguments, schema)
        self.assertEqual(stripped, arguments)
        self.assertTrue(Validator(schema).is_valid(stripped))

    def test_branches_with_the_same_keys_are_told_apart_by_what_the_original_branch_accepts(self):
        schema = {"type": "object", "properties": {"at": {"anyOf": [
            {"type": "object", "properties": {"spot": {"type": "number"}}, "required": ["spot"]},
            {"type": "object", "properties": {"spot": {"type": "object", "properties": {
                "x": {"type": "integer"}, "label": {"type": "string"}}, "additionalProperties": False}}},
        ]}, "path": {"anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        ]}}, "required": ["at", "path"]}
        arguments = {"at": {"spot": {"x": None, "label": None}}, "path": [{"x": None}]}
        self.assertTrue(Validator(to_strict_schema(schema)).is_valid(arguments))
        stripped = strip_strict_nulls(arguments, schema)
        self.assertEqual(stripped, {"at": {"spot": {}}, "path": [{}]})
        self.assertTrue(Validator(schema).is_valid(stripped))

    def test_nested_any_of_and_referenced_branches_are_searched_for_the_object_branch(self):
        schema = {
            "type": "object",
            "$defs": {"Box": {"type": "object", "properties": {"size": {"type": "integer"}, "tag": {"type": "string"}},
                              "required": ["size"]}},
            "properties": {"x": {"anyOf": [{"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Box"}]}]}},
            "required": ["x"],
        }
        arguments = {"x": {"size": 1, "tag": None}}
        self.assertTrue(Validator(to_strict_schema(schema)).is_valid(arguments))
        stripped = strip_strict_nulls(arguments, schema)
        self.assertEqual(stripped, {"x": {"size": 1}})
        self.assertTrue(Validator(schema).is_valid(stripped))

    def test_a_deep_tree_of_branches_sharing_a_subschema_strips_each_part_once(self):
        # A tree node of two object branches naming the same properties (its child "a" a recursive $ref):
        # the first, tried first, is refused only once its whole subtree has been stripped. Stripping each
        # subtree again for every branch tried above it took 2**depth tries: 311 characters of strict-valid
        # arguments kept the adapter 94 s before the call reached the registry (6,142 tries here).
        node = {"anyOf": [
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}, "w": {"type": "string"}},
             "required": ["a"], "additionalProperties": False},
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}, "w": {"type": "integer"}},
             "required": ["a"], "additionalProperties": False},
            {"type": "integer"}]}
        schema = {"type": "object", "properties": {"t": {"$ref": "#/$defs/node"}}, "required": ["t"],
                  "additionalProperties": False, "$defs": {"node": node}}
        depth = 12
        arguments: dict = {"a": 1, "w": None}  # the one null, "w left out", deepest down
        for _ in range(depth - 1):
            arguments = {"a": arguments, "w": 7}
        arguments = {"t": arguments}
        self.assertTrue(Validator(to_strict_schema(schema)).is_valid(arguments))
        tries = []
        accepts = _NullStripper.accepts
        with mock.patch.object(_NullStripper, "accepts", lambda self, *a: tries.append(a) or accepts(self, *a)):
            stripped = strip_strict_nulls(arguments, schema)
        self.assertTrue(Validator(schema).is_valid(stripped))
        self.assertNotIn("null", json.dumps(stripped))
        self.assertLessEqual(len(tries), 2 * depth)  # each level's two branches, once

    def test_each_part_is_stripped_as_itself_though_its_items_are_made_as_they_are_read(self):
        # Arguments that are not decoded JSON: a list that makes its items anew each time it is read. The
        # memo of stripped parts, keyed by id, let the second list's item (freed the first's id) be
        # answered with the first's stripped copy: "b" came back as "a"'s value.
        item = {"type": "object", "properties": {"v": {"type": "string"}, "w": {"type": "string"}}}
        schema = {"type": "object", "properties": {"a": {"type": "array", "items": item},
                                                   "b": {"$ref": "#/properties/a"}}}

        class MadeWhenRead(list):
            def __init__(self, make):
                super().__init__([0])
                self.make = make

            def __iter__(self):
                yield self.make()

        arguments = {"a": MadeWhenRead(lambda: {"v": "first"}),
                     "b": MadeWhenRead(lambda: {"v": None, "w": "second"})}
        self.assertEqual(strip_strict_nulls(arguments, schema), {"a": [{"v": "first"}], "b": [{"w": "second"}]})

    def test_the_candidate_accepts_the_same_calls_strictly_once_nulls_are_stripped(self):
        from agent_lab.lab.candidate import candidate_specs

        [spec] = [spec for spec in candidate_specs() if spec.name == "list_tickets"]
        original = Validator(spec.input_schema)
        strict = Validator(to_strict_schema(spec.input_schema))
        for arguments in ({}, {"status": "open"}, {"page_size": 3, "cursor": "abc"}):
            with self.subTest(arguments=arguments):
                as_sent = {name: arguments.get(name) for name in spec.input_schema["properties"]}
                self.assertTrue(strict.is_valid(as_sent))
                if arguments != as_sent:
                    self.assertFalse(strict.is_valid(arguments))  # strict mode wants every key, null or not
                self.assertEqual(strip_strict_nulls(as_sent, spec.input_schema), arguments)
                self.assertTrue(original.is_valid(strip_strict_nulls(as_sent, spec.input_schema)))


class StrictRoundTripPropertyTest(unittest.TestCase):
    """Seeded random schemas in the strict subset: whatever strict mode accepts strips to arguments the
    original schema accepts."""

    def random_schema(self, rng, depth, defs):
        roll = rng.random() if depth < 3 else rng.random() * 0.5
        if roll < 0.15:
            return {"type": rng.choice(["string", "integer", "number", "boolean"])}
        if roll < 0.2:
            return {"type": ["string", "null"]}
        if roll < 0.27:
            return {"enum": rng.sample(["a", "b", 1, None, True], rng.randint(1, 3))}
        if roll < 0.35 and defs:
            reference = {"$ref": "#/$defs/" + rng.choice(sorted(defs))}
            return {**reference, "description": "A reference."} if rng.random() < 0.5 else reference
        if roll < 0.45:
            return {"type": "array", "items": self.random_schema(rng, depth + 1, defs)}
        if roll < 0.6:
            return {"anyOf": [self.random_schema(rng, depth + 1, defs) for _ in range(rng.randint(1, 3))]}
        return self.random_object(rng, depth, defs)

    def random_object(self, rng, depth, defs):
        properties = {f"p{index}": self.random_schema(rng, depth + 1, defs) for index in range(rng.randint(1, 3))}
        schema = {"type": rng.choice(["object", ["object", "null"]]), "properties": properties}
        required = [name for name in properties if rng.random() < 0.5]
        if required:
            schema["required"] = required
        return schema

    def sample(self, rng, schema, root):
        while "$ref" in schema:
            schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
        if "anyOf" in schema:
            return self.sample(rng, rng.choice(schema["anyOf"]), root)
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema["type"] if isinstance(schema["type"], str) else rng.choice(schema["type"])
        if kind == "array":
            return [self.sample(rng, schema["items"], root) for _ in range(rng.randint(0, 2))]
        if kind == "object":
            return {name: self.sample(rng, sub, root) for name, sub in schema["properties"].items()}
        return {"null": None, "string": "s", "integer": 1, "number": 0.5, "boolean": True}[kind]

    def test_strict_valid_arguments_strip_to_arguments_the_original_schema_accepts(self):
        import random

        rng = random.Random(20261129)
        for trial in range(150):
            defs = {"Item": self.random_object(rng, 2, {})} if rng.random() < 0.5 else {}
            schema = self.random_object(rng, 0, defs)
            if defs:
                schema["$defs"] = defs
            strict = to_strict_schema(schema)
            strict_validator, original_validator = Validator(strict), Validator(schema)
            for _ in range(10):
                arguments = self.sample(rng, strict, strict)
                if strict_validator.is_valid(arguments):
                    with self.subTest(trial=trial, arguments=arguments):
                        self.assertTrue(original_validator.is_valid(strip_strict_nulls(arguments, schema)))


class NameMapTest(unittest.TestCase):
    def test_legal_names_map_to_themselves(self):
        names = NameMap(["get_ticket", "list-tickets"])
        self.assertEqual(names.to_host("get_ticket"), "get_ticket")
        self.assertEqual(names.from_host("list-tickets"), "list-tickets")

    def test_dotted_names_round_trip_and_are_host_legal(self):
        names = NameMap(["tickets.get", "tickets.notes.add"])
        for name in ("tickets.get", "tickets.notes.add"):
            host = names.to_host(name)
            self.assertRegex(host, HOST_NAME_PATTERN)
            self.assertNotIn(".", host)
            self.assertEqual(names.from_host(host), name)
        self.assertEqual(names.to_host("tickets.get"), "tickets__get")

    def test_a_dotted_name_never_collides_with_an_existing_double_underscore_name(self):
        names = NameMap(["a.b", "a__b"])
        self.assertEqual(names.to_host("a__b"), "a__b")
        self.assertNotEqual(names.to_host("a.b"), "a__b")
        self.assertEqual(names.from_host(names.to_host("a.b")), "a.b")
        self.assertEqual(names.from_host("a__b"), "a__b")

    def test_long_names_get_a_short_hashed_name_that_round_trips(self):
        long_a = "x" * 100 + ".a"
        long_b = "x" * 100 + ".b"
        names = NameMap([long_a, long_b, "y" * 128])
        hosts = {names.to_host(name) for name in (long_a, long_b, "y" * 128)}
        self.assertEqual(len(hosts), 3)
        for name in (long_a, long_b, "y" * 128):
            host = names.to_host(name)
            self.assertRegex(host, HOST_NAME_PATTERN)
            self.assertLessEqual(len(host), 64)
            self.assertEqual(names.from_host(host), name)

    def test_the_mapping_does_not_depend_on_catalog_order(self):
        catalog = ["a.b", "a__b", "c." + "z" * 90, "plain"]
        self.assertEqual(NameMap(catalog).items(), NameMap(list(reversed(catalog))).items())

    def test_an_unknown_host_name_comes_back_unchanged_for_the_registry_to_refuse(self):
        self.assertEqual(NameMap(["a.b"]).from_host("nope"), "nope")

    def test_exports_use_mapped_names_and_parsers_map_them_back(self):
        spec = write_spec()
        bridge = HostBridge([spec], "openai")
        tool = bridge.tools()[0]
        self.assertEqual(tool["name"], "tickets__add_note")
        call = bridge.parse_call({"type": "function_call", "name": "tickets__add_note", "arguments": "{}",
                                  "call_id": "c1"})
        self.assertEqual(call.name, "tickets.add_note")
        self.assertEqual(anthropic_tool(spec, names=bridge.names)["name"], "tickets__add_note")


class ParseCallTest(unittest.TestCase):
    def test_openai_responses_function_call(self):
        call = parse_openai_call({"type": "function_call", "name": "get_ticket",
                                  "arguments": '{"ticket_id": "T-1001"}', "call_id": "call_9"})
        self.assertEqual(call, ToolCall("get_ticket", {"ticket_id": "T-1001"}, "call_9"))

    def test_openai_chat_tool_call(self):
        call = parse_openai_chat_call({"id": "call_3", "type": "function",
                                       "function": {"name": "get_ticket", "arguments": '{"ticket_id": "T-1"}'}})
        self.assertEqual(call, ToolCall("get_ticket", {"ticket_id": "T-1"}, "call_3"))

    def test_anthropic_tool_use_block(self):
        call = parse_anthropic_call({"type": "tool_use", "id": "toolu_1", "name": "get_ticket",
                                     "input": {"ticket_id": "T-1"}})
        self.assertEqual(call, ToolCall("get_ticket", {"ticket_id": "T-1"}, "toolu_1"))

    def test_mcp_tools_call_params(self):
        self.assertEqual(parse_mcp_call({"name": "a.b", "arguments": {"x": 1}}), ToolCall("a.b", {"x": 1}))
        self.assertEqual(parse_mcp_call({"name": "a.b"}).arguments, {})

    def test_sdk_objects_are_read_like_dicts(self):
        class Item:
            type = "function_call"
            name = "get_ticket"
            arguments = '{"ticket_id": "T-1"}'
            call_id = "c"

        self.assertEqual(parse_openai_call(Item()), ToolCall("get_ticket", {"ticket_id": "T-1"}, "c"))

    def test_malformed_openai_arguments_never_raise(self):
        for arguments in ('{"ticket_id": ', "not json", None, 42, '{"a": NaN}', '{"a": 1, "a": 2}',
                          '{"a": 1e400}', '{"a": -1e400}', "[" * 100_000, "{" + " " * 2_000_000 + "}"):
            with self.subTest(arguments=str(arguments)[:20]):
                call = parse_openai_call({"type": "function_call", "name": "get_ticket", "arguments": arguments,
                                          "call_id": "c"})
                self.assertIsInstance(call.arguments, InvalidJSONArguments)
                chat = parse_openai_chat_call({"id": "c", "function": {"name": "get_ticket", "arguments": arguments}})
                self.assertIsInstance(chat.arguments, InvalidJSONArguments)

    def test_the_parse_error_never_repeats_the_argument_text(self):
        call = parse_openai_call({"name": "get_ticket", "arguments": '{"password": "hunter2"', "call_id": "c"})
        self.assertNotIn("hunter2", call.arguments.reason)
        self.assertNotIn("hunter2", repr(call))

    def test_garbage_payloads_never_raise(self):
        for payload in (None, 42, "text", [], {}, {"function": None}, {"name": 5, "input": "x"}):
            with self.subTest(payload=payload):
                self.assertIsInstance(parse_openai_call(payload), ToolCall)
                self.assertIsInstance(parse_openai_chat_call(payload), ToolCall)
                self.assertIsInstance(parse_anthropic_call(payload), ToolCall)
                self.assertIsInstance(parse_mcp_call(payload), ToolCall)

    def test_a_payload_whose_fields_cannot_be_read_never_raises(self):
        class Unreadable:
            """An SDK-like object whose attribute access fails (a lazy or broken model)."""

            def __getattr__(self, name):
                raise RuntimeError("cannot load " + name)

        class UnreadableMapping(dict):
            def get(self, key, default=None):
                raise RuntimeError("cannot load " + key)

        for payload in (Unreadable(), UnreadableMapping(name="x")):
            for parse in (parse_openai_call, parse_openai_chat_call, parse_anthropic_call, parse_mcp_call):
                with self.subTest(payload=type(payload).__name__, parse=parse.__name__):
                    call = parse(payload)
                    self.assertIsInstance(call, ToolCall)
                    self.assertEqual(call.name, "")

    def test_malformed_arguments_end_as_invalid_arguments_through_the_registry(self):
        from agent_lab.registry import Registry

        actor = Actor(id="u1", tenant="t1", permissions={"tickets:read"})
        ran = []
        with Registry() as registry:
            registry.register(read_spec(), lambda arguments: ran.append(arguments) or {})
            for arguments in ('{"ticket_id": ', '{"ticket_id": NaN}', "[]", '"T-1"'):
                with self.subTest(arguments=arguments):
                    call = parse_openai_call({"name": "get_ticket", "arguments": arguments, "call_id": "c"})
                    result = registry.invoke(call, actor=actor)
                    self.assertFalse(result.ok)
                    self.assertEqual(result.error.code, "invalid_arguments")
                    self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertEqual(ran, [])

    def test_empty_arguments_are_no_arguments_and_the_schema_judges_them(self):
        from agent_lab.registry import Registry

        actor = Actor(id="u1", tenant="t1", permissions={"tickets:read"})
        ping = read_spec(name="ping", input_schema={"type": "object", "properties": {}, "additionalProperties": False})
        with Registry() as registry:
            registry.register(ping, lambda arguments: {"pong": arguments})
            registry.register(read_spec(), lambda arguments: {})
            for text in ("", "  \n"):
                with self.subTest(text=text):
                    call = parse_openai_call({"name": "ping", "arguments": text, "call_id": "c"})
                    self.assertEqual(call.arguments, {})
                    self.assertEqual(registry.invoke(call, actor=actor).output, {"pong": {}})
            needs_one = registry.invoke(parse_openai_call({"name": "get_ticket", "arguments": "", "call_id": "c"}),
                                        actor=actor)
        self.assertEqual(needs_one.error.details["violations"][0]["keyword"], "required")  # not "not JSON"

    def test_the_not_valid_json_message_says_so_once(self):
        from agent_lab.registry import Registry

        with Registry() as registry:
            registry.register(read_spec(), lambda arguments: {})
            result = registry.invoke(parse_openai_call({"name": "get_ticket", "arguments": "{", "call_id": "c"}),
                                     actor=Actor(id="u1", tenant="t1", permissions={"tickets:read"}))
        self.assertEqual(result.error.message.lower().count("not valid json"), 1, result.error.message)
        self.assertTrue(result.error.message.startswith("The arguments are not valid JSON: "), result.error.message)

    def test_unreadable_arguments_tell_the_model_why_without_echoing_the_text(self):
        from agent_lab.registry import Registry

        actor = Actor(id="u1", tenant="t1", permissions={"tickets:read"})
        with Registry() as registry:
            registry.register(read_spec(), lambda arguments: {})
            call = parse_openai_call({"name": "get_ticket", "arguments": '{"ticket_id": "sk-secret', "call_id": "c"})
            result = registry.invoke(call, actor=actor)
        self.assertEqual(result.error.code, "invalid_arguments")
        self.assertTrue(result.error.message.startswith("The arguments are not valid JSON"), result.error.message)
        self.assertNotIn("sk-secret", json.dumps(result.to_model()))

    def test_a_strict_bridge_turns_null_back_into_absent_before_the_registry_validates(self):
        from agent_lab.registry import Registry

        actor = Actor(id="u1", tenant="t1", permissions={"tickets:read"})
        spec = read_spec(input_schema={"type": "object", "properties": {
            "ticket_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["ticket_id"], "additionalProperties": False})
        seen = []
        with Registry() as registry:
            registry.register(spec, lambda arguments: seen.append(dict(arguments)) or {})
            bridge = HostBridge(registry, "openai", strict=True)
            call = bridge.parse_call({"type": "function_call", "name": "get_ticket", "call_id": "c1",
                                      "arguments": json.dumps({"ticket_id": "T-1", "limit": None})})
            result = registry.invoke(call, actor=actor)
        self.assertTrue(result.ok, result)
        self.assertEqual(seen, [{"ticket_id": "T-1"}])


class RenderResultTest(unittest.TestCase):
    def test_openai_function_call_output_carries_the_model_view_as_text(self):
        result = ok_result({"ticket": {"id": "T-1"}})
        item = render_openai_result(result)
        self.assertEqual(set(item), {"type", "call_id", "output"})
        self.assertEqual((item["type"], item["call_id"]), ("function_call_output", "call_1"))
        self.assertEqual(json.loads(item["output"]), result.to_model())

    def test_openai_chat_tool_message(self):
        message = render_openai_chat_result(error_result(), call_id="other")
        self.assertEqual((message["role"], message["tool_call_id"]), ("tool", "other"))
        self.assertEqual(json.loads(message["content"])["error"]["code"], "approval_required")

    def test_anthropic_tool_result_block_marks_errors(self):
        self.assertIs(render_anthropic_result(ok_result({}))["is_error"], False)
        block = render_anthropic_result(error_result())
        self.assertEqual((block["type"], block["tool_use_id"], block["is_error"]), ("tool_result", "call_1", True))

    def test_a_host_result_needs_a_call_id(self):
        with self.assertRaises(ValueError):
            render_openai_result(ok_result({}, call_id=None))

    def test_mcp_result_on_success_has_structured_content_and_text(self):
        rendered = render_mcp_result(ok_result({"ticket": {"id": "T-1"}}))
        self.assertEqual(rendered["structuredContent"], {"ticket": {"id": "T-1"}})
        self.assertIs(rendered["isError"], False)
        self.assertEqual(rendered["content"][0]["type"], "text")
        self.assertEqual(json.loads(rendered["content"][0]["text"]), {"ticket": {"id": "T-1"}})

    def test_mcp_result_of_a_non_object_output_has_no_structured_content_and_shows_the_model_view(self):
        rendered = render_mcp_result(ok_result(["T-1", "T-2"]))
        self.assertNotIn("structuredContent", rendered)
        self.assertEqual(json.loads(rendered["content"][0]["text"])["output"], ["T-1", "T-2"])

    def test_mcp_result_on_error_carries_the_structured_error_as_text_without_structured_content(self):
        # structuredContent must fit the tool's outputSchema (the TypeScript client checks it even on errors).
        rendered = render_mcp_result(error_result())
        self.assertIs(rendered["isError"], True)
        self.assertNotIn("structuredContent", rendered)
        shown = json.loads(rendered["content"][0]["text"])
        self.assertEqual(shown["error"]["code"], "approval_required")
        self.assertEqual(shown["outcome"], "rejected")

    def test_every_rendering_is_utf8_text_even_when_the_output_holds_an_unpaired_surrogate(self):
        # A model may write "\\ud800" in its JSON arguments and a tool may echo it; the next request's
        # body must still encode as UTF-8, or the host SDK raises while sending it.
        result = ok_result({"text": "caf\u00e9 \ud800"})
        renderings = [render_openai_result(result), render_openai_chat_result(result),
                      render_anthropic_result(result), render_mcp_result(result)]
        for rendering in renderings:
            with self.subTest(rendering=sorted(rendering)):
                text = rendering.get("output") or rendering.get("content")
                text = text if isinstance(text, str) else text[0]["text"]
                text.encode("utf-8")
                shown = json.loads(text)
                self.assertEqual(shown.get("output", shown), {"text": "caf\u00e9 \ud800"})

    def test_redacted_fields_stay_redacted_in_every_rendering(self):
        result = ok_result({"ticket": {"id": "T-1", "customer_email": "ann@example.com"}}, redact=("customer_email",))
        renderings = [render_openai_result(result), render_openai_chat_result(result),
                      render_anthropic_result(result), render_mcp_result(result)]
        for rendering in renderings:
            self.assertNotIn("ann@example.com", json.dumps(rendering))


class ExportCommandTest(unittest.TestCase):
    def run_cli(self, *argv: str) -> tuple[int, str, str]:
        from agent_lab.cli import main

        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["export", *argv])
        return code, stdout.getvalue(), stderr.getvalue()

    def test_export_prints_the_candidate_catalog_as_a_json_list_for_every_host(self):
        from agent_lab.lab.candidate import candidate_specs

        names = [spec.name for spec in candidate_specs()]
        for argv in (["--format", "openai", "--strict"], ["--format", "openai-chat", "--strict"],
                     ["--format", "openai"], ["--format", "anthropic"], ["--format", "mcp"]):
            with self.subTest(argv=argv):
                code, out, err = self.run_cli(*argv)
                self.assertEqual((code, err), (0, ""))
                tools = json.loads(out)
                found = [tool.get("name") or tool["function"]["name"] for tool in tools]
                self.assertEqual(found, names)

    def test_a_catalog_that_cannot_be_strict_fails_with_exit_2_and_the_path(self):
        bad = read_spec(input_schema={"type": "object", "properties": {
            "filters": {"type": "object", "additionalProperties": {"type": "string"}}}})
        with mock.patch("agent_lab.lab.tickets.candidate.candidate_specs", return_value=[bad]):
            code, out, err = self.run_cli("--format", "openai", "--strict")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("get_ticket", err)
        self.assertIn("#/properties/filters/additionalProperties", err)
        self.assertNotIn("Traceback", err)

    def test_strict_for_a_non_openai_host_is_bad_input(self):
        code, out, err = self.run_cli("--format", "mcp", "--strict")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("--strict", err)


if __name__ == "__main__":
    unittest.main()
