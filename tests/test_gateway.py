"""The contract gateway without the MCP SDK: approvals over MCP on both protocol eras, the receipts spec,
namespacing of upstreams whose tool names collide, and the command line's refusals.

The approval tests serve a local registry through `serve_gateway` in a thread over OS pipes, exactly as
a client sees it (the gateway's MCP half does not care where a tool's handler sends its call); the
upstream tests start our own stand-in server (tests/mcp_hostile_server.py, well-behaved) twice.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any
from unittest import mock

from agent_lab import Actor, Effect, ToolSpec
from agent_lab.gateway import GatewayError, open_gateway, open_receipts, serve_gateway

REPO_ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 10.0
ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion"
ENVELOPE_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
ACTOR = Actor(id="ada", tenant="acme", permissions={"bank:write", "report:read"})
TRANSFER = {"account": "acc-1", "amount": 40, "request_id": "t-1"}


def build_registry(runs: list[str]) -> Any:
    """A transfer that needs approval (keyed, single-use approval), a report read whose approval is
    single-use and unkeyed, and an admin tool the actor may not see (it needs approval too)."""
    from agent_lab.registry import Registry

    registry = Registry()
    registry.register(ToolSpec(
        name="transfer", description="Move money.", required_permission="bank:write", effect=Effect.WRITE,
        approval="always", single_use_approval=True, idempotency_key="request_id",
        input_schema={"type": "object", "properties": {"account": {"type": "string"}, "amount": {"type": "integer"},
                                                       "request_id": {"type": "string"}},
                      "required": ["account", "amount", "request_id"], "additionalProperties": False}),
        lambda arguments: runs.append("transfer") or {"moved": arguments["amount"]})
    registry.register(ToolSpec(
        name="report", description="Read the secret report.", required_permission="report:read",
        approval="always", single_use_approval=True,
        input_schema={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
        lambda arguments: runs.append("report") or {"topic": arguments["topic"]})
    registry.register(ToolSpec(
        name="admin_reset", description="Reset.", required_permission="admin", approval="always",
        input_schema={"type": "object"}),
        lambda arguments: runs.append("admin_reset") or {})
    return registry


class GatewayPipe:
    """`serve_gateway` in a thread; the test is its client, newline-delimited JSON over OS pipes."""

    def __init__(self, registry: Any) -> None:
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        self.to_server = os.fdopen(to_server_w, "wb", buffering=0)
        self.from_server = os.fdopen(from_server_r, "rb")
        server_in, server_out = os.fdopen(to_server_r, "rb"), os.fdopen(from_server_w, "wb")
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.next_id = 0

        def run() -> None:
            try:
                serve_gateway(registry, actor=ACTOR, stdin=server_in, stdout=server_out)
            finally:
                server_out.close()
                server_in.close()

        def pump() -> None:
            for line in self.from_server:
                self.lines.put(line)

        self.threads = [threading.Thread(target=run, daemon=True), threading.Thread(target=pump, daemon=True)]
        for thread in self.threads:
            thread.start()

    def send(self, message: Any) -> None:
        self.to_server.write(json.dumps(message).encode() + b"\n")

    def receive(self) -> Any:
        return json.loads(self.lines.get(timeout=WAIT_S))

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.receive()

    def close(self) -> None:
        self.to_server.close()
        for thread in self.threads:
            thread.join(WAIT_S)
        self.from_server.close()


def modern(params: dict[str, Any], *, elicitation: bool = True) -> dict[str, Any]:
    capabilities = {"elicitation": {"form": {}}} if elicitation else {}
    return {**params, "_meta": {ENVELOPE_VERSION: "2026-07-28", ENVELOPE_CAPABILITIES: capabilities}}


def tool_error(response: dict[str, Any]) -> dict[str, Any]:
    return json.loads(response["result"]["content"][0]["text"])["error"]


ACCEPT = {"confirm": {"action": "accept", "content": {"confirm": True}}}


class ModernEraApprovalTest(unittest.TestCase):
    def setUp(self) -> None:
        self.runs: list[str] = []
        self.pipe = GatewayPipe(build_registry(self.runs))
        self.addCleanup(self.pipe.close)

    def call(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        elicitation = extra.pop("elicitation", True)
        return self.pipe.request("tools/call", modern({"name": name, "arguments": arguments, **extra},
                                                      elicitation=elicitation))

    def test_a_call_that_needs_approval_is_input_required_quoting_exactly_that_call(self) -> None:
        result = self.call("transfer", TRANSFER)["result"]
        self.assertEqual(result["resultType"], "input_required")
        request = result["inputRequests"]["confirm"]
        self.assertEqual(request["method"], "elicitation/create")
        self.assertEqual(request["params"]["mode"], "form")
        self.assertIn("acc-1", request["params"]["message"])
        self.assertIn("ada", request["params"]["message"])
        self.assertEqual(request["params"]["requestedSchema"]["properties"]["confirm"]["type"], "boolean")
        self.assertIsInstance(result["requestState"], str)
        self.assertEqual(self.runs, [])

    def test_the_confirmed_retry_runs_once_and_other_arguments_are_asked_again(self) -> None:
        state = self.call("transfer", TRANSFER)["result"]["requestState"]
        changed = self.call("transfer", {**TRANSFER, "amount": 4000}, inputResponses=ACCEPT, requestState=state)
        self.assertEqual(changed["result"]["resultType"], "input_required")
        ran = self.call("transfer", TRANSFER, inputResponses=ACCEPT, requestState=state)
        self.assertEqual(ran["result"]["structuredContent"], {"moved": 40})
        again = self.call("transfer", TRANSFER, inputResponses=ACCEPT, requestState=state)
        self.assertEqual(again["result"]["structuredContent"], {"moved": 40})  # the receipt answers
        self.assertEqual(self.runs, ["transfer"])

    def test_a_single_use_confirmation_replayed_is_approval_used(self) -> None:
        state = self.call("report", {"topic": "q3"})["result"]["requestState"]
        first = self.call("report", {"topic": "q3"}, inputResponses=ACCEPT, requestState=state)
        self.assertFalse(first["result"]["isError"], first)
        replay = self.call("report", {"topic": "q3"}, inputResponses=ACCEPT, requestState=state)
        self.assertEqual(tool_error(replay)["code"], "approval_used")
        self.assertEqual(self.runs, ["report"])

    def test_a_forged_or_tampered_request_state_grants_nothing(self) -> None:
        state = self.call("transfer", TRANSFER)["result"]["requestState"]
        payload, mac = state.split(".")
        for forged in (payload + "." + "0" * len(mac), "e30." + mac, "not-a-state", 7):
            answer = self.call("transfer", TRANSFER, inputResponses=ACCEPT, requestState=forged)
            self.assertEqual(answer["result"]["resultType"], "input_required", forged)
        self.assertEqual(self.runs, [])

    def test_declining_is_approval_declined_and_nothing_runs(self) -> None:
        state = self.call("transfer", TRANSFER)["result"]["requestState"]
        for answer in ({"action": "decline"}, {"action": "accept", "content": {"confirm": False}}):
            declined = self.call("transfer", TRANSFER, inputResponses={"confirm": answer}, requestState=state)
            error = tool_error(declined)
            self.assertEqual(error["code"], "approval_declined")
            self.assertEqual(error["next_action"], "stop")
        self.assertEqual(self.runs, [])

    def test_a_client_without_elicitation_gets_the_approval_request(self) -> None:
        error = tool_error(self.call("transfer", TRANSFER, elicitation=False))
        self.assertEqual(error["code"], "approval_required")
        self.assertEqual(error["details"]["tool"], "transfer")

    def test_a_hidden_tool_never_asks_and_is_answered_like_an_unknown_one(self) -> None:
        hidden = self.call("admin_reset", {})
        unknown = self.call("no_such_tool", {})
        self.assertEqual(hidden["error"]["code"], unknown["error"]["code"])
        self.assertEqual(hidden["error"]["message"], unknown["error"]["message"])
        self.assertEqual(self.runs, [])

    def test_an_approval_never_grants_a_permission(self) -> None:
        state = self.call("transfer", TRANSFER)["result"]["requestState"]
        answer = self.call("admin_reset", {}, inputResponses=ACCEPT, requestState=state)
        self.assertEqual(answer["error"]["message"], "Unknown tool")
        self.assertEqual(self.runs, [])


class HandshakeEraApprovalTest(unittest.TestCase):
    def setUp(self) -> None:
        self.runs: list[str] = []
        self.pipe = GatewayPipe(build_registry(self.runs))
        self.addCleanup(self.pipe.close)

    def initialize(self, capabilities: dict[str, Any]) -> None:
        self.pipe.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities})
        self.pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def start_transfer(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
                        "params": {"name": "transfer", "arguments": TRANSFER}})

    def test_the_user_is_asked_with_an_elicitation_and_the_call_runs_once_confirmed(self) -> None:
        self.initialize({"elicitation": {}})
        self.start_transfer()
        asked = self.pipe.receive()
        self.assertEqual(asked["method"], "elicitation/create")
        self.assertIn("acc-1", asked["params"]["message"])
        self.assertEqual(self.runs, [])
        self.pipe.send({"jsonrpc": "2.0", "id": asked["id"], "result": ACCEPT["confirm"]})
        answer = self.pipe.receive()
        self.assertEqual(answer["id"], "call-1")
        self.assertEqual(answer["result"]["structuredContent"], {"moved": 40})
        self.assertEqual(self.runs, ["transfer"])

    def test_a_declined_elicitation_is_approval_declined(self) -> None:
        self.initialize({"elicitation": {}})
        self.start_transfer()
        asked = self.pipe.receive()
        self.pipe.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}})
        self.assertEqual(tool_error(self.pipe.receive())["code"], "approval_declined")
        self.assertEqual(self.runs, [])

    def test_a_call_cancelled_while_its_user_is_asked_stops_waiting_and_frees_its_run_slot(self) -> None:
        self.initialize({"elicitation": {}})
        asked = []
        for number in range(4):  # as many as the run slots: each waits for its user's answer
            self.pipe.send({"jsonrpc": "2.0", "id": f"call-{number}", "method": "tools/call",
                            "params": {"name": "transfer", "arguments": dict(TRANSFER, request_id=f"t-{number}")}})
            asked.append(self.pipe.receive())
        for number in range(4):
            self.pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"call-{number}"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "next", "method": "tools/call",
                        "params": {"name": "report", "arguments": {"topic": "q3"}}})
        following = self.pipe.receive()  # (on the old code, no run slot for CONFIRM_WAIT_S: nothing within WAIT_S)
        self.assertEqual(following["method"], "elicitation/create")
        self.assertIn("report", following["params"]["message"])
        for question in asked:  # answers that come after the cancel approve nothing
            self.pipe.send({"jsonrpc": "2.0", "id": question["id"], "result": ACCEPT["confirm"]})
        self.pipe.send({"jsonrpc": "2.0", "id": following["id"], "result": {"action": "decline"}})
        self.assertEqual(self.pipe.receive()["id"], "next")
        self.assertEqual(self.runs, [])

    def test_the_end_of_input_ends_a_wait_for_the_users_answer_as_not_approved(self) -> None:
        self.initialize({"elicitation": {}})
        self.start_transfer()
        self.assertEqual(self.pipe.receive()["method"], "elicitation/create")
        self.pipe.to_server.close()  # the client is gone: nobody can answer
        answer = self.pipe.receive()  # (on the old code, after CONFIRM_WAIT_S: nothing within WAIT_S)
        self.assertEqual(answer["id"], "call-1")
        self.assertEqual(tool_error(answer)["code"], "approval_required")
        self.pipe.threads[0].join(WAIT_S)
        self.assertFalse(self.pipe.threads[0].is_alive())  # the server has stopped
        self.assertEqual(self.runs, [])

    def test_without_the_elicitation_capability_the_approval_required_error_is_answered(self) -> None:
        self.initialize({})
        self.start_transfer()
        self.assertEqual(tool_error(self.pipe.receive())["code"], "approval_required")
        self.assertEqual(self.runs, [])


class CancelledCallsTest(unittest.TestCase):
    def test_calls_cancelled_before_they_start_keep_nothing_of_their_request(self) -> None:
        # Each tools/call's params waited in the gateway's rounds for its answer; a call cancelled while
        # it waited for a run slot never got one, and its params (up to the message limit) stayed for the
        # session's life: 12 waves of 56 such calls took the process from 29 MB to 1.8 GB.
        import agent_lab.gateway as gateway

        servers: list[Any] = []
        real_init = gateway._GatewayServer.__init__

        def keep(server: Any, *args: Any, **kwargs: Any) -> None:
            real_init(server, *args, **kwargs)
            servers.append(server)

        release = threading.Event()
        registry = build_registry([])
        registry.register(ToolSpec(name="hold", description="Wait.", required_permission="report:read",
                                   input_schema={"type": "object"}), lambda arguments: release.wait(WAIT_S) and {})
        registry.register(ToolSpec(name="echo", description="Echo.", required_permission="report:read",
                                   input_schema={"type": "object"}), lambda arguments: {})
        with mock.patch.object(gateway._GatewayServer, "__init__", keep):
            pipe = GatewayPipe(registry)
            self.addCleanup(pipe.close)
            pipe.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for number in range(8):  # more than the run slots: the calls after them wait
            pipe.send({"jsonrpc": "2.0", "id": f"hold-{number}", "method": "tools/call",
                       "params": {"name": "hold", "arguments": {}}})
        for number in range(20):
            pipe.send({"jsonrpc": "2.0", "id": f"echo-{number}", "method": "tools/call",
                       "params": {"name": "echo", "arguments": {}, "bulk": ["x" * 1000] * 10}})
            pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"echo-{number}"}})
        release.set()
        held = {f"hold-{number}" for number in range(8)}
        while held:  # the held calls answer (a call over the pending limit is answered busy at once)
            held.discard(pipe.receive()["id"])
        (server,) = servers
        deadline = time.monotonic() + WAIT_S
        while server.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual((server.in_flight, server.rounds), ({}, {}))


class ReceiptsSpecTest(unittest.TestCase):
    def test_memory_sqlite_and_bad_specs(self) -> None:
        self.assertIsNone(open_receipts(None))
        self.assertIsNone(open_receipts("memory"))
        with tempfile.TemporaryDirectory() as scratch:
            store = open_receipts(f"sqlite:{scratch}/receipts.db")
            self.assertEqual(type(store).__name__, "SqliteReceiptStore")
            store.close()
        for bad in ("sqlite:", "redis://x", "receipts.db"):
            with self.assertRaises(GatewayError):
                open_receipts(bad)


class UpstreamTest(unittest.TestCase):
    def test_two_upstreams_listing_one_name_are_namespaced(self) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            server = f"{sys.executable} {REPO_ROOT / 'tests' / 'mcp_hostile_server.py'} well-behaved {scratch}"
            with redirect_stderr(io.StringIO()):
                registry = open_gateway([server, server])
            with registry:
                names = set(registry.names())
        self.assertIn("hostile-well-behaved.echo", names)
        self.assertIn("hostile-well-behaved_2.echo", names)
        self.assertNotIn("echo", names)

    def test_one_upstream_keeps_its_names(self) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            server = f"{sys.executable} {REPO_ROOT / 'tests' / 'mcp_hostile_server.py'} well-behaved {scratch}"
            with open_gateway([server]) as registry:
                self.assertIn("echo", set(registry.names()))


class CommandLineTest(unittest.TestCase):
    def run_lab(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "run_lab.py", "serve-mcp", *args], cwd=str(REPO_ROOT),
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    def test_gateway_flags_without_an_upstream_are_refused(self) -> None:
        for flag in ("--policy", "--lock", "--receipts"):
            done = self.run_lab(flag, "x.json")
            self.assertEqual(done.returncode, 2)
            self.assertIn("--upstream", done.stderr)
            self.assertNotIn("Traceback", done.stderr)

    def test_a_bad_receipts_spec_and_a_lab_with_an_upstream_are_refused(self) -> None:
        done = self.run_lab("--upstream", f"{sys.executable} tests/mcp_hostile_server.py", "--receipts", "redis://x")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--receipts", done.stderr)
        done = self.run_lab("--upstream", "x", "--lab", "y:z")
        self.assertEqual(done.returncode, 2)
        self.assertNotIn("Traceback", done.stderr)


if __name__ == "__main__":
    unittest.main()
