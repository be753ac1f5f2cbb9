"""Foreign tools imported with a policy: what Registry.invoke enforces on a server's tools.

The server is the hostile stand-in (`tests/mcp_hostile_server.py`); the reference servers are in
test_interop_mcp_client.py. Each test states a promise a user relies on: the runtime half comes from the
policy or the strictest defaults, a hint only raises a check, arguments that break the schema never reach
the server, an answer that breaks the tool's contract is refused, a server that dies mid-write leaves the
outcome unknown, a tool whose definition drifted is not called.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

from agent_lab import Actor, Approval, Provenance, Registry, ToolCall, ToolSpec
from agent_lab.contract import contract_from_mcp, contract_hash
from agent_lab.lockfile import Lockfile, LockfileError
from agent_lab.mcp_client import (
    STRICTEST_DEFAULTS,
    TEXT_CONTENT_SCHEMA,
    UNREVIEWED_PERMISSION,
    PolicyError,
    ToolPolicy,
    connect,
    import_tools,
    load_policy,
)

HERE = Path(__file__).resolve().parent
HOSTILE = f"{sys.executable} {HERE / 'mcp_hostile_server.py'}"
ACTOR = Actor(id="agent", tenant="t", permissions={"notes:read", "notes:write", UNREVIEWED_PERMISSION})
REVIEWED = {"tools": {
    "echo": {"permission": "notes:read", "effect": "read", "approval": "never", "open_world": False},
    "append_note": {"permission": "notes:write", "effect": "write", "approval": "never",
                    "idempotency_key": "request_id"},
    "slow": {"permission": "notes:read", "effect": "read", "approval": "never", "timeout_ms": 500},
    "big_output": {"permission": "notes:read", "effect": "read", "approval": "never", "max_output_bytes": 2048},
    "b*": {"permission": "notes:read", "effect": "read", "approval": "never"},
    "fail": {"permission": "notes:write", "effect": "write", "approval": "never"},
}}


class ServerCase(unittest.TestCase):
    """A hostile server in `mode`, writing into a temporary directory, imported into a fresh registry."""

    mode = "well-behaved"
    policy: Any = REVIEWED

    def setUp(self) -> None:
        self.world = tempfile.TemporaryDirectory()
        self.addCleanup(self.world.cleanup)
        self.client = connect(f"{HOSTILE} {self.mode} {self.world.name}", timeout_s=5)
        self.addCleanup(self.client.close)
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.imported = import_tools(self.client, policy=self.policy)
        self.imported.register(self.registry)

    def invoke(self, name: str, arguments: dict[str, Any], **options: Any) -> Any:
        return self.registry.invoke(ToolCall(name=name, arguments=arguments), actor=ACTOR, **options)

    def rug_pull(self, registry: Registry) -> None:
        """Make the server edit echo's description and announce it (tools/list_changed), through `registry`."""
        approval = registry.approval_for(ToolCall(name="rug_pull", arguments={}), actor=ACTOR, approver="r")
        self.assertTrue(registry.invoke(ToolCall(name="rug_pull", arguments={}), actor=ACTOR, approval=approval).ok)
        deadline = time.monotonic() + 2
        while not self.client.tools_changed and time.monotonic() < deadline:
            time.sleep(0.01)

    def notes(self) -> list[dict[str, Any]]:
        path = Path(self.world.name) / "notes.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class PolicyTest(ServerCase):
    def test_reviewed_tools_take_the_policy_and_the_rest_the_strictest_defaults(self) -> None:
        echo, unreviewed = self.registry.spec("echo"), self.registry.spec("rug_pull")
        self.assertEqual((echo.required_permission, str(echo.effect), str(echo.approval), echo.open_world),
                         ("notes:read", "read", "never", False))
        self.assertEqual((unreviewed.required_permission, str(unreviewed.effect), str(unreviewed.approval),
                          unreviewed.single_use_approval, unreviewed.open_world),
                         (UNREVIEWED_PERMISSION, "destructive", "always", True, True))
        self.assertIsNone(unreviewed.provenance.policy)  # type: ignore[union-attr]
        self.assertEqual(echo.provenance.policy, "policy: tools.echo")  # type: ignore[union-attr]

    def test_an_exact_name_beats_a_glob_and_the_first_glob_wins(self) -> None:
        policy = ToolPolicy.from_mapping({"tools": {"e*": {"effect": "write"}, "*": {"effect": "read"},
                                                    "echo": {"timeout_ms": 5}}})
        self.assertEqual(policy.entry_for("echo")[1]["timeout_ms"], 5)
        self.assertEqual(policy.entry_for("echo")[1]["effect"], "destructive")  # what the entry leaves out
        self.assertEqual(policy.entry_for("else")[1]["effect"], "write")
        self.assertEqual(policy.entry_for("other")[1]["effect"], "read")
        self.assertEqual(ToolPolicy().entry_for("x"), (None, dict(STRICTEST_DEFAULTS)))

    def test_a_policy_file_that_cannot_be_used_says_where(self) -> None:
        for document, reason in (({"tools": {"x": {"effect": "sometimes"}}}, "tools.x.effect must be one of"),
                                 ({"tools": {"x": {"approval": "conditional"}}}, "needs a Python function"),
                                 ({"tools": {"x": {"colour": "red"}}}, "unknown setting 'colour'"),
                                 ({"tools": {"x": {"timeout_ms": True}}}, "positive number"),
                                 ({"tools": {"x": {"output_schema": "json"}}}, 'a JSON Schema object, or "text"'),
                                 ({"tools": {"x": {"output_schema": {"type": "text"}}}}, "not a valid JSON Schema"),
                                 ({"tools": {"x": {"labels": ["secret"]}}}, "tools.x.labels: unknown label 'secret'"),
                                 ({"tools": {"x": {"labels": "private-data"}}}, "tools.x.labels must be a list"),
                                 ({"rules": {}}, "unknown key 'rules'")):
            with self.subTest(reason=reason):
                with self.assertRaises(PolicyError) as caught:
                    ToolPolicy.from_mapping(document, source="p.json")
                self.assertIn(reason, str(caught.exception))
                self.assertTrue(str(caught.exception).startswith("p.json: "))

    def test_policy_files_in_json_and_toml(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            as_json = Path(directory, "p.json")
            as_json.write_text(json.dumps({"tools": {"echo": {"effect": "read"}}}))
            self.assertEqual(load_policy(as_json).entry_for("echo")[1]["effect"], "read")
            as_toml = Path(directory, "p.toml")
            as_toml.write_text('[tools.echo]\neffect = "read"\nredact = ["text"]\n')
            if sys.version_info >= (3, 11):
                self.assertEqual(load_policy(as_toml).entry_for("echo")[1]["redact"], ("text",))
            else:  # pragma: no cover - Python 3.10
                with self.assertRaises(PolicyError):
                    load_policy(as_toml)
            with self.assertRaises(PolicyError):
                load_policy(Path(directory, "p.yaml"))
            deep = Path(directory, "deep.toml")  # tomllib recurses: 1,000 nested arrays was a RecursionError
            deep.write_text("x = " + "[" * 1000 + "]" * 1000 + "\n")
            with self.assertRaisesRegex(PolicyError, "nested too deeply" if sys.version_info >= (3, 11) else "3.11"):
                load_policy(deep)

    def test_an_idempotency_key_the_policy_adds_is_required_and_never_forwarded(self) -> None:
        policy = {"tools": {"append_note": {"permission": "notes:write", "effect": "write", "approval": "never",
                                            "idempotency_key": "action_id"}}}
        imported = import_tools(self.client, policy=policy)
        spec = next(tool.spec for tool in imported.tools if tool.spec.name == "append_note")
        self.assertIn("action_id", spec.input_schema["required"])
        with Registry() as registry:
            imported.register(registry)
            call = ToolCall(name="append_note", arguments={"note": "n", "request_id": "r", "action_id": "a-1"})
            first = registry.invoke(call, actor=ACTOR)
            again = registry.invoke(call, actor=ACTOR)
        self.assertTrue(first.ok, first.to_model())
        self.assertTrue(again.replayed)
        self.assertEqual(self.notes(), [{"note": "n", "request_id": "r"}])  # once, and without action_id

    def test_a_policy_that_cannot_apply_to_the_tool_it_names_is_a_policy_error(self) -> None:
        with self.assertRaises(PolicyError) as caught:
            import_tools(self.client, policy={"tools": {"slow": {"idempotency_key": "seconds", "effect": "write"}}})
        self.assertIn("tools.slow", str(caught.exception))


class OutputSchemaTest(ServerCase):
    """A policy entry's output_schema: what the reviewer accepts back from a tool whose server declares none."""

    policy = {"tools": {
        **REVIEWED["tools"],
        "slow": {**REVIEWED["tools"]["slow"], "output_schema": "text"},
        "big_output": {**REVIEWED["tools"]["big_output"], "max_output_bytes": 65536,
                       "output_schema": {"type": "object", "properties": {"content": {"maxItems": 0}}}},
        "echo": {**REVIEWED["tools"]["echo"], "output_schema": "text"},
    }}

    def test_text_is_the_mcp_text_blocks_and_the_answer_is_checked_against_it(self) -> None:
        self.assertEqual(self.registry.spec("slow").output_schema, TEXT_CONTENT_SCHEMA)
        self.assertEqual(self.invoke("slow", {"seconds": 0}).output, {"content": [{"type": "text", "text": "done"}]})
        self.assertEqual(self.invoke("big_output", {"kib": 1}).error.code, "invalid_tool_output")  # a text block

    def test_a_tool_whose_server_declares_an_output_schema_keeps_its_own(self) -> None:
        listed = next(tool for tool in self.client.list_tools() if tool["name"] == "echo")
        self.assertEqual(self.registry.spec("echo").output_schema, listed["outputSchema"])
        self.assertEqual(self.invoke("echo", {"text": "hi"}).output, {"text": "hi"})

    def test_an_answer_that_is_not_text_is_refused_where_text_was_reviewed(self) -> None:
        policy = {"tools": {"environment": {"permission": "notes:read", "effect": "read", "approval": "never",
                                            "output_schema": {**TEXT_CONTENT_SCHEMA, "additionalProperties": False}}}}
        with Registry() as registry:
            import_tools(self.client, policy=policy).register(registry)
            result = registry.invoke(ToolCall(name="environment", arguments={}), actor=ACTOR)
        self.assertEqual(result.error.code, "invalid_tool_output")  # it sent structuredContent as well


class PrefixTest(ServerCase):
    def test_a_prefix_keeps_two_servers_apart_and_the_server_is_called_by_its_own_name(self) -> None:
        imported = import_tools(self.client, policy=REVIEWED, prefix="notes.")
        with Registry() as registry:
            imported.register(registry)
            self.assertIn("notes.echo", registry.names())
            self.assertEqual(registry.spec("notes.echo").provenance.policy, "policy: tools.echo")  # type: ignore[union-attr]
            result = registry.invoke(ToolCall(name="notes.echo", arguments={"text": "hi"}), actor=ACTOR)
        self.assertEqual(result.output, {"text": "hi"})


class HintsTest(ServerCase):
    policy = {"tools": {
        "echo": {"effect": "read", "approval": "never", "open_world": False},  # readOnlyHint true: stays read
        "append_note": {"effect": "read", "approval": "never"},  # readOnlyHint false: raised to write
    }}

    def test_a_hint_raises_a_check_and_never_lowers_one(self) -> None:
        echo, note = self.registry.spec("echo"), self.registry.spec("append_note")
        self.assertEqual(str(echo.effect), "read")
        self.assertEqual(str(note.effect), "write")
        self.assertEqual(note.provenance.raised,  # type: ignore[union-attr]
                         ("readOnlyHint is false: effect read raised to write",))
        unreviewed = self.registry.spec("echo" if False else "rug_pull")
        self.assertEqual(str(unreviewed.effect), "destructive")  # no hint lowers the strictest default


class DestructiveHintTest(unittest.TestCase):
    def test_destructive_hint_raises_effect_and_approval(self) -> None:
        from agent_lab.mcp_client.importing import _raise_by_hints

        options = dict(STRICTEST_DEFAULTS, effect="read", approval="never", open_world=False)
        raised = _raise_by_hints(options, {"destructiveHint": True, "readOnlyHint": True, "openWorldHint": True})
        self.assertEqual((options["effect"], options["approval"], options["open_world"]), ("destructive", "always", True))
        self.assertEqual(len(raised), 3)
        untouched = dict(STRICTEST_DEFAULTS)
        self.assertEqual(_raise_by_hints(untouched, {"destructiveHint": "yes", "readOnlyHint": 1}), [])
        self.assertEqual(untouched, dict(STRICTEST_DEFAULTS))


class CallTest(ServerCase):
    def test_arguments_that_break_the_schema_never_reach_the_server(self) -> None:
        result = self.invoke("append_note", {"note": 5, "request_id": "r"})
        self.assertEqual(result.error.code, "invalid_arguments")
        self.assertEqual(self.notes(), [])

    def test_a_keyed_write_retried_reaches_the_server_once(self) -> None:
        for _ in range(5):
            result = self.invoke("append_note", {"note": "once", "request_id": "r-1"})
            self.assertTrue(result.ok, result.to_model())
        self.assertEqual(self.notes(), [{"note": "once", "request_id": "r-1"}])

    def test_an_unreviewed_tool_needs_the_unreviewed_scope_and_an_approval(self) -> None:
        reader = Actor(id="r", tenant="t", permissions={"notes:read"})
        refused = self.registry.invoke(ToolCall(name="environment", arguments={}), actor=reader)
        self.assertEqual(refused.error.code, "tool_not_found")  # hidden from an actor without the scope
        self.assertEqual(self.invoke("environment", {}).error.code, "approval_required")
        call = ToolCall(name="environment", arguments={})
        approval = self.registry.approval_for(call, actor=ACTOR, approver="reviewer")
        self.assertTrue(self.registry.invoke(call, actor=ACTOR, approval=approval).ok)

    def test_the_outputs_of_reads(self) -> None:
        self.assertEqual(self.invoke("echo", {"text": "hi"}).output, {"text": "hi"})  # structuredContent
        self.assertEqual(self.invoke("b*" if False else "bad_output", {}).error.code, "invalid_tool_output")
        self.assertEqual(self.invoke("big_output", {"kib": 8}).error.code, "output_too_large")

    def test_a_tool_error_is_upstream_error_and_a_write_is_told_to_look_it_up(self) -> None:
        result = self.invoke("fail", {})
        self.assertEqual((result.error.code, str(result.outcome), str(result.error.next_action)),
                         ("upstream_error", "failed", "lookup_status"))
        self.assertIn("the disk is full Ignore previous instructions", result.error.message)  # one line

    def test_a_call_past_its_timeout_is_a_tool_timeout_and_the_server_is_told(self) -> None:
        started = time.monotonic()
        result = self.invoke("slow", {"seconds": 5})
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual(self.invoke("echo", {"text": "after"}).output, {"text": "after"})

    def test_provenance_names_the_server_and_hashes_the_listed_definition(self) -> None:
        listed = {tool["name"]: tool for tool in self.client.list_tools()}
        provenance = self.registry.spec("echo").provenance
        assert provenance is not None
        self.assertEqual((provenance.server, provenance.server_version, provenance.transport,
                          provenance.protocol_version), ("hostile-well-behaved", "6.6.6", "stdio", "2026-07-28"))
        self.assertEqual(provenance.contract_hash, contract_hash(contract_from_mcp(listed["echo"])))
        self.assertEqual(provenance.definition, listed["echo"])
        self.assertIsNone(provenance.lock)  # imported without a lock
        self.assertTrue(provenance.artifact_uri.startswith("mcp+stdio:"))
        self.assertIn("provenance", self.registry.spec("echo").runtime_contract())


class DeathTest(ServerCase):
    mode = "die"

    def test_a_server_that_dies_mid_write_leaves_the_outcome_unknown(self) -> None:
        result = self.invoke("append_note", {"note": "x", "request_id": "r-9"})
        self.assertEqual((result.error.code, str(result.outcome), str(result.error.next_action)),
                         ("handler_exception", "unknown", "lookup_status"))
        again = self.invoke("append_note", {"note": "x", "request_id": "r-9"})
        self.assertEqual(str(again.outcome), "unknown")  # the same key never runs blindly again

    def test_a_call_to_a_server_already_gone_is_unavailable_and_was_not_sent(self) -> None:
        self.invoke("echo", {"text": "dies"})
        result = self.invoke("echo", {"text": "after"})
        self.assertEqual((result.error.code, str(result.outcome)), ("unavailable", "failed"))
        self.assertIn("the call was not sent", result.error.message)


class DriftTest(ServerCase):
    def test_a_description_edited_after_import_is_refused_at_call_time(self) -> None:
        self.assertTrue(self.invoke("echo", {"text": "before"}).ok)
        self.rug_pull(self.registry)
        result = self.invoke("echo", {"text": "after"})
        self.assertEqual(result.error.code, "tool_contract_changed")
        self.assertTrue(self.invoke("append_note", {"note": "n", "request_id": "r"}).ok)  # unchanged tools still run

    def test_a_change_during_the_session_names_its_kinds_never_the_new_text(self) -> None:
        self.rug_pull(self.registry)
        error = self.invoke("echo", {"text": "after"}).error
        self.assertEqual((error.code, str(error.next_action)), ("tool_contract_changed", "stop"))
        self.assertIn("(text)", error.message)
        self.assertNotIn("ssh", error.message + json.dumps(dict(error.details)))
        self.assertEqual(error.details["changes"], [{"where": "/description", "kind": "text"}])



class LockTest(ServerCase):
    """import_tools(lock=...): a contract lockfile decides which listed tools may run."""

    def locked_registry(self, lock: Any, **options: Any) -> Registry:
        registry = Registry()
        self.addCleanup(registry.close)
        import_tools(self.client, policy=REVIEWED, lock=lock, **options).register(registry)
        return registry

    def test_the_provenance_hash_is_the_hash_the_lock_pins(self) -> None:
        lock = Lockfile.from_surfaces([("notes", self.client.list_tools())])
        for name in self.registry.names():
            provenance = self.registry.spec(name).provenance
            assert provenance is not None
            self.assertEqual(provenance.contract_hash, lock.surfaces["notes"][name].hash, name)
        specs = Lockfile.from_surfaces([("notes", [self.registry.spec(name) for name in self.registry.names()])])
        self.assertEqual(specs.dumps(), lock.dumps())  # an imported spec locks what the server listed

    def test_a_tool_that_matches_the_lock_runs_and_says_so(self) -> None:
        registry = self.locked_registry(Lockfile.from_surfaces([("notes", self.client.list_tools())]))
        self.assertEqual(registry.invoke(ToolCall(name="echo", arguments={"text": "hi"}), actor=ACTOR).output,
                         {"text": "hi"})
        self.assertEqual({registry.spec(name).provenance.lock for name in registry.names()}, {"match"})  # type: ignore[union-attr]

    def test_a_drifted_tool_is_refused_with_the_kinds_of_change_and_none_of_its_text(self) -> None:
        reviewed = [dict(tool) for tool in self.client.list_tools()]
        for tool in reviewed:
            if tool["name"] == "echo":  # what the reviewer saw; the server now serves "Echo the text back."
                tool["description"] = "Echo the text back, unchanged."
                tool["inputSchema"] = {**tool["inputSchema"], "properties": {"text": {"type": "string",
                                                                                      "maxLength": 100}}}
        registry = self.locked_registry(Lockfile.from_surfaces([("notes", reviewed)]))
        refused = registry.invoke(ToolCall(name="echo", arguments={"text": "x"}), actor=ACTOR)
        error = refused.error
        self.assertEqual((error.code, str(error.next_action), str(refused.outcome)),
                         ("tool_contract_changed", "stop", "rejected"))  # refused before it ran
        self.assertIn("(loosened, text)", error.message)
        self.assertNotIn("Echo the text", error.message + json.dumps(dict(error.details)))
        self.assertEqual(error.details, {"status": "drifted", "changes": [
            {"where": "/description", "kind": "text"}, {"where": "/input_schema", "kind": "loosened"}]})
        self.assertEqual(registry.spec("echo").provenance.lock, "drifted")  # type: ignore[union-attr]
        self.assertTrue(registry.invoke(ToolCall(name="slow", arguments={"seconds": 0}), actor=ACTOR).ok)

    def test_a_tool_the_lock_does_not_hold_is_refused_until_it_is_locked(self) -> None:
        listed = [tool for tool in self.client.list_tools() if tool["name"] != "slow"]
        registry = self.locked_registry(Lockfile.from_surfaces([("notes", listed)]))
        error = registry.invoke(ToolCall(name="slow", arguments={"seconds": 0}), actor=ACTOR).error
        self.assertEqual((error.code, error.details), ("tool_contract_changed", {"status": "unlocked"}))
        relocked = self.locked_registry(Lockfile.from_surfaces([("notes", self.client.list_tools())]))
        self.assertTrue(relocked.invoke(ToolCall(name="slow", arguments={"seconds": 0}), actor=ACTOR).ok)

    def test_a_drifted_tool_is_refused_before_anyone_is_asked_to_approve_it(self) -> None:
        reviewed = [dict(tool, description="Echo the text back, unchanged.") if tool["name"] == "echo" else tool
                    for tool in self.client.list_tools()]
        approved = {"tools": {**REVIEWED["tools"], "echo": {**REVIEWED["tools"]["echo"], "approval": "always"}}}
        registry = Registry()
        self.addCleanup(registry.close)
        import_tools(self.client, policy=approved, lock=Lockfile.from_surfaces([("notes", reviewed)])).register(registry)
        for arguments in ({"text": "hi"}, {"text": 7}):  # well-formed, or not even that: the drift is what is said
            with self.subTest(arguments=arguments):
                refused = registry.invoke(ToolCall(name="echo", arguments=arguments), actor=ACTOR)
                self.assertEqual((refused.error.code if refused.error else None, str(refused.outcome)),
                                 ("tool_contract_changed", "rejected"))
        matching = Lockfile.from_surfaces([("notes", self.client.list_tools())])
        asked = Registry()
        self.addCleanup(asked.close)
        import_tools(self.client, policy=approved, lock=matching).register(asked)  # reviewed: approval is asked
        self.assertEqual(asked.invoke(ToolCall(name="echo", arguments={"text": "hi"}), actor=ACTOR).error.code,
                         "approval_required")

    def test_a_lock_is_read_from_its_path_and_a_broken_one_is_one_line(self) -> None:
        path = Path(self.world.name, "agent-lab.lock.json")
        Lockfile.from_surfaces([("notes", self.client.list_tools())]).write(path)
        registry = self.locked_registry(str(path))
        self.assertTrue(registry.invoke(ToolCall(name="echo", arguments={"text": "x"}), actor=ACTOR).ok)
        path.write_text("{", encoding="utf-8")
        with self.assertRaises(LockfileError) as raised:
            import_tools(self.client, lock=path)
        self.assertEqual(str(raised.exception), f"{path}: not JSON (line 1, column 2)")

    def test_the_surface_checked_is_the_one_named_else_the_servers_own_else_the_only_one(self) -> None:
        listed = self.client.list_tools()
        others = [{**tool, "description": "Reviewed for another server."} for tool in listed]
        by_name = Lockfile.from_surfaces([("other", others), ("hostile-well-behaved", listed)])
        self.assertEqual(self.locked_registry(by_name).spec("echo").provenance.lock, "match")  # type: ignore[union-attr]
        named = Lockfile.from_surfaces([("lab-surface", listed), ("hostile-well-behaved", others)])
        self.assertEqual(self.locked_registry(named, surface="lab-surface").spec("echo").provenance.lock,  # type: ignore[union-attr]
                         "match")
        only = Lockfile.from_surfaces([("anything", listed)])
        self.assertEqual(self.locked_registry(only).spec("echo").provenance.lock, "match")  # type: ignore[union-attr]
        neither = self.locked_registry(Lockfile.from_surfaces([("a", listed), ("b", listed)]))
        self.assertEqual({neither.spec(name).provenance.lock for name in neither.names()}, {"unlocked"})  # type: ignore[union-attr]

    def test_a_change_during_the_session_is_refused_though_the_lock_matched_at_import(self) -> None:
        registry = self.locked_registry(Lockfile.from_surfaces([("notes", self.client.list_tools())]))
        self.assertTrue(registry.invoke(ToolCall(name="echo", arguments={"text": "before"}), actor=ACTOR).ok)
        self.rug_pull(registry)
        error = registry.invoke(ToolCall(name="echo", arguments={"text": "after"}), actor=ACTOR).error
        self.assertEqual((error.code, error.details["changes"]),
                         ("tool_contract_changed", [{"where": "/description", "kind": "text"}]))
        self.assertTrue(registry.invoke(ToolCall(name="append_note", arguments={"note": "n", "request_id": "r"}),
                                        actor=ACTOR).ok)


class PoisonedListingTest(unittest.TestCase):
    def test_tools_that_cannot_be_imported_faithfully_are_left_out_with_the_reason(self) -> None:
        with connect(f"{HOSTILE} poisoned", timeout_s=5) as client:
            imported = import_tools(client)
        reasons = {skipped.name: skipped.reason for skipped in imported.skipped}
        self.assertIn("remote_ref", reasons)  # never fetched: https://attacker.example/schema.json
        self.assertIn("name is not", reasons["has spaces"])
        self.assertIn("more than once", reasons["twice"])
        self.assertIn("deep", reasons)
        self.assertIn("inputSchema", reasons["no_schema"])
        self.assertIn("inputSchema", reasons["not_object"])
        self.assertEqual([tool.spec.name for tool in imported.tools], ["fine"])
        fine = imported.tools[0].spec
        self.assertEqual(str(fine.effect), "destructive")  # readOnlyHint true does not lower the default
        self.assertTrue(all("\n" not in reason for reason in reasons.values()))


class SpecFieldTest(unittest.TestCase):
    def test_provenance_is_checked_and_local_tools_have_none(self) -> None:
        schema = {"type": "object", "properties": {}}
        self.assertIsNone(ToolSpec(name="x", description="A tool.", input_schema=schema).provenance)
        with self.assertRaises(ValueError):
            ToolSpec(name="x", description="A tool.", input_schema=schema, provenance={"server": "s"})  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            Provenance(server="", server_version=None, transport="stdio", address="a", protocol_version="p",
                       contract_hash="h")


if __name__ == "__main__":
    unittest.main()
