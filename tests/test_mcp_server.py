"""The MCP stdio server speaks JSON-RPC 2.0 as the MCP specification says, and every tools/call goes
through the full Registry.invoke pipeline as the server's own actor.

Most tests run `agent_lab.mcp.serve` in a thread over OS pipes (bytes in, bytes out, exactly as a
client sees it); the last class spawns `python run_lab.py serve-mcp` to check the real process.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import unittest
from pathlib import Path
from typing import Any

from agent_lab import Actor, Approval, Effect, ToolCall, ToolSpec
from agent_lab.mcp import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_VERSION,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    serve,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 10.0  # generous bound on one answer; a healthy server answers in milliseconds
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}

ACTOR = Actor(id="agent-1", tenant="acme", permissions={"notes.read", "notes.write"})

NOTE_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "text": {"type": "string"}},
    "required": ["id", "text"],
    "additionalProperties": False,
}


def build_registry(*, extra_tools: int = 0, gate: threading.Event | None = None) -> Any:
    """A tiny registry: a read tool, a write tool that needs approval, a slow tool, and padding tools."""
    from agent_lab.registry import Registry

    registry = Registry()
    registry.register(
        ToolSpec(
            name="notes.get",
            description="Read one note by id.",
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "string", "minLength": 1}},
                "required": ["id"],
                "additionalProperties": False,
            },
            output_schema=NOTE_OUTPUT_SCHEMA,
            required_permission="notes.read",
        ),
        lambda arguments: {"id": arguments["id"], "text": "hello"},
    )
    registry.register(
        ToolSpec(
            name="notes.delete",
            description="Delete one note.",
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "string"}, "action_id": {"type": "string"}},
                "required": ["id", "action_id"],
                "additionalProperties": False,
            },
            required_permission="notes.write",
            effect=Effect.DESTRUCTIVE,
            approval="always",
            idempotency_key="action_id",
        ),
        lambda arguments: {"deleted": arguments["id"]},
    )

    def wait_for_gate(arguments: dict) -> dict:
        if gate is not None:
            gate.wait(WAIT_S)
        return {"done": True}

    registry.register(
        ToolSpec(
            name="slow",
            description="Waits until the test lets it finish.",
            input_schema={"type": "object"},
            timeout_ms=WAIT_S * 1000,
        ),
        wait_for_gate,
    )
    for index in range(extra_tools):
        registry.register(
            ToolSpec(
                name=f"pad.{index:03d}", description="Padding for pagination.", input_schema={"type": "object"}
            ),
            lambda arguments: {},
        )
    return registry


class Pipe:
    """A client's view of a server running in a thread: newline-delimited JSON both ways, over OS pipes."""

    def __init__(self, registry: Any, **options: Any) -> None:
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        self._to_server = os.fdopen(to_server_w, "wb", buffering=0)
        self._from_server = os.fdopen(from_server_r, "rb")
        server_in = os.fdopen(to_server_r, "rb")
        server_out = os.fdopen(from_server_w, "wb")
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.exit_code: int | None = None
        self._next_id = 0

        def run() -> None:
            try:
                self.exit_code = serve(registry, actor=ACTOR, stdin=server_in, stdout=server_out, **options)
            finally:
                server_out.close()
                server_in.close()

        def pump() -> None:
            for line in self._from_server:
                self.lines.put(line)

        self._server = threading.Thread(target=run, daemon=True)
        self._reader = threading.Thread(target=pump, daemon=True)
        self._server.start()
        self._reader.start()

    def send_raw(self, data: bytes) -> None:
        self._to_server.write(data)

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode("utf-8") + b"\n")

    def receive(self) -> Any:
        line = self.lines.get(timeout=WAIT_S)
        assert line.endswith(b"\n") and b"\n" not in line[:-1], "one message per line"
        return json.loads(line)

    def nothing_more(self, wait_s: float = 0.2) -> bool:
        try:
            self.lines.get(timeout=wait_s)
        except queue.Empty:
            return True
        return False

    def request(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        response = self.receive()
        assert response.get("id") == self._next_id, response
        return response

    def notify(self, method: str, params: dict | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(self, version: str = LATEST_VERSION) -> dict:
        response = self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        )
        self.notify("notifications/initialized")
        return response

    def close(self) -> int | None:
        self._to_server.close()
        self._server.join(WAIT_S)
        self._reader.join(WAIT_S)
        self._from_server.close()
        return self.exit_code


class ServerTestCase(unittest.TestCase):
    registry_options: dict[str, Any] = {}
    serve_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.gate = threading.Event()
        self.registry = build_registry(gate=self.gate, **self.registry_options)
        self.pipe = Pipe(self.registry, **self.serve_options)

    def tearDown(self) -> None:
        self.gate.set()
        self.pipe.close()
        self.registry.close()

    def assertError(self, response: dict, code: int) -> None:
        self.assertNotIn("result", response)
        self.assertEqual(response["error"]["code"], code, response)
        self.assertIsInstance(response["error"]["message"], str)


class HandshakeTest(ServerTestCase):
    def test_each_supported_version_is_echoed_back(self) -> None:
        for version in HANDSHAKE_VERSIONS:
            with self.subTest(version=version):
                pipe = Pipe(self.registry)
                try:
                    result = pipe.initialize(version)["result"]
                    self.assertEqual(result["protocolVersion"], version)
                finally:
                    pipe.close()

    def test_an_unsupported_version_gets_the_latest_we_speak(self) -> None:
        for asked in ("2024-11-05", "1999-01-01", "2026-07-28"):
            with self.subTest(asked=asked):
                pipe = Pipe(self.registry)
                try:
                    self.assertEqual(pipe.initialize(asked)["result"]["protocolVersion"], LATEST_VERSION)
                finally:
                    pipe.close()

    def test_initialize_declares_tools_and_names_the_server(self) -> None:
        result = self.pipe.initialize()["result"]
        self.assertEqual(result["capabilities"], {"tools": {"listChanged": False}})
        self.assertEqual(result["serverInfo"]["name"], "agent-lab")
        self.assertIsInstance(result["serverInfo"]["version"], str)

    def test_initialize_without_a_protocol_version_is_invalid_params(self) -> None:
        self.assertError(self.pipe.request("initialize", {"capabilities": {}}), INVALID_PARAMS)

    def test_a_second_initialize_is_refused(self) -> None:
        self.pipe.initialize()
        self.assertError(self.pipe.request("initialize", {"protocolVersion": LATEST_VERSION}), INVALID_REQUEST)

    def test_a_request_before_initialize_is_refused(self) -> None:
        self.assertError(self.pipe.request("tools/list"), INVALID_REQUEST)
        self.assertError(
            self.pipe.request("tools/call", {"name": "notes.get", "arguments": {"id": "n1"}}), INVALID_REQUEST
        )

    def test_ping_works_before_and_after_initialize(self) -> None:
        self.assertEqual(self.pipe.request("ping")["result"], {})
        self.pipe.initialize()
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_end_of_input_stops_the_server_cleanly(self) -> None:
        self.pipe.initialize()
        self.assertEqual(self.pipe.close(), 0)


class JsonRpcTest(ServerTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.pipe.initialize()

    def test_malformed_json_gets_a_parse_error_and_the_server_keeps_serving(self) -> None:
        self.pipe.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": }\n')
        first = self.pipe.receive()
        self.assertError(first, PARSE_ERROR)
        self.assertIsNone(first["id"])
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_invalid_utf8_is_a_parse_error(self) -> None:
        self.pipe.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "ping\xff"}\n')
        self.assertError(self.pipe.receive(), PARSE_ERROR)
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_a_message_that_repeats_a_key_is_a_parse_error_and_nothing_runs(self) -> None:
        self.pipe.initialize()
        ran: list[str] = []
        self.registry.register(
            ToolSpec(name="spy", description="Counts its runs.", input_schema={"type": "object"}),
            lambda arguments: ran.append("spy") or {},
        )
        for line in (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.get","name":"spy"}}',
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"spy","arguments":{"a":1,"a":2}}}',
            b'{"jsonrpc":"2.0","id":3,"id":4,"method":"tools/call","params":{"name":"spy"}}',
        ):
            self.pipe.send_raw(line + b"\n")
            refused = self.pipe.receive()
            self.assertError(refused, PARSE_ERROR)
            self.assertIsNone(refused["id"])
            self.assertIn("repeats a key", refused["error"]["message"])
        self.assertEqual(self.pipe.request("ping")["result"], {})
        self.assertEqual(ran, [])

    def test_each_kind_of_unreadable_line_says_what_is_wrong(self) -> None:
        for line, says in (
            (b'{"jsonrpc":"2.0","id":1,"method":"ping\xff"}', "UTF-8"),
            (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
             "nested too deeply"),
            (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":NaN}}', "not valid JSON"),
        ):
            self.pipe.send_raw(line + b"\n")
            refused = self.pipe.receive()
            self.assertError(refused, PARSE_ERROR)
            self.assertIn(says, refused["error"]["message"])

    def test_an_unknown_method_is_method_not_found(self) -> None:
        self.assertError(self.pipe.request("resources/list"), METHOD_NOT_FOUND)

    def test_a_message_that_is_not_a_request_is_invalid_request_with_null_id(self) -> None:
        for message in (1, "ping", {"jsonrpc": "2.0", "id": 5}, {"jsonrpc": "1.0", "id": 5, "method": "ping"}):
            with self.subTest(message=message):
                self.pipe.send(message)
                response = self.pipe.receive()
                self.assertError(response, INVALID_REQUEST)

    def test_a_bad_id_is_invalid_request(self) -> None:
        for bad_id in (None, True, 1.5, [1], {}):
            with self.subTest(bad_id=bad_id):
                self.pipe.send({"jsonrpc": "2.0", "id": bad_id, "method": "ping"})
                response = self.pipe.receive()
                self.assertError(response, INVALID_REQUEST)
                self.assertIsNone(response["id"])

    def test_params_that_are_not_an_object_are_invalid_params(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [1, 2]})
        response = self.pipe.receive()
        self.assertError(response, INVALID_PARAMS)
        self.assertEqual(response["id"], 7)

    def test_notifications_get_no_response_even_when_unknown(self) -> None:
        self.pipe.notify("notifications/whatever")
        self.pipe.notify("tools/list")
        self.assertTrue(self.pipe.nothing_more())

    def test_a_notification_with_malformed_params_gets_no_response(self) -> None:
        for params in ([1], None, "bar", 3):
            with self.subTest(params=params):
                self.pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        self.assertEqual(self.pipe.request("ping")["result"], {})  # the first line back answers the ping

    def test_batches_are_refused_after_2025_06_18(self) -> None:
        self.pipe.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        response = self.pipe.receive()
        self.assertError(response, INVALID_REQUEST)
        self.assertIsNone(response["id"])

    def test_an_oversized_message_is_refused_and_the_server_keeps_serving(self) -> None:
        from agent_lab.mcp import MAX_MESSAGE_BYTES

        padding = "x" * (MAX_MESSAGE_BYTES + 10)
        self.pipe.send({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"padding": padding}})
        self.assertError(self.pipe.receive(), INVALID_REQUEST)
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_a_response_from_the_client_is_ignored(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": 99, "result": {}})
        self.assertTrue(self.pipe.nothing_more())
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_string_ids_are_echoed(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "abc", "method": "ping"})
        self.assertEqual(self.pipe.receive(), {"jsonrpc": "2.0", "id": "abc", "result": {}})


class BatchTest(ServerTestCase):
    def test_2025_03_26_answers_a_batch_with_an_array(self) -> None:
        self.pipe.initialize("2025-03-26")
        self.pipe.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/whatever"},
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "notes.get", "arguments": {"id": "n1"}},
                },
                {"jsonrpc": "2.0", "id": 3, "method": "nope"},
            ]
        )
        responses = {response["id"]: response for response in self.pipe.receive()}
        self.assertEqual(sorted(responses), [1, 2, 3])
        self.assertEqual(responses[1]["result"], {})
        self.assertFalse(responses[2]["result"]["isError"])
        self.assertError(responses[3], METHOD_NOT_FOUND)

    def test_a_batch_with_a_running_call_leaves_ping_and_cancellation_answered_meanwhile(self) -> None:
        self.pipe.initialize("2025-03-26")
        self.pipe.send([
            {"jsonrpc": "2.0", "id": "b-slow", "method": "tools/call", "params": {"name": "slow"}},
            {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"},
        ])
        self.pipe.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        self.assertEqual(self.pipe.receive()["id"], "after")  # while the batch's call still runs
        self.pipe.notify("notifications/cancelled", {"requestId": "b-slow"})
        self.assertEqual(self.pipe.request("ping")["result"], {})  # the cancellation has been read
        self.gate.set()
        batch = self.pipe.receive()
        self.assertEqual([response["id"] for response in batch], ["b-ping"])  # b-slow was cancelled
        self.assertTrue(self.pipe.nothing_more())

    def test_an_empty_batch_is_invalid_request(self) -> None:
        self.pipe.initialize("2025-03-26")
        self.pipe.send([])
        self.assertError(self.pipe.receive(), INVALID_REQUEST)

    def test_initialize_in_a_batch_is_refused(self) -> None:
        self.pipe.send(
            [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}]
        )
        self.assertError(self.pipe.receive(), INVALID_REQUEST)


class ToolsListTest(ServerTestCase):
    registry_options = {"extra_tools": 7}
    serve_options = {"page_size": 4}

    def setUp(self) -> None:
        super().setUp()
        self.pipe.initialize()

    def test_pages_follow_next_cursor_until_every_tool_is_listed_once(self) -> None:
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            params = {"cursor": cursor} if cursor is not None else {}
            result = self.pipe.request("tools/list", params)["result"]
            pages += 1
            self.assertLessEqual(len(result["tools"]), 4)
            names += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        self.assertEqual(pages, 3)
        self.assertEqual(sorted(names), sorted(self.registry.names()))

    def test_a_tool_definition_carries_the_model_half_only(self) -> None:
        tools = self._all_tools()
        note = tools["notes.get"]
        self.assertEqual(note["description"], "Read one note by id.")
        self.assertEqual(note["inputSchema"]["required"], ["id"])
        self.assertEqual(note["outputSchema"], NOTE_OUTPUT_SCHEMA)
        text = json.dumps(tools)
        for runtime_field in ("notes.read", "required_permission", "idempotency_key", "timeout_ms"):
            self.assertNotIn(runtime_field, text)

    def test_an_invalid_cursor_is_invalid_params(self) -> None:
        for cursor in ("not-a-cursor", "A" * 34, 12):
            with self.subTest(cursor=cursor):
                self.assertError(self.pipe.request("tools/list", {"cursor": cursor}), INVALID_PARAMS)

    def _all_tools(self) -> dict[str, dict]:
        tools: dict[str, dict] = {}
        cursor = None
        while True:
            result = self.pipe.request("tools/list", {"cursor": cursor} if cursor else {})["result"]
            tools.update((tool["name"], tool) for tool in result["tools"])
            cursor = result.get("nextCursor")
            if cursor is None:
                return tools


class ToolsCallTest(ServerTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.pipe.initialize()

    def call(self, name: Any, arguments: Any = None) -> dict:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.pipe.request("tools/call", params)

    def test_a_read_returns_structured_content_that_matches_the_advertised_output_schema(self) -> None:
        from agent_lab.schema import Validator

        listed = {tool["name"]: tool for tool in self.pipe.request("tools/list")["result"]["tools"]}
        result = self.call("notes.get", {"id": "n1"})["result"]
        self.assertFalse(result["isError"])
        self.assertEqual(result["structuredContent"], {"id": "n1", "text": "hello"})
        self.assertEqual(Validator(listed["notes.get"]["outputSchema"]).errors(result["structuredContent"]), [])
        # As the MCP spec asks, the text block is the structured content serialized.
        self.assertEqual(json.loads(result["content"][0]["text"]), result["structuredContent"])

    def test_a_write_without_approval_is_a_tool_error_approval_required(self) -> None:
        result = self.call("notes.delete", {"id": "n1", "action_id": "a-1"})["result"]
        self.assertTrue(result["isError"])
        self.assertEqual(error_of(result)["code"], "approval_required")
        self.assertEqual(error_of(result)["next_action"], "request_approval")

    def test_bad_arguments_are_a_tool_error_invalid_arguments(self) -> None:
        result = self.call("notes.get", {"id": 42})["result"]
        self.assertTrue(result["isError"])
        self.assertEqual(error_of(result)["code"], "invalid_arguments")

    def test_a_tool_error_never_breaks_the_advertised_output_schema(self) -> None:
        # The official TypeScript client validates structuredContent against the tool's outputSchema even
        # when isError is true, and throws instead of showing the model the tool's error.
        from agent_lab.schema import Validator

        listed = {tool["name"]: tool for tool in self.pipe.request("tools/list")["result"]["tools"]}
        result = self.call("notes.get", {"id": ""})["result"]
        self.assertTrue(result["isError"])
        if "structuredContent" in result:
            self.assertEqual(Validator(listed["notes.get"]["outputSchema"]).errors(result["structuredContent"]), [])
        self.assertEqual(error_of(result)["code"], "invalid_arguments")

    def test_missing_arguments_count_as_an_empty_object(self) -> None:
        result = self.call("notes.get")["result"]
        self.assertTrue(result["isError"])
        self.assertEqual(error_of(result)["code"], "invalid_arguments")

    def test_an_unknown_tool_is_a_protocol_error(self) -> None:
        self.assertError(self.call("notes.gett", {"id": "n1"}), INVALID_PARAMS)

    def test_a_call_without_a_name_or_with_non_object_arguments_is_a_protocol_error(self) -> None:
        self.assertError(self.pipe.request("tools/call", {"arguments": {}}), INVALID_PARAMS)
        self.assertError(self.call(7, {}), INVALID_PARAMS)
        self.assertError(self.call("notes.get", [1]), INVALID_PARAMS)
        self.assertError(self.call("notes.get", "{}"), INVALID_PARAMS)

    def test_concurrent_calls_each_get_exactly_one_response(self) -> None:
        ids = [f"call-{index}" for index in range(24)]
        for request_id in ids:
            params = {"name": "notes.get", "arguments": {"id": request_id}}
            self.pipe.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        responses = [self.pipe.receive() for _ in ids]
        self.assertEqual(sorted(response["id"] for response in responses), sorted(ids))
        for response in responses:
            self.assertEqual(response["result"]["structuredContent"]["id"], response["id"])
        self.assertTrue(self.pipe.nothing_more())

    def test_an_id_already_running_is_refused_and_the_running_call_still_answers_once(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "dup", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "dup", "method": "tools/call", "params": {"name": "slow"}})
        refused = self.pipe.receive()
        self.assertEqual(refused["id"], "dup")
        self.assertError(refused, INVALID_REQUEST)
        self.gate.set()
        finished = self.pipe.receive()
        self.assertEqual(finished["id"], "dup")
        self.assertFalse(finished["result"]["isError"])
        self.assertTrue(self.pipe.nothing_more())

    def test_ping_is_answered_while_a_call_is_running(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        self.assertEqual(self.pipe.receive()["id"], "ping-1")
        self.gate.set()
        finished = self.pipe.receive()
        self.assertEqual(finished["id"], "slow-1")
        self.assertFalse(finished["result"]["isError"])


class PendingLimitTest(ServerTestCase):
    serve_options = {"max_workers": 1}

    def setUp(self) -> None:
        super().setUp()
        self.pipe.initialize()

    def test_calls_beyond_the_pending_limit_are_refused_at_once_and_the_server_keeps_serving(self) -> None:
        from agent_lab.mcp import MAX_PENDING_CALLS, SERVER_BUSY

        ids = [f"slow-{index}" for index in range(MAX_PENDING_CALLS)]
        for request_id in ids:  # one runs, the rest wait for the single worker
            self.pipe.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "one-too-many", "method": "tools/call", "params": {"name": "slow"}})
        refused = self.pipe.receive()
        self.assertEqual(refused["id"], "one-too-many")
        self.assertError(refused, SERVER_BUSY)
        self.assertEqual(self.pipe.request("ping")["result"], {})
        self.gate.set()
        answered = [self.pipe.receive()["id"] for _ in ids]
        self.assertEqual(sorted(answered), sorted(ids))


class DeadlineFromArrivalTest(ServerTestCase):
    """A call's deadline runs from its arrival, including the time it waits for a worker."""

    serve_options = {"max_workers": 1}  # the slow call holds the only worker until the gate opens

    def setUp(self) -> None:
        super().setUp()
        self.ran: list[str] = []
        self.registry.register(
            ToolSpec(name="quick", description="Answers at once.", input_schema={"type": "object"}, timeout_ms=50),
            lambda arguments: self.ran.append("quick") or {},
        )
        self.registry.register(
            ToolSpec(name="count", description="Counts its runs.", input_schema={"type": "object"},
                     timeout_ms=WAIT_S * 1000),
            lambda arguments: self.ran.append(arguments.get("tag", "")) or {},
        )
        self.pipe.initialize()

    def test_a_call_waiting_for_a_worker_is_answered_at_its_deadline_not_when_a_worker_frees(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "quick-1", "method": "tools/call", "params": {"name": "quick"}})
        answered = self.pipe.receive()  # while slow-1 still holds the worker
        self.assertEqual(answered["id"], "quick-1")
        self.assertTrue(answered["result"]["isError"])
        error = json.loads(answered["result"]["content"][0]["text"])["error"]
        self.assertEqual(error["code"], "deadline_exceeded")
        self.assertEqual(self.ran, [])  # it never ran late
        self.gate.set()
        finished = self.pipe.receive()
        self.assertEqual(finished["id"], "slow-1")
        self.assertFalse(finished["result"]["isError"])

    def test_a_hidden_tool_is_refused_at_once_like_an_unknown_one_while_every_worker_is_busy(self) -> None:
        # The actor lacks "vault.open"'s permission: the tool is hidden, and its long timeout must not
        # decide when (or whether) its refusal comes, or waiting would tell the client that it exists.
        self.registry.register(
            ToolSpec(name="vault.open", description="Open the vault.", input_schema={"type": "object"},
                     required_permission="vault.admin", timeout_ms=WAIT_S * 1000),
            lambda arguments: self.ran.append("vault") or {},
        )
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "hidden", "method": "tools/call", "params": {"name": "vault.open"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "unknown", "method": "tools/call", "params": {"name": "vault.opem"}})
        answers = {answer["id"]: answer for answer in (self.pipe.receive(), self.pipe.receive())}  # slow-1 still runs
        self.assertEqual(sorted(answers), ["hidden", "unknown"])
        for answer in answers.values():
            self.assertError(answer, INVALID_PARAMS)
            self.assertEqual((answer["error"]["message"], answer["error"]["data"]["code"]), ("Unknown tool", "tool_not_found"))
        self.assertEqual(answers["hidden"]["error"]["data"]["details"], answers["unknown"]["error"]["data"]["details"])
        self.assertEqual(self.ran, [])
        self.gate.set()
        self.assertEqual(self.pipe.receive()["id"], "slow-1")

    def test_a_call_cancelled_while_waiting_for_a_worker_never_runs(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.send({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call",
                        "params": {"name": "count", "arguments": {"tag": "cancelled"}}})
        self.pipe.notify("notifications/cancelled", {"requestId": "c-1"})
        self.assertEqual(self.pipe.request("ping")["result"], {})  # the cancellation has been read
        self.gate.set()
        self.assertEqual(self.pipe.receive()["id"], "slow-1")
        self.assertEqual(self.pipe.close(), 0)  # every call has finished
        self.assertEqual(self.ran, [])
        self.assertTrue(self.pipe.nothing_more())


class FailingApprovalSourceTest(unittest.TestCase):
    """An approval source that raises grants no approval, and its exception text never reaches a log."""

    SECRET = "pin-5f8e-2c91"

    def test_a_raising_approval_source_grants_nothing_and_its_message_is_not_logged(self) -> None:
        from agent_lab.registry import Registry

        def lookup(call: ToolCall, actor: Actor) -> Approval | None:
            raise RuntimeError(f"no approval on file for {call!r}")  # quotes the secret argument

        with Registry() as registry:
            ran: list[str] = []
            registry.register(
                ToolSpec(name="vault.open", description="Open the vault.", input_schema={
                    "type": "object", "properties": {"pin": {"type": "string"}}, "required": ["pin"]},
                    required_permission="notes.write", effect=Effect.WRITE, approval="always", redact=("pin",)),
                lambda arguments: ran.append("opened") or {},
            )
            with self.assertLogs("agent_lab", level="DEBUG") as logs:
                pipe = Pipe(registry, approvals=lookup)
                pipe.initialize()
                response = pipe.request("tools/call", {"name": "vault.open", "arguments": {"pin": self.SECRET}})
                pipe.close()
        self.assertTrue(response["result"]["isError"], response)  # a tool result, not -32603
        error = json.loads(response["result"]["content"][0]["text"])["error"]
        self.assertEqual(error["code"], "approval_required")
        self.assertEqual(ran, [])
        self.assertTrue(any("approval source failed" in line for line in logs.output))
        for line in logs.output:
            self.assertNotIn(self.SECRET, line)


class RedactedOutputTest(unittest.TestCase):
    """structuredContent always fits the outputSchema the server advertised for the tool, even when
    redaction masked part of it (clients check it against that schema)."""

    def test_structured_content_fits_the_advertised_output_schema_when_a_field_is_redacted(self) -> None:
        from agent_lab.registry import Registry
        from agent_lab.schema import Validator

        output_schema = {
            "type": "object",
            "properties": {"pin": {"type": "string", "pattern": "^[0-9]{4}$"}, "tries": {"type": "integer"}},
            "required": ["pin", "tries"],
            "additionalProperties": False,
        }
        with Registry() as registry:
            registry.register(
                ToolSpec(name="card.pin", description="Show the card's PIN.", input_schema={"type": "object"},
                         output_schema=output_schema, required_permission="notes.read", redact=("pin",)),
                lambda arguments: {"pin": "4821", "tries": 3},
            )
            pipe = Pipe(registry)
            pipe.initialize()
            [tool] = pipe.request("tools/list")["result"]["tools"]
            result = pipe.request("tools/call", {"name": "card.pin", "arguments": {}})["result"]
            pipe.close()
        self.assertFalse(result["isError"], result)
        self.assertNotIn("4821", json.dumps(result))
        self.assertEqual(result["structuredContent"]["tries"], 3)
        if "outputSchema" in tool:
            self.assertTrue(Validator(tool["outputSchema"]).is_valid(result["structuredContent"]), (tool, result))


class CancellationTest(ServerTestCase):
    serve_options = {"max_workers": 1}  # one worker: a call's response is written before the next call starts

    def setUp(self) -> None:
        super().setUp()
        self.pipe.initialize()

    def test_a_cancelled_call_gets_no_response(self) -> None:
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "slow"}})
        self.pipe.notify("notifications/cancelled", {"requestId": "slow-1", "reason": "user stopped"})
        self.pipe.send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        self.assertEqual(self.pipe.receive()["id"], "ping-1")
        self.gate.set()
        self.pipe.send({"jsonrpc": "2.0", "id": "slow-2", "method": "tools/call", "params": {"name": "slow"}})
        self.assertEqual(self.pipe.receive()["id"], "slow-2")  # slow-1 finished first and sent nothing

    def test_cancelling_an_unknown_or_finished_request_is_ignored(self) -> None:
        self.pipe.notify("notifications/cancelled", {"requestId": "never-sent"})
        self.pipe.notify("notifications/cancelled", {})
        self.assertEqual(self.pipe.request("ping")["result"], {})


class ApprovalSourceTest(ServerTestCase):
    def setUp(self) -> None:
        self.approved_actor: Actor | None = None  # None: the actor the server serves

        def approve_deletes(call: ToolCall, actor: Actor) -> Approval | None:
            if call.name != "notes.delete":
                return None
            return self.registry.approval_for(call, actor=self.approved_actor or actor, approver="reviewer")

        self.serve_options = {"approvals": approve_deletes}
        super().setUp()
        self.pipe.initialize()

    def test_an_approval_from_the_server_configuration_lets_the_write_run(self) -> None:
        result = self.pipe.request(
            "tools/call", {"name": "notes.delete", "arguments": {"id": "n1", "action_id": "a-1"}}
        )["result"]
        self.assertFalse(result["isError"])
        self.assertEqual(result["structuredContent"], {"deleted": "n1"})

    def test_an_approval_the_source_made_for_another_actor_of_the_tenant_does_not_let_the_write_run(self) -> None:
        # Issue 20, item 10: an approval is bound to its actor, not only to the tenant.
        self.approved_actor = Actor(id="agent-2", tenant=ACTOR.tenant, permissions=ACTOR.permissions)
        result = self.pipe.request(
            "tools/call", {"name": "notes.delete", "arguments": {"id": "n1", "action_id": "a-2"}}
        )["result"]
        self.assertTrue(result["isError"])
        self.assertEqual(error_of(result)["code"], "approval_mismatch")


class ApprovalSourceVisibilityTest(unittest.TestCase):
    """The approval source (the application's: it may look up records or ask a person) is asked only
    about tools the server's actor may call: a hidden tool is answered like an unknown one without it."""

    def test_the_approval_source_is_never_asked_about_a_tool_the_actor_cannot_call(self) -> None:
        from agent_lab.registry import Registry

        asked: list[str] = []

        def lookup(call: ToolCall, actor: Actor) -> Approval | None:
            asked.append(call.name)
            return None

        with Registry() as registry:
            for name, permission in (("vault.wipe", "vault.admin"), ("notes.archive", "notes.write")):
                registry.register(
                    ToolSpec(name=name, description="Change notes.", input_schema={"type": "object"},
                             required_permission=permission, effect=Effect.WRITE, approval="always"),
                    lambda arguments: {},
                )
            pipe = Pipe(registry, approvals=lookup)
            pipe.initialize()
            hidden = pipe.request("tools/call", {"name": "vault.wipe", "arguments": {}})
            unknown = pipe.request("tools/call", {"name": "vault.wipx", "arguments": {}})
            visible = pipe.request("tools/call", {"name": "notes.archive", "arguments": {}})
            self.assertEqual(pipe.close(), 0)
        self.assertEqual(hidden["error"]["code"], unknown["error"]["code"])
        self.assertEqual(hidden["error"]["data"], unknown["error"]["data"])
        self.assertTrue(visible["result"]["isError"])  # approval_required: the source had none
        self.assertEqual(asked, ["notes.archive"])


class ActorTest(unittest.TestCase):
    def test_the_actor_comes_from_the_server_not_from_the_request(self) -> None:
        registry = build_registry()
        reader_only = Actor(id="reader", tenant="acme", permissions={"notes.read"})
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": LATEST_VERSION}},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "notes.delete",
                    "arguments": {"id": "n1", "action_id": "a-1"},
                    "_meta": {"actor": {"id": "root", "permissions": ["notes.write"]}},
                },
            },
        ]
        with os.fdopen(to_server_w, "wb") as feed:
            feed.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        with os.fdopen(to_server_r, "rb") as server_in, os.fdopen(from_server_w, "wb") as server_out:
            serve(registry, actor=reader_only, stdin=server_in, stdout=server_out)
        with os.fdopen(from_server_r, "rb") as output:
            responses = [json.loads(line) for line in output]
        registry.close()
        # Issue 8: a tool outside the server actor's permissions answers exactly like an unknown tool.
        self.assertNotIn("result", responses[1])
        self.assertEqual(responses[1]["error"]["code"], INVALID_PARAMS)
        self.assertEqual(responses[1]["error"]["data"]["code"], "tool_not_found")

    def test_serve_refuses_to_start_without_an_actor(self) -> None:
        with self.assertRaises(TypeError):
            serve(build_registry(), actor=None)  # type: ignore[arg-type]


class StatelessRevisionTest(ServerTestCase):
    def request(self, method: str, params: dict | None = None, meta: dict | None = None) -> dict:
        params = dict(params or {})
        params["_meta"] = dict(MODERN_META if meta is None else meta)
        return self.pipe.request(method, params)

    def test_server_discover_names_the_stateless_revision_and_the_server(self) -> None:
        result = self.request("server/discover")["result"]
        self.assertEqual(result["supportedVersions"], list(MODERN_VERSIONS))
        self.assertEqual(result["capabilities"], {"tools": {"listChanged": False}})
        self.assertEqual(result["resultType"], "complete")
        self.assertEqual(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "agent-lab")

    def test_tools_work_without_a_handshake_when_each_request_carries_its_version(self) -> None:
        listing = self.request("tools/list")["result"]
        self.assertEqual(listing["resultType"], "complete")
        self.assertIn("notes.get", [tool["name"] for tool in listing["tools"]])
        called = self.request("tools/call", {"name": "notes.get", "arguments": {"id": "n1"}})["result"]
        self.assertEqual(called["resultType"], "complete")
        self.assertEqual(called["structuredContent"], {"id": "n1", "text": "hello"})
        refused = self.request("tools/call", {"name": "notes.delete", "arguments": {"id": "n1", "action_id": "a"}})
        self.assertEqual(error_of(refused["result"])["code"], "approval_required")

    def test_an_unknown_modern_version_is_unsupported_protocol_version_with_the_supported_list(self) -> None:
        response = self.request(
            "tools/list", meta={**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        )
        self.assertError(response, UNSUPPORTED_PROTOCOL_VERSION)
        self.assertEqual(
            response["error"]["data"], {"supported": list(MODERN_VERSIONS), "requested": "2099-01-01"}
        )

    def test_a_half_built_envelope_is_invalid_params(self) -> None:
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        self.assertError(self.request("tools/list", meta=meta), INVALID_PARAMS)

    def test_server_discover_without_the_envelope_is_an_error_so_dual_era_clients_fall_back(self) -> None:
        self.assertError(self.pipe.request("server/discover"), INVALID_PARAMS)
        self.assertEqual(self.pipe.initialize()["result"]["protocolVersion"], LATEST_VERSION)

    def test_initialize_on_a_stateless_connection_names_the_versions_served(self) -> None:
        self.request("server/discover")
        response = self.pipe.request("initialize", {"protocolVersion": LATEST_VERSION})
        self.assertError(response, UNSUPPORTED_PROTOCOL_VERSION)
        self.assertEqual(response["error"]["data"]["supported"], list(MODERN_VERSIONS))

    def test_a_stateless_connection_needs_the_envelope_on_every_request_but_ping(self) -> None:
        self.request("server/discover")
        self.assertError(self.pipe.request("tools/list"), INVALID_PARAMS)
        self.assertEqual(self.pipe.request("ping")["result"], {})

    def test_the_envelope_is_refused_on_a_handshake_connection(self) -> None:
        self.pipe.initialize()
        self.assertError(self.request("tools/list"), INVALID_REQUEST)


NOISY_SERVER = """
import sys
from agent_lab import Actor, ToolSpec
from agent_lab.mcp import serve
from agent_lab.registry import Registry

def noisy(arguments):
    print("handler noise on stdout")
    return {"ok": True}

def noisy_below_python(arguments):
    import os, subprocess
    subprocess.run([sys.executable, "-c", "print('child process noise')"], check=True)
    os.write(1, b"raw fd noise\\n")
    sys.__stdout__.write("dunder stdout noise\\n")
    sys.__stdout__.flush()
    return {"ok": True}

registry = Registry()
registry.register(ToolSpec(name="noisy", description="Prints.", input_schema={"type": "object"}), noisy)
registry.register(
    ToolSpec(name="noisy_below_python", description="Writes to file descriptor 1.", input_schema={"type": "object"}),
    noisy_below_python,
)
sys.exit(serve(registry, actor=Actor(id="a", tenant="t")))
"""


class RealStdoutTest(unittest.TestCase):
    def run_noisy_server(self, tool: str) -> subprocess.CompletedProcess:
        messages = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": LATEST_VERSION}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}},
        ]
        process = subprocess.run(
            [sys.executable, "-c", NOISY_SERVER],
            cwd=REPO_ROOT,
            input=b"".join(json.dumps(message).encode() + b"\n" for message in messages),
            capture_output=True,
            timeout=60,
        )
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        responses = [json.loads(line) for line in process.stdout.splitlines()]
        self.assertEqual([response["id"] for response in responses], [1, 2])
        self.assertFalse(responses[1]["result"]["isError"])
        return process

    def test_a_handler_that_prints_cannot_corrupt_the_protocol_stream(self) -> None:
        process = self.run_noisy_server("noisy")
        self.assertIn(b"handler noise on stdout", process.stderr)

    def test_child_processes_and_raw_writes_to_fd_1_cannot_corrupt_the_protocol_stream(self) -> None:
        process = self.run_noisy_server("noisy_below_python")
        for noise in (b"child process noise", b"raw fd noise", b"dunder stdout noise"):
            self.assertIn(noise, process.stderr)


def error_of(result: dict) -> dict:
    """Our structured error inside an isError CallToolResult (its text block is the JSON model view)."""
    assert result["isError"] is True and "structuredContent" not in result, result
    return json.loads(result["content"][0]["text"])["error"]


def run_lab_available() -> bool:
    return (REPO_ROOT / "run_lab.py").exists()


@unittest.skipUnless(run_lab_available(), "run_lab.py is not in the repository yet")
class ServeMcpProcessTest(unittest.TestCase):
    """`python run_lab.py serve-mcp` as a real process: stdout carries JSON-RPC and nothing else."""

    def test_a_session_over_the_real_process_writes_only_json_rpc_to_stdout(self) -> None:
        messages = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {
                    "name": "record_ticket_followup",
                    "arguments": {"ticket_id": "T-1001", "note": "Called back.", "action_id": "act-00000001"},
                },
            },
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "get_ticket", "arguments": {"ticket_id": "1001"}},
            },
        ]
        stdin = b"".join(json.dumps(message).encode() + b"\n" for message in messages) + b"this is not json\n"
        process = subprocess.run(
            [sys.executable, "run_lab.py", "serve-mcp"],
            cwd=REPO_ROOT,
            input=stdin,
            capture_output=True,
            timeout=60,
        )
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        lines = process.stdout.splitlines()
        responses = [json.loads(line) for line in lines]
        self.assertTrue(all(response.get("jsonrpc") == "2.0" for response in responses))
        by_id = {response["id"]: response for response in responses}
        self.assertEqual(by_id[1]["result"]["protocolVersion"], LATEST_VERSION)
        self.assertTrue(by_id[2]["result"]["tools"])
        self.assertEqual(by_id[3]["error"]["code"], METHOD_NOT_FOUND)
        self.assertEqual(error_of(by_id[4]["result"])["code"], "approval_required")
        self.assertEqual(error_of(by_id[5]["result"])["code"], "invalid_arguments")
        self.assertEqual(by_id[None]["error"]["code"], PARSE_ERROR)
        self.assertEqual(len(responses), 6)


if __name__ == "__main__":
    unittest.main()
