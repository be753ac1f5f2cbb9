"""ToolSpec is checked when it is built; its model half exports nothing of the runtime half."""

from __future__ import annotations

import dataclasses
import json
import unittest
from typing import Any

from agent_lab.spec import ApprovalPolicy, Effect, RetryPolicy, ToolSpec

OBJECT = {"type": "object"}
KEYED = {
    "type": "object",
    "properties": {"action_id": {"type": "string"}, "count": {"type": "integer"}, "maybe": {"type": "string"}},
    "required": ["action_id", "count"],
}


def build(**options: Any) -> ToolSpec:
    base: dict[str, Any] = {"name": "do_thing", "description": "Does a thing.", "input_schema": OBJECT}
    base.update(options)
    return ToolSpec(**base)


class ConstructionChecksTest(unittest.TestCase):
    def assert_refused(self, pattern: str, **options: Any) -> None:
        with self.assertRaisesRegex(ValueError, pattern):
            build(**options)

    def test_names_follow_the_mcp_rule(self) -> None:
        for name in ("", "has space", "x" * 129, "emoji_😀", None, 7):
            with self.subTest(name=name):
                self.assert_refused(r"must be 1-128 characters of A-Z a-z 0-9 _ - \. \(the MCP rule\)", name=name)
        for name in ("a", "x" * 128, "tickets.get-v2_final"):
            self.assertEqual(build(name=name).name, name)

    def test_description_must_say_something(self) -> None:
        for description in ("", "   ", None):
            with self.subTest(description=description):
                self.assert_refused("description of 'do_thing' must be a non-empty string", description=description)

    def test_input_schema_must_describe_an_object(self) -> None:
        for schema in ({}, {"type": "array"}, True, {"type": ["object"]}):
            with self.subTest(schema=schema):
                self.assert_refused(r'input_schema of \'do_thing\' must be a JSON Schema object with "type": "object"',
                                    input_schema=schema)

    def test_schemas_must_compile(self) -> None:
        self.assert_refused("input_schema is not a valid JSON Schema 2020-12 document",
                            input_schema={"type": "object", "properties": 5})
        self.assert_refused("output_schema is not a valid JSON Schema 2020-12 document",
                            output_schema={"minLength": -1})
        self.assert_refused("output_schema of 'do_thing' must be a JSON Schema object or None", output_schema=[1])

    def test_enums_accept_their_values_and_refuse_others(self) -> None:
        spec = build(effect="write", approval="always", retry_policy="transient")
        self.assertEqual((spec.effect, spec.approval, spec.retry_policy),
                         (Effect.WRITE, ApprovalPolicy.ALWAYS, RetryPolicy.TRANSIENT))
        self.assert_refused(r"effect must be one of: read, write, destructive \(got 'delete'\)", effect="delete")
        self.assert_refused("approval must be one of: never, always, conditional", approval=True)
        self.assert_refused("retry_policy must be one of: never, transient", retry_policy="always")

    def test_timeout_must_be_a_finite_positive_number_and_not_a_bool(self) -> None:
        for value in (0, -1, float("nan"), float("inf")):
            with self.subTest(value=value):
                self.assert_refused("timeout_ms must be finite and greater than 0", timeout_ms=value)
        for value in (True, "100", None):
            with self.subTest(value=value):
                self.assert_refused("timeout_ms must be a number", timeout_ms=value)
        self.assertEqual(build(timeout_ms=0.5).timeout_ms, 0.5)

    def test_output_budget_must_be_a_positive_integer(self) -> None:
        self.assert_refused("max_output_bytes must be an integer, not float", max_output_bytes=1.5)
        self.assert_refused("max_output_bytes must be an integer, not bool", max_output_bytes=True)
        self.assert_refused("max_output_bytes must be finite and greater than 0", max_output_bytes=0)

    def test_idempotency_key_must_name_a_required_string_property(self) -> None:
        message = "idempotency_key '{}' must name a required string property of the input schema of 'do_thing'"
        for key in ("count", "maybe", "missing"):
            with self.subTest(key=key):
                self.assert_refused(message.format(key), input_schema=KEYED, idempotency_key=key)
        self.assert_refused("idempotency_key must be the name of an input property", input_schema=KEYED,
                            idempotency_key=["action_id"])
        self.assertEqual(build(input_schema=KEYED, idempotency_key="action_id").idempotency_key, "action_id")

    def test_conditional_approval_needs_a_condition_and_only_it_takes_one(self) -> None:
        self.assert_refused("approval='conditional' needs approval_condition", approval="conditional")
        self.assert_refused("approval_condition is only used with approval='conditional'",
                            approval_condition=lambda arguments: True)

    def test_redact_is_a_collection_of_names_not_one_string(self) -> None:
        self.assert_refused("redact must be a collection of field names", redact="api_token")
        self.assert_refused("redact must be a collection of field names", redact=["ok", 3])
        self.assertEqual(build(redact={"b", "a"}).redact, ("a", "b"))
        self.assertEqual(build(redact=["token", "email", "token"]).redact, ("token", "email"))

    def test_other_runtime_fields_are_checked(self) -> None:
        self.assert_refused("required_permission must be a non-empty string or None", required_permission="")
        self.assert_refused("resource_guard must be a function", resource_guard="tenant")
        self.assert_refused("open_world must be a bool", open_world=1)
        self.assert_refused("title of 'do_thing' must be a string or None", title=5)

    def test_a_spec_is_frozen_and_keeps_its_own_copy_of_the_schemas(self) -> None:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}}
        spec = build(input_schema=schema)
        schema["properties"]["a"]["type"] = "integer"
        self.assertEqual(spec.input_schema["properties"]["a"]["type"], "string")
        with self.assertRaises(dataclasses.FrozenInstanceError):
            spec.name = "other"  # type: ignore[misc]


class WarningsTest(unittest.TestCase):
    def test_a_write_without_an_idempotency_key_is_allowed_but_flagged(self) -> None:
        spec = build(effect="write")
        self.assertEqual(len(spec.warnings), 1)
        self.assertIn("without idempotency_key", spec.warnings[0])

    def test_a_destructive_tool_that_never_asks_for_approval_is_flagged(self) -> None:
        spec = build(effect="destructive", input_schema=KEYED, idempotency_key="action_id")
        self.assertEqual(spec.warnings, ("destructive tool that never asks for approval",))

    def test_a_careful_write_has_no_warnings(self) -> None:
        self.assertEqual(build(effect="write", input_schema=KEYED, idempotency_key="action_id").warnings, ())
        self.assertEqual(build().warnings, ())


class NestedQuantifierLintTest(unittest.TestCase):
    """A `pattern` like "^(a+)+$" takes exponential time in a backtracking engine. agent-lab runs it
    with its linear-time matcher (schema.regex_safety), so the spec is accepted, but it is flagged: the
    exported schema is just as slow in a host's or client's backtracking validator. The flag comes
    from the same analysis that picks the engine (ambiguous repetitions), not from a syntax heuristic:
    a nested quantifier whose repetitions cannot overlap, like "([a-z]+\\.)+$", is not flagged."""

    def warnings_for(self, schema: dict[str, Any]) -> tuple[str, ...]:
        return build(input_schema={"type": "object", **schema}).warnings

    def test_a_quantified_group_that_contains_an_unbounded_quantifier_is_flagged(self) -> None:
        # "(a{2,3})+" splits a run of a's in exponentially many ways (aaaaaa = 3+3 = 2+2+2).
        for pattern in ("^(a+)+$", "(a*)*", "(x{2,})+", "((a)+)+", "(a+){2,}", "(a+){2,5}", "(\\d+)+?",
                        "(a{2,3})+", "(a|aa)+", "\\d+\\d+"):
            with self.subTest(pattern=pattern):
                found = self.warnings_for({"properties": {"p": {"type": "string", "pattern": pattern}}})
                self.assertEqual(len(found), 1)
                self.assertIn("nested quantifier", found[0])
                self.assertIn("/properties/p/pattern", found[0])

    def test_patterns_without_a_repeated_unbounded_group_are_not_flagged(self) -> None:
        # Nested quantifiers whose next repetition always starts differently are not ambiguous:
        # "(?:ab+)*c" (each round starts with a), "([a-z]+\\.)+$" (each ends with a dot).
        for pattern in ("^T-[0-9]{4}$", "^[A-Za-z0-9_-]{8,64}$", "(ab)+", "(a+)?", "(a+){1}",
                        "[(a+)]+", "\\(a+\\)+", "(a|b)c*", "^(a+)$", "(?:ab+)*c", "(a(b+))*", "([a-z]+\\.)+$"):
            with self.subTest(pattern=pattern):
                self.assertEqual(self.warnings_for({"properties": {"p": {"type": "string", "pattern": pattern}}}), ())

    def test_pattern_properties_keys_and_patterns_deep_in_the_schema_are_checked(self) -> None:
        schema = {
            "patternProperties": {"^(a+)+$": {"type": "string"}},
            "$defs": {"deep": {"prefixItems": [{"anyOf": [{"pattern": "(b*)*"}]}]}},
            "properties": {"list": {"type": "array", "items": {"type": "string", "pattern": "(c+)+"}}},
        }
        found = self.warnings_for(schema)
        self.assertEqual(len(found), 3)
        self.assertTrue(any("/patternProperties" in warning for warning in found))
        self.assertTrue(any("/$defs/deep/prefixItems/0/anyOf/0/pattern" in warning for warning in found))
        self.assertTrue(any("/properties/list/items/pattern" in warning for warning in found))

    def test_data_that_merely_looks_like_a_pattern_is_not_a_pattern(self) -> None:
        schema = {
            "properties": {
                "pattern": {"type": "string"},  # a property named "pattern" is a schema, not a regex
                "q": {"const": {"pattern": "(a+)+"}, "enum": [{"pattern": "(a+)+"}], "default": {"pattern": "(a+)+"},
                      "examples": [{"pattern": "(a+)+"}]},
            }
        }
        self.assertEqual(self.warnings_for(schema), ())


class TwoHalvesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.spec = build(
            title="Do a thing",
            output_schema={"type": "object"},
            input_schema=KEYED,
            required_permission="things:secret-scope",
            effect="write",
            approval="conditional",
            approval_condition=lambda arguments: arguments["count"] > 3,
            idempotency_key="action_id",
            retry_policy="transient",
            timeout_ms=1234,
            max_output_bytes=4321,
            redact=("hidden_field_name",),
            resource_guard=lambda arguments, actor: True,
        )

    def test_model_schema_exports_only_the_model_half(self) -> None:
        exported = self.spec.model_schema()
        self.assertEqual(list(exported), ["name", "title", "description", "input_schema", "output_schema"])
        text = json.dumps(exported)
        for runtime_value in ("things:secret-scope", "transient", "1234", "4321", "hidden_field_name", "conditional"):
            self.assertNotIn(runtime_value, text)

    def test_model_schema_is_a_copy(self) -> None:
        exported = self.spec.model_schema()
        exported["input_schema"]["properties"].clear()
        self.assertIn("action_id", self.spec.input_schema["properties"])

    def test_runtime_contract_holds_the_other_half_as_plain_data(self) -> None:
        contract = self.spec.runtime_contract()
        self.assertEqual(contract["required_permission"], "things:secret-scope")
        self.assertEqual((contract["effect"], contract["approval"], contract["retry_policy"]),
                         ("write", "conditional", "transient"))
        self.assertEqual((contract["timeout_ms"], contract["max_output_bytes"]), (1234, 4321))
        self.assertTrue(contract["resource_guard"])
        json.dumps(contract)  # plain data

    def test_needs_approval_follows_the_policy(self) -> None:
        self.assertFalse(self.spec.needs_approval({"action_id": "a", "count": 1}))
        self.assertTrue(self.spec.needs_approval({"action_id": "a", "count": 9}))
        self.assertTrue(build(approval="always").needs_approval({}))
        self.assertFalse(build().needs_approval({}))

    def test_writes_is_true_for_write_and_destructive(self) -> None:
        self.assertEqual([build(effect=effect).writes for effect in ("read", "write", "destructive")],
                         [False, True, True])


class LoneSurrogateTest(unittest.TestCase):
    """A lone surrogate (no UTF-8 text can hold one) anywhere in a spec's text is refused where the spec
    is built, naming the field and the JSON Pointer; lint, catalog-cost and export used to crash on it
    with a UnicodeEncodeError traceback."""

    LONE = "\ud800"

    def spec(self, **changes: Any) -> ToolSpec:
        options: dict[str, Any] = {"name": "ping", "description": "Ping.", "input_schema": {"type": "object"}}
        options.update(changes)
        return ToolSpec(**options)

    def test_every_text_of_a_spec_is_checked_with_the_field_and_the_pointer(self) -> None:
        lone = self.LONE
        cases = {
            "description": ({"description": f"Ping {lone}."}, "ToolSpec.description of 'ping'"),
            "title": ({"title": f"Ping{lone}"}, "ToolSpec.title of 'ping'"),
            "permission": ({"required_permission": f"ping{lone}"}, "ToolSpec.required_permission of 'ping'"),
            "redact": ({"redact": ("token", f"key{lone}")}, "ToolSpec.redact of 'ping' holds a lone surrogate "
                       "(\\ud800-\\udfff) in entry 1"),
            "schema description": ({"input_schema": {"type": "object", "properties": {"a": {
                "type": "string", "description": f"A {lone}"}}}}, "in a string at /properties/a/description"),
            "member name": ({"input_schema": {"type": "object", "properties": {f"a{lone}": {"type": "string"}}}},
                            "in a member name of the object at /properties"),
            "enum value": ({"input_schema": {"type": "object", "properties": {"a": {"enum": ["ok", lone]}}}},
                           "in a string at /properties/a/enum/1"),
            "output schema title": ({"output_schema": {"type": "object", "title": f"\udfff{lone}"}},
                                    "ToolSpec.output_schema of 'ping' holds a lone surrogate"),
            "schema root": ({"input_schema": {"type": "object", "$comment": lone}}, "in a string at /$comment"),
        }
        for label, (changes, expected) in cases.items():
            with self.subTest(label), self.assertRaises(ValueError) as refused:
                self.spec(**changes)
            message = str(refused.exception)
            self.assertIn(expected, message)
            message.encode("utf-8")  # the message itself can be printed: it never quotes the surrogate

    def test_a_schema_is_refused_every_time_even_when_an_equal_schema_was_compiled_before(self) -> None:
        from agent_lab.schema import shared_validator

        schema = {"type": "object", "description": f"Shared {self.LONE}"}
        shared_validator(schema, format_assertion=True)  # compiled (and cached) outside any spec
        for _ in range(2):
            with self.assertRaises(ValueError):
                self.spec(input_schema=schema)

    def test_astral_characters_written_as_one_code_point_are_text(self) -> None:
        spec = self.spec(description="Ping \U0001f600.", input_schema={"type": "object", "title": "\u00e9t\u00e9"})
        self.assertEqual(spec.description, "Ping \U0001f600.")

    def test_lint_catalog_cost_and_export_refuse_such_a_registry_in_one_line(self) -> None:
        import contextlib
        import io
        import tempfile
        from pathlib import Path

        from agent_lab.cli import main

        with tempfile.TemporaryDirectory() as directory:
            module = Path(directory) / "surrogate_tools.py"
            module.write_text(
                "from agent_lab import Registry, ToolSpec\n\n"
                "def registry():\n"
                "    tools = Registry()\n"
                "    tools.register(ToolSpec(name='ping', description='Ping \\ud800 it.',\n"
                "                            input_schema={'type': 'object'}), lambda arguments: {})\n"
                "    return tools\n", encoding="utf-8")
            for command in (["lint"], ["catalog-cost"], ["export", "--format", "openai"], ["inspect"]):
                with self.subTest(command=command[0]):
                    stdout, stderr = io.StringIO(), io.StringIO()
                    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                        code = main([*command, "--registry", f"{module}:registry"])
                    self.assertEqual((code, stdout.getvalue()), (2, ""))
                    self.assertEqual(len(stderr.getvalue().splitlines()), 1, stderr.getvalue())
                    self.assertIn("ToolSpec.description of 'ping' holds a lone surrogate", stderr.getvalue())


if __name__ == "__main__":
    unittest.main()
