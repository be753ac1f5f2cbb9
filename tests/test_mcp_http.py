"""`serve-mcp --http`: MCP over Streamable HTTP answers as the stdio server does, and what a client or a
web page sends cannot get around its checks.

Each test starts `McpHttpServer` in-process on a free loopback port and talks to it with `http.client`,
exactly the bytes a client sends; the last class runs the real `run_lab.py serve-mcp --http` process.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
from pathlib import Path
from typing import Any

from agent_lab import Actor, ToolSpec
from agent_lab.mcp import DEFAULT_MAX_WORKERS, INVALID_PARAMS, PARSE_ERROR, SERVER_BUSY
from agent_lab.mcp_http import HEADER_MISMATCH, HttpLimits, McpHttpServer, gateway_http_server
from agent_lab.mcp_http_answers import HELD_BYTES
from tests.test_mcp_server import ACTOR, WAIT_S, build_registry

REPO_ROOT = Path(__file__).resolve().parent.parent
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()

    @property
    def message(self) -> Any:
        return json.loads(self.body)


class HttpCase(unittest.TestCase):
    """A server per test; `post` sends one message (or raw bytes) and reads the whole answer."""

    server_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.gate = threading.Event()
        self.server = self.make_server()
        self.server.start()
        self.addCleanup(self.server.close)
        self.addCleanup(self.gate.set)  # runs first: a slow call still waiting ends before the server closes
        parts = urllib.parse.urlsplit(self.server.url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path
        self.unread: dict[socket.socket, bytes] = {}  # what `answered` read past an answer

    def make_server(self) -> McpHttpServer:
        return McpHttpServer(build_registry(gate=self.gate), actor=ACTOR, **self.server_options)

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=WAIT_S)

    def post(self, message: Any, headers: dict[str, str] | None = None, *, raw: bytes | None = None,
             method: str = "POST") -> Answer:
        connection = self.connection()
        try:
            body = raw if raw is not None else json.dumps(message).encode()
            sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            sent.update(headers or {})
            connection.request(method, self.path, body=body if method == "POST" else None, headers=sent)
            return Answer(connection.getresponse())
        finally:
            connection.close()

    def open_session(self, capabilities: dict[str, Any] | None = None) -> str:
        message = json.loads(json.dumps(INITIALIZE))
        message["params"]["capabilities"] = capabilities or {}
        answer = self.post(message)
        self.assertEqual(answer.status, 200, answer.body)
        session = answer.headers["Mcp-Session-Id"]
        self.assertEqual(self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   {"Mcp-Session-Id": session}).status, 202)
        return session

    def call(self, session: str, name: str, arguments: dict[str, Any], request_id: Any = 2) -> Answer:
        return self.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}}, {"Mcp-Session-Id": session})

    def open_post(self, message: Any, session: str) -> socket.socket:
        """A POST sent on a socket of its own, left open: the test reads from it, or hangs up."""
        sock = socket.create_connection((self.host, self.port), timeout=WAIT_S)
        sock.sendall(self.request_bytes(message, session))
        return sock

    def request_bytes(self, message: Any, session: str) -> bytes:
        """One POST of `message` in the session, as a client writes it on its connection."""
        body = json.dumps(message).encode()
        return ("\r\n".join(["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Content-Type: application/json",
                              "Accept: application/json, text/event-stream", f"Content-Length: {len(body)}",
                              f"Mcp-Session-Id: {session}"]) + "\r\n\r\n").encode() + body

    def answered(self, sock: socket.socket) -> Any:
        """The next JSON answer on a socket, (head, message); what follows it is kept for the next call."""
        received = self.unread.pop(sock, b"")
        while True:
            head, _, body = received.partition(b"\r\n\r\n")
            length = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
            if length and len(body) >= int(length[0]):
                self.unread[sock] = body[int(length[0]):]
                return head, json.loads(body[:int(length[0])])
            chunk = sock.recv(65536)
            self.assertTrue(chunk, received)
            received += chunk

    def modern_call(self, name: str, arguments: dict[str, Any], *, request_id: Any = 5,
                    headers: dict[str, str] | None = None, **extra: Any) -> Answer:
        sent = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
        sent.update(headers or {})
        params = {"name": name, "arguments": arguments, "_meta": dict(MODERN_META), **extra}
        return self.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, sent)


class HandshakeSessionTest(HttpCase):
    def test_initialize_issues_a_session_and_a_tool_call_runs_through_the_registry(self) -> None:
        session = self.open_session()
        self.assertRegex(session, r"^[A-Za-z0-9_-]{32}$")
        answer = self.call(session, "notes.get", {"id": "n-1"})
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.headers["Content-Type"], "application/json")
        self.assertEqual(answer.message["id"], 2)
        self.assertEqual(answer.message["result"]["structuredContent"], {"id": "n-1", "text": "hello"})

    def test_invalid_arguments_are_refused_as_a_tool_error(self) -> None:
        session = self.open_session()
        result = self.call(session, "notes.get", {"id": 5}).message["result"]
        self.assertTrue(result["isError"])
        self.assertEqual(json.loads(result["content"][0]["text"])["error"]["code"], "invalid_arguments")

    def test_a_write_without_approval_is_approval_required(self) -> None:
        session = self.open_session()
        result = self.call(session, "notes.delete", {"id": "n-1", "action_id": "a-1"}).message["result"]
        self.assertEqual(json.loads(result["content"][0]["text"])["error"]["code"], "approval_required")

    def test_an_unknown_tool_is_a_protocol_error(self) -> None:
        session = self.open_session()
        self.assertEqual(self.call(session, "no.such", {}).message["error"]["code"], INVALID_PARAMS)

    def test_a_request_without_a_session_is_400_and_an_unknown_session_404(self) -> None:
        self.assertEqual(self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).status, 400)
        chosen = "a-session-id-the-client-made-up"  # never adopted: only ids this server issued exist
        self.assertEqual(self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                   {"Mcp-Session-Id": chosen}).status, 404)
        self.assertEqual(self.post(INITIALIZE, {"Mcp-Session-Id": chosen}).status, 404)

    def test_delete_ends_the_session(self) -> None:
        session = self.open_session()
        self.assertEqual(self.post(None, {"Mcp-Session-Id": session}, method="DELETE").status, 204)
        self.assertEqual(self.call(session, "notes.get", {"id": "n-1"}).status, 404)
        self.assertEqual(self.post(None, {"Mcp-Session-Id": session}, method="DELETE").status, 404)

    def test_each_session_negotiates_its_own_version(self) -> None:
        old = json.loads(json.dumps(INITIALIZE))
        old["params"]["protocolVersion"] = "2025-06-18"
        first = self.post(old)
        second = self.post(INITIALIZE)
        self.assertEqual(first.message["result"]["protocolVersion"], "2025-06-18")
        self.assertEqual(second.message["result"]["protocolVersion"], "2025-11-25")
        self.assertNotEqual(first.headers["Mcp-Session-Id"], second.headers["Mcp-Session-Id"])

    def test_a_protocol_version_header_other_than_the_negotiated_one_is_refused(self) -> None:
        session = self.open_session()
        answer = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                           {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        self.assertEqual(answer.status, 400)
        ok = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                       {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        self.assertEqual(ok.status, 200)

    def test_bad_json_is_a_json_rpc_parse_error(self) -> None:
        for raw in (b"{not json", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', b"\xff\xfe"):
            answer = self.post(None, raw=raw)
            self.assertEqual(answer.status, 400, raw)
            self.assertEqual(answer.message["error"]["code"], PARSE_ERROR, raw)
            self.assertIsNone(answer.message["id"])

    def test_a_batch_is_refused(self) -> None:
        self.assertEqual(self.post([INITIALIZE]).status, 400)

    def test_get_has_no_event_stream_and_other_paths_are_404(self) -> None:
        answer = self.post(None, method="GET")
        self.assertEqual(answer.status, 405)
        self.assertIn("POST", answer.headers["Allow"])
        connection = self.connection()
        connection.request("POST", "/other", body=json.dumps(INITIALIZE), headers={"Content-Type": "application/json"})
        self.assertEqual(connection.getresponse().status, 404)
        connection.close()

    def test_a_cancelled_call_answers_its_open_post_and_the_session_goes_on(self) -> None:
        session = self.open_session()
        answers: list[Answer] = []
        caller = threading.Thread(target=lambda: answers.append(self.call(session, "slow", {}, request_id="s-1")))
        caller.start()
        while self.server.sessions[session].channel.internal_for("s-1") is None:
            caller.join(0.01)
        self.assertEqual(self.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": "s-1"}}, {"Mcp-Session-Id": session}).status, 202)
        caller.join(WAIT_S)
        self.assertEqual(answers[0].message["id"], "s-1")
        self.assertEqual(answers[0].message["error"]["message"], "Request cancelled")
        self.gate.set()
        self.assertEqual(self.call(session, "notes.get", {"id": "n-2"}).status, 200)

    def test_a_client_id_in_flight_cannot_be_reused_in_its_session(self) -> None:
        session = self.open_session()
        caller = threading.Thread(target=lambda: self.call(session, "slow", {}, request_id=9))
        caller.start()
        while self.server.sessions[session].channel.internal_for(9) is None:
            caller.join(0.01)
        again = self.call(session, "notes.get", {"id": "n-1"}, request_id=9)
        self.assertIn("already in use", again.message["error"]["message"])
        self.gate.set()
        caller.join(WAIT_S)


class ModernTest(HttpCase):
    def test_a_stateless_call_needs_no_session(self) -> None:
        answer = self.modern_call("notes.get", {"id": "n-1"})
        self.assertEqual(answer.status, 200, answer.body)
        self.assertNotIn("Mcp-Session-Id", answer.headers)
        self.assertEqual(answer.message["result"]["resultType"], "complete")

    def test_a_routing_header_that_disagrees_with_the_body_is_refused_before_anything_runs(self) -> None:
        answer = self.modern_call("notes.delete", {"id": "n-1", "action_id": "a-1"},
                                  headers={"Mcp-Name": "notes.get"})
        self.assertEqual(answer.status, 400)
        self.assertEqual(answer.message["error"]["code"], HEADER_MISMATCH)
        missing = self.modern_call("notes.get", {"id": "n-1"}, headers={"MCP-Protocol-Version": "2025-11-25"})
        self.assertEqual(missing.message["error"]["code"], HEADER_MISMATCH)

    def test_an_unknown_tool_is_400_with_the_json_rpc_error(self) -> None:
        answer = self.modern_call("no.such", {})
        self.assertEqual(answer.status, 400)
        self.assertEqual(answer.message["error"]["code"], INVALID_PARAMS)

    def test_a_notification_cannot_cancel_another_clients_call(self) -> None:
        answers: list[Answer] = []
        caller = threading.Thread(target=lambda: answers.append(self.modern_call("slow", {}, request_id=1)))
        caller.start()
        while not self.server.modern_channel.busy():
            caller.join(0.01)
        for guess in (1, "h-1", "h-2"):  # the client's id, and the server's internal ones
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": guess, "_meta": dict(MODERN_META)}}
            self.assertEqual(self.post(cancel, {"MCP-Protocol-Version": "2026-07-28"}).status, 202)
        self.gate.set()
        caller.join(WAIT_S)
        self.assertEqual(answers[0].message["result"]["structuredContent"], {"done": True})

    def test_two_clients_may_use_the_same_request_id_at_once(self) -> None:
        answers: list[Answer] = []
        caller = threading.Thread(target=lambda: answers.append(self.modern_call("slow", {}, request_id=1)))
        caller.start()
        while not self.server.modern_channel.busy():
            caller.join(0.01)
        other = self.modern_call("notes.get", {"id": "n-3"}, request_id=1)
        self.assertEqual(other.message["result"]["structuredContent"]["id"], "n-3")
        self.gate.set()
        caller.join(WAIT_S)
        self.assertEqual(answers[0].message["id"], 1)


class ParamHeaderTest(HttpCase):
    """2026-07-28: an argument a tool marks `x-mcp-header` travels in `Mcp-Param-*` too; they must agree."""

    def make_server(self) -> McpHttpServer:
        from agent_lab import Registry, ToolSpec

        registry = Registry()
        self.runs: list[str] = []
        registry.register(ToolSpec(name="route", description="Route by region.", required_permission="notes.read",
                                   input_schema={"type": "object", "properties": {
                                       "region": {"type": "string", "x-mcp-header": "Region"}}}),
                          lambda arguments: self.runs.append(arguments.get("region", "")) or {})
        return McpHttpServer(registry, actor=ACTOR)

    def test_a_param_header_must_match_its_argument(self) -> None:
        ok = self.modern_call("route", {"region": "eu"}, headers={"Mcp-Param-Region": "eu"})
        self.assertEqual(ok.status, 200, ok.body)
        wrapped = self.modern_call("route", {"region": "é"}, headers={"Mcp-Param-Region": "=?base64?w6k=?="})
        self.assertEqual(wrapped.status, 200, wrapped.body)
        for arguments, headers in (({"region": "eu"}, {"Mcp-Param-Region": "us"}), ({"region": "eu"}, {}),
                                   ({}, {"Mcp-Param-Region": "us"})):
            refused = self.modern_call("route", arguments, headers=headers)
            self.assertEqual(refused.message["error"]["code"], HEADER_MISMATCH, (arguments, headers))
        self.assertEqual(self.runs, ["eu", "é"])


class OriginTest(HttpCase):
    server_options = {"allowed_origins": ["https://app.example.com"]}

    def test_an_origin_from_another_site_is_refused_403_and_nothing_is_dispatched(self) -> None:
        for origin in ("http://evil.example", "null", "http://localhost.evil.example", "http://127.0.0.1.nip.io:80",
                       "https://app.example.com.evil.example", "http://app.example.com"):
            answer = self.post(INITIALIZE, {"Origin": origin})
            self.assertEqual(answer.status, 403, origin)
            self.assertNotIn("Mcp-Session-Id", answer.headers)
        self.assertEqual(self.server.sessions, {})

    def test_loopback_origins_an_allowed_origin_and_no_origin_are_served(self) -> None:
        for origin in ("http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:5173",
                       "https://app.example.com", "HTTPS://APP.EXAMPLE.COM:443", None):
            headers = {"Origin": origin} if origin else {}
            self.assertEqual(self.post(INITIALIZE, headers).status, 200, origin)


class TokenTest(HttpCase):
    TOKEN = "s3cret-token-value-1234"
    server_options = {"token": TOKEN}

    def test_a_missing_or_wrong_token_is_401_and_never_echoed(self) -> None:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {self.TOKEN[:-1]}"},
                        {"Authorization": f"Basic {self.TOKEN}"}, {"Authorization": f"Bearer {self.TOKEN}x"},
                        {"Authorization": "Bearer "}):
            answer = self.post(INITIALIZE, headers)
            self.assertEqual(answer.status, 401, headers)
            self.assertTrue(answer.headers["WWW-Authenticate"].startswith("Bearer"))
            self.assertNotIn(self.TOKEN[:8].encode(), answer.body + str(answer.headers).encode())
        self.assertEqual(self.server.sessions, {})

    def test_the_right_token_is_served_and_a_session_needs_it_too(self) -> None:
        good = {"Authorization": f"Bearer {self.TOKEN}"}
        answer = self.post(INITIALIZE, good)
        self.assertEqual(answer.status, 200)
        session = answer.headers["Mcp-Session-Id"]
        self.assertEqual(self.call(session, "notes.get", {"id": "n-1"}).status, 401)  # the session id alone
        ok = self.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, {**good, "Mcp-Session-Id": session})
        self.assertEqual(ok.status, 200)

    def test_the_token_never_reaches_the_log(self) -> None:
        with self.assertLogs("agent_lab.mcp", level="DEBUG") as logs:
            self.post(INITIALIZE, {"Authorization": f"Bearer {self.TOKEN}"})
            self.post(INITIALIZE, {"Authorization": f"Bearer {self.TOKEN}-wrong"})
        self.assertNotIn(self.TOKEN, "\n".join(logs.output))


class OwnClientTest(HttpCase):
    """agent_lab's own MCP client (`--mcp http://...#VAR`) against this server, on both eras."""

    TOKEN = TokenTest.TOKEN
    server_options = {"token": TOKEN}

    def test_our_client_lists_and_calls_on_both_eras_with_the_token(self) -> None:
        from agent_lab.mcp_client import connect

        os.environ["AGENT_LAB_HTTP_TEST_TOKEN"] = self.TOKEN
        self.addCleanup(os.environ.pop, "AGENT_LAB_HTTP_TEST_TOKEN", None)
        for versions, era in ((None, "modern"), (["2025-11-25"], "handshake")):
            with connect(self.server.url + "#AGENT_LAB_HTTP_TEST_TOKEN", versions=versions) as client:
                self.assertEqual(client.era, era)
                names = [tool["name"] for tool in client.list_tools()]
                self.assertIn("notes.get", names)
                result = client.call_tool("notes.get", {"id": "n-9"})
                self.assertEqual(result["structuredContent"], {"id": "n-9", "text": "hello"})


class LimitsTest(HttpCase):
    server_options = {"limits": HttpLimits(max_body_bytes=2048, max_in_flight=2, max_waiting=1, max_connections=4,
                                           read_timeout_s=0.5)}

    def test_an_oversized_body_is_413_unread_and_the_server_goes_on(self) -> None:
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 4096}}
        self.assertEqual(self.post(big).status, 413)
        connection = self.connection()  # a body announced as huge is refused before a byte of it is read
        connection.putrequest("POST", self.path)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(10 ** 12))
        connection.endheaders()
        self.assertEqual(connection.getresponse().status, 413)
        connection.close()
        self.assertEqual(self.post(INITIALIZE).status, 200)

    def test_a_body_without_a_length_or_of_another_type_is_refused(self) -> None:
        self.assertEqual(self.post(None, {"Content-Type": "text/plain"}, raw=b"{}").status, 415)
        with socket.create_connection((self.host, self.port), timeout=WAIT_S) as chunked:
            chunked.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            self.assertTrue(chunked.recv(100).startswith(b"HTTP/1.1 411"))
        # A length of non-ASCII digits ("²" is a digit to str.isdigit), or too long for int() to read: the
        # connection was dropped without an answer.
        for length, status in ((b"\xc2\xb2", b"411"), (b"9" * 5000, b"413")):
            with socket.create_connection((self.host, self.port), timeout=WAIT_S) as odd:
                odd.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: " + length + b"\r\n\r\n{}")
                self.assertTrue(odd.recv(100).startswith(b"HTTP/1.1 " + status), length[:8])

    def test_past_the_in_flight_cap_a_request_is_503_until_one_ends(self) -> None:
        answers: list[Answer] = []
        caller = threading.Thread(target=lambda: answers.append(self.modern_call("slow", {})))
        caller.start()
        while not self.server.modern_channel.busy():
            caller.join(0.01)
        # the slow call holds the one place of a request that waits: another call is refused, not 503
        waiting = self.modern_call("notes.get", {"id": "n-1"})
        self.assertEqual((waiting.status, waiting.message["error"]["code"]), (200, SERVER_BUSY))
        self.assertEqual(self.post(INITIALIZE).status, 200)  # the other slot is for what never waits
        # (a request being answered; once the initialize's handler has let go of its slot, a hang guard)
        self.assertTrue(self.server.in_flight.acquire(timeout=WAIT_S))
        try:
            refused = self.post(INITIALIZE)
            self.assertEqual(refused.status, 503)
            self.assertEqual(refused.message["error"]["code"], SERVER_BUSY)
            self.assertEqual(refused.headers["Retry-After"], "1")
        finally:
            self.server.in_flight.release()
        self.gate.set()
        caller.join(WAIT_S)
        self.assertEqual(answers[0].status, 200)
        self.assertEqual(self.modern_call("notes.get", {"id": "n-1"}).status, 200)

    def test_answers_nobody_reads_hold_no_in_flight_slot(self) -> None:
        # A write to a client that reads nothing blocks until read_timeout_s, and it held the request's
        # in-flight slot: 32 connections of pipelined pings never read held every slot, and every other
        # request was 503 (reproduced by review). Here a reply that blocks stands for such a write.
        from unittest import mock

        from agent_lab.mcp_http_answers import _Answering

        original, stuck, release = _Answering.reply, threading.Semaphore(0), threading.Event()

        def reply(handler: Any, status: int, message: Any = None, headers: Any = None) -> None:
            if isinstance(message, str) and '"id":"stuck' in message:
                stuck.release()
                release.wait(WAIT_S)
            original(handler, status, message, headers)

        self.addCleanup(release.set)
        with mock.patch.object(_Answering, "reply", reply):
            readers = [threading.Thread(target=self.post, args=({"jsonrpc": "2.0", "id": f"stuck-{n}",
                                                                  "method": "ping", "params": {"_meta": MODERN_META}},
                                                                 {"MCP-Protocol-Version": "2026-07-28",
                                                                  "Mcp-Method": "ping"})) for n in range(2)]
            for reader in readers:
                reader.start()
            for _ in readers:
                self.assertTrue(stuck.acquire(timeout=WAIT_S))  # both answers are being written
            self.assertEqual(self.post(INITIALIZE).status, 200)  # (old code: 503, both slots held)
            release.set()
            for reader in readers:
                reader.join(WAIT_S)

    def test_a_slow_client_is_disconnected_and_cannot_hold_its_thread(self) -> None:
        with socket.create_connection((self.host, self.port), timeout=WAIT_S) as slow:
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n")
            self.assertEqual(slow.recv(100), b"")  # the watchdog shut it down: the head never ended
        with socket.create_connection((self.host, self.port), timeout=WAIT_S) as slow:
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            self.assertEqual(slow.recv(100), b"")  # nor the body
        self.assertEqual(self.post(INITIALIZE).status, 200)

    def test_past_the_connection_cap_a_new_connection_is_503(self) -> None:
        held = [socket.create_connection((self.host, self.port), timeout=WAIT_S) for _ in range(4)]
        try:
            with socket.create_connection((self.host, self.port), timeout=WAIT_S) as extra:
                self.assertTrue(extra.recv(100).startswith(b"HTTP/1.1 503"))
        finally:
            for each in held:
                each.close()


class AttackTest(HttpCase):
    """Reproducers of what an attacker who reads this code would try."""

    server_options = {"limits": HttpLimits(max_pending_calls=1)}

    def raw(self, lines: list[str], body: bytes = b"") -> bytes:
        with socket.create_connection((self.host, self.port), timeout=WAIT_S) as raw:
            raw.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            return raw.recv(200)

    def test_a_page_whose_name_was_rebound_to_loopback_is_refused_by_its_host(self) -> None:
        body = json.dumps(INITIALIZE).encode()
        answer = self.raw(["POST /mcp HTTP/1.1", f"Host: evil.example:{self.port}", "Content-Type: application/json",
                           f"Content-Length: {len(body)}"], body)
        self.assertTrue(answer.startswith(b"HTTP/1.1 403"), answer)
        self.assertEqual(self.server.sessions, {})

    def test_a_header_sent_twice_is_refused_whichever_copy_a_proxy_read(self) -> None:
        body = json.dumps(INITIALIZE).encode()
        for twice in (["Origin: http://localhost", "Origin: http://evil.example"],
                      ["Authorization: Bearer a", "Authorization: Bearer b"],
                      [f"Content-Length: {len(body)}", "Content-Length: 0"]):
            head = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Content-Type: application/json"]
            if not twice[0].startswith("Content-Length"):
                head.append(f"Content-Length: {len(body)}")
            answer = self.raw(head + twice, body)
            self.assertRegex(answer, rb"^HTTP/1.1 40[013]", twice)
        self.assertEqual(self.server.sessions, {})

    def test_an_unenveloped_initialize_cannot_turn_the_stateless_side_into_a_session(self) -> None:
        poisoned = self.post(INITIALIZE, {"MCP-Protocol-Version": "2026-07-28"})
        self.assertEqual(poisoned.message["error"]["code"], -32022)
        self.assertNotIn("Mcp-Session-Id", poisoned.headers)
        self.assertEqual(self.modern_call("notes.get", {"id": "n-1"}).status, 200)

    def test_an_id_that_is_no_string_or_integer_is_refused_and_nothing_runs(self) -> None:
        session = self.open_session()
        for bad_id in (None, 1.5, True, {"a": 1}):
            answer = self.post({"jsonrpc": "2.0", "id": bad_id, "method": "tools/call",
                                "params": {"name": "notes.delete", "arguments": {}}}, {"Mcp-Session-Id": session})
            self.assertEqual(answer.status, 400, bad_id)

    def test_calls_whose_clients_went_away_cannot_pile_up(self) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "slow", "arguments": {}, "_meta": MODERN_META}}).encode()
        with socket.create_connection((self.host, self.port), timeout=WAIT_S) as gone:
            gone.sendall(("\r\n".join(["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{self.port}",
                                        "Content-Type: application/json", f"Content-Length: {len(body)}",
                                        "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call",
                                        "Mcp-Name: slow"]) + "\r\n\r\n").encode() + body)
            while not self.server.modern_channel.busy():
                threading.Event().wait(0.01)
        # the slow call still holds the one call slot (its thread cannot be stopped): the next is refused
        refused = self.modern_call("notes.get", {"id": "n-1"})
        self.assertEqual(refused.message["error"]["code"], SERVER_BUSY)
        self.gate.set()
        while self.modern_call("notes.get", {"id": "n-1"}).status != 200:
            threading.Event().wait(0.01)


class CallSharesTest(HttpCase):
    """With the default limits one session's tool calls never take the whole server: past its share of
    pending calls more are refused "server busy" at once, and other clients are still served."""

    def test_one_sessions_waiting_calls_leave_room_for_every_other_client(self) -> None:
        # Calls held an in-flight slot each while they waited, capped only by max_pending_calls (64, over
        # max_in_flight's 32): one session's 32 slow calls left every other client 503, initialize included.
        limits = HttpLimits()
        self.assertLess(limits.max_pending_calls_per_session + limits.max_result_waits_per_session,
                        limits.max_in_flight)
        greedy = self.open_session()
        waiting = [self.open_post({"jsonrpc": "2.0", "id": f"c{n}", "method": "tools/call",
                                   "params": {"name": "slow", "arguments": {}}}, greedy)
                   for n in range(limits.max_in_flight)]
        refused = 0
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while refused < limits.max_in_flight - limits.max_pending_calls_per_session and time.monotonic() < give_up:
            readable, _, _ = select.select(waiting, [], [], 0.1)
            for sock in readable:
                _, answer = self.answered(sock)
                self.assertEqual(answer["error"]["code"], SERVER_BUSY)
                self.assertIn("this session", answer["error"]["message"])
                waiting.remove(sock)
                sock.close()
                refused += 1
        self.assertEqual(len(waiting), limits.max_pending_calls_per_session)  # (old code: all 32 waited)
        other = self.open_session()  # (old code: 503)
        self.assertEqual(self.call(other, "notes.get", {"id": "n-1"}).message["result"]["structuredContent"],
                         {"id": "n-1", "text": "hello"})
        self.gate.set()
        for sock in waiting:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"done": True})
            sock.close()
        self.assertIn("result", self.call(greedy, "slow", {}).message)  # its places came back as its calls ended


class CallThreadsTest(HttpCase):
    def test_a_sessions_call_threads_end_with_its_calls_not_with_the_session(self) -> None:
        # A session's thread pool kept every thread it grew until the session ended (30 minutes idle):
        # 8 sessions that ran 4 calls each held 32 idle threads (reproduced by review).
        session = self.open_session()
        before = set(threading.enumerate())
        calls = [self.open_post({"jsonrpc": "2.0", "id": f"c{n}", "method": "tools/call",
                                 "params": {"name": "slow", "arguments": {}}}, session) for n in range(4)]

        def running() -> list[threading.Thread]:
            return [each for each in set(threading.enumerate()) - before if each.name.startswith("mcp-call")]

        give_up = time.monotonic() + WAIT_S  # a hang guard
        while len(running()) < 4 and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        ran = running()
        self.assertEqual(len(ran), 4)
        self.gate.set()
        for sock in calls:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"done": True})
            sock.close()
        give_up = time.monotonic() + WAIT_S
        for thread in ran:
            thread.join(max(0.0, give_up - time.monotonic()))
            self.assertFalse(thread.is_alive())  # (old code: alive until the session ends)
        self.assertIn(session, self.server.sessions)
        self.assertIn("result", self.call(session, "notes.get", {"id": "n-1"}).message)


class SessionCapTest(HttpCase):
    server_options = {"limits": HttpLimits(max_sessions=2)}

    def test_a_new_session_replaces_the_longest_idle_one(self) -> None:
        first, second = self.open_session(), self.open_session()
        third = self.open_session()
        self.assertEqual(set(self.server.sessions), {second, third})
        self.assertEqual(self.call(first, "notes.get", {"id": "n-1"}).status, 404)

    def test_when_every_session_is_busy_initialize_is_503(self) -> None:
        sessions = [self.open_session(), self.open_session()]
        callers = [threading.Thread(target=self.call, args=(each, "slow", {})) for each in sessions]
        for caller in callers:
            caller.start()
        while not all(self.server.sessions[each].channel.busy() for each in sessions):
            callers[0].join(0.01)
        self.assertEqual(self.post(INITIALIZE).status, 503)
        self.gate.set()
        for caller in callers:
            caller.join(WAIT_S)


class GatewayOverHttpTest(HttpCase):
    """The gateway's approvals over HTTP: an elicitation on the call's event stream (handshake era), and
    input_required (2026-07-28)."""

    def make_server(self) -> McpHttpServer:
        from tests.test_gateway import ACTOR as GATEWAY_ACTOR
        from tests.test_gateway import build_registry as gateway_registry

        self.runs: list[str] = []
        return gateway_http_server(gateway_registry(self.runs), actor=GATEWAY_ACTOR)

    def test_an_elicitation_arrives_on_the_calls_event_stream_and_the_call_runs_once_confirmed(self) -> None:
        session = self.open_session({"elicitation": {}})
        connection = self.connection()
        connection.request("POST", self.path, body=json.dumps({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "transfer", "arguments": {"account": "acc-1", "amount": 40, "request_id": "t-1"}}}),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                     "Mcp-Session-Id": session})
        response = connection.getresponse()
        self.assertEqual(response.headers["Content-Type"], "text/event-stream")
        asked = read_event(response)
        self.assertEqual(asked["method"], "elicitation/create")
        self.assertIn("acc-1", asked["params"]["message"])
        self.assertEqual(self.runs, [])
        reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
        self.assertEqual(self.post(reply, {"Mcp-Session-Id": session}).status, 202)
        answer = read_event(response)
        connection.close()
        self.assertEqual(answer["id"], 7)
        self.assertFalse(answer["result"].get("isError"), answer)
        self.assertEqual(self.runs, ["transfer"])

    def test_stateless_approval_is_input_required_then_runs_once_with_the_sealed_state(self) -> None:
        arguments = {"account": "acc-2", "amount": 5, "request_id": "t-2"}
        meta = dict(MODERN_META, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
        sent = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "transfer"}

        def call(**extra: Any) -> Any:
            return self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "transfer", "arguments": arguments, "_meta": meta, **extra}},
                             sent).message["result"]

        first = call()
        self.assertEqual(first["resultType"], "input_required")
        self.assertEqual(self.runs, [])
        yes = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        done = call(inputResponses=yes, requestState=first["requestState"])
        self.assertEqual(done["resultType"], "complete")
        self.assertEqual(self.runs, ["transfer"])

    def test_a_hidden_tool_is_answered_like_an_unknown_one_over_http(self) -> None:
        session = self.open_session()
        hidden = self.call(session, "admin_reset", {}).message["error"]
        unknown = self.call(session, "no_such_tool", {}).message["error"]
        self.assertEqual((hidden["code"], hidden["message"]), (unknown["code"], unknown["message"]))
        self.assertEqual(self.runs, [])


def task_registry(gate: threading.Event) -> Any:
    """`export` runs as a task until `gate` opens; `export_now` as one that ends at once."""
    from agent_lab.registry import Registry

    registry = Registry()
    for name, handler in (("export", lambda arguments: gate.wait(WAIT_S) and {"exported": 1}),
                          ("export_now", lambda arguments: {"exported": 1})):
        registry.register(ToolSpec(
            name=name, description="Exports a report.", effect="write", idempotency_key="request_id",
            required_permission="notes.write", task_support="optional", timeout_ms=int(WAIT_S * 1000),
            input_schema={"type": "object", "properties": {"request_id": {"type": "string"}}, "required": ["request_id"]}),
            handler)
    return registry


class TaskCase(HttpCase):
    def make_server(self) -> McpHttpServer:
        return McpHttpServer(task_registry(self.gate), actor=ACTOR, **self.server_options)

    def start_task(self, session: str, name: str = "export", key: str = "k-1") -> str:
        answer = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": name, "arguments": {"request_id": key}, "task": {}}}, {"Mcp-Session-Id": session})
        return str(answer.message["result"]["task"]["taskId"])

    def tasks(self, session: str, method: str, task_id: str | None = None, request_id: Any = 3) -> Any:
        params = {} if task_id is None else {"taskId": task_id}
        return self.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                         {"Mcp-Session-Id": session}).message

    def until_not_busy(self, send: Any) -> Any:
        """`send()`'s answer once it is not "server busy" (a hang guard of WAIT_S, never a timing)."""
        give_up = time.monotonic() + WAIT_S
        answer = send()
        while answer.get("error", {}).get("code") == SERVER_BUSY and time.monotonic() < give_up:
            threading.Event().wait(0.01)
            answer = send()
        return answer


class TaskSessionsTest(TaskCase):
    """Over HTTP every session calls as the server's one actor: a session's tasks are its own all the same."""

    def test_another_sessions_task_is_answered_as_an_unknown_id_and_never_cancelled(self) -> None:
        owner, other = self.open_session(), self.open_session()
        task_id = self.start_task(owner)
        no_such = "task-" + "0" * 32
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            with self.subTest(method):
                self.assertEqual(self.tasks(other, method, task_id)["error"],
                                 self.tasks(other, method, no_such)["error"])  # no id can be probed
        self.assertEqual(self.tasks(other, "tasks/list")["result"]["tasks"], [])
        stateless = self.post({"jsonrpc": "2.0", "id": 4, "method": "tasks/get",
                               "params": {"taskId": task_id, "_meta": MODERN_META}},
                              {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get"}).message
        self.assertEqual(stateless["error"]["message"], "Invalid params: no task with that id")
        self.assertEqual([task["taskId"] for task in self.tasks(owner, "tasks/list")["result"]["tasks"]], [task_id])
        self.assertEqual(self.tasks(owner, "tasks/get", task_id)["result"]["status"], "working")  # not cancelled
        self.gate.set()
        self.assertEqual(self.tasks(owner, "tasks/result", task_id)["result"]["structuredContent"], {"exported": 1})

    def test_a_task_whose_session_ended_is_read_by_its_id_as_after_a_restart(self) -> None:
        owner = self.open_session()
        task_id = self.start_task(owner, "export_now")
        self.assertEqual(self.post(None, {"Mcp-Session-Id": owner}, method="DELETE").status, 204)
        later = self.open_session()
        self.assertEqual(self.tasks(later, "tasks/result", task_id)["result"]["structuredContent"], {"exported": 1})
        self.assertEqual(self.tasks(later, "tasks/list")["result"]["tasks"], [])  # listed: its own tasks only

    def test_an_ended_session_holds_no_thread_while_a_task_runs(self) -> None:
        # Each ended session's pool was shut down on a thread that then waited for every running task of
        # the registry: 200 sessions deleted during one 18 s task held 207 threads until it ended.
        owner = self.open_session()
        running = self.start_task(owner)
        for _ in range(5):
            self.assertEqual(self.post(None, {"Mcp-Session-Id": self.open_session()}, method="DELETE").status, 204)
        closing = [each for each in threading.enumerate() if each.name == "mcp-http-close"]
        for thread in closing:
            thread.join(WAIT_S)  # (on the old code, until the task ended: the gate opens only at cleanup)
            self.assertFalse(thread.is_alive())
        self.assertEqual(self.tasks(owner, "tasks/get", running)["result"]["status"], "working")



class TaskAfterSessionEndTest(TaskCase):
    """A task call accepted after its session ended is held by no session: read by its id from any."""

    server_options = {"max_workers": 1}

    def test_a_task_call_that_ends_after_its_session_did_is_read_by_its_id(self) -> None:
        # Its end handed the task to the ended session, which nobody releases again: held for ever (memory)
        # and by no live session, so read by its id it answered -32602 (reproduced by review).
        session = self.open_session()
        blocking = self.open_post({"jsonrpc": "2.0", "id": "sync", "method": "tools/call",
                                   "params": {"name": "export", "arguments": {"request_id": "s-1"}}}, session)
        queued = self.open_post({"jsonrpc": "2.0", "id": "t", "method": "tools/call", "params": {
            "name": "export_now", "arguments": {"request_id": "q-1"}, "task": {}}}, session)
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while self.server.sessions[session].channel.internal_for("t") is None and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        self.assertEqual(self.post(None, {"Mcp-Session-Id": session}, method="DELETE").status, 204)
        self.gate.set()  # the session's one run slot frees: the queued task call runs, after the session's end
        for thread in [each for each in threading.enumerate() if each.name == "mcp-http-close"]:
            thread.join(WAIT_S)  # the session's close waits for its calls
        [task] = [status for status in self.server.registry.tasks(actor=ACTOR) if status.tool == "export_now"]
        later = self.open_session()
        self.assertEqual(self.tasks(later, "tasks/result", task.task_id)["result"]["structuredContent"], {"exported": 1})
        blocking.close()
        queued.close()


class ResultWaitsTest(TaskCase):
    """A tasks/result holds a place of `max_result_waits` (every session together) only while its client
    can still take the answer, whatever that client sent before it left. Requests a client pipelines behind
    a waiting one are answered after it, up to HELD_BYTES of them; past that the answer says the connection
    ends, so the client can send them again."""

    def make_server(self) -> McpHttpServer:
        return McpHttpServer(task_registry(self.gate), actor=ACTOR, limits=HttpLimits(max_result_waits=1))

    def test_a_tasks_result_nobody_can_take_any_more_frees_its_place_at_once(self) -> None:
        owner = self.open_session()
        running, other = self.start_task(owner), self.start_task(owner, key="k-2")

        def hang_up(session: str, sock: socket.socket) -> None:
            sock.close()

        def send_a_byte_and_hang_up(session: str, sock: socket.socket) -> None:
            sock.sendall(b"x")  # (on the old code the byte hid the end of the stream behind it)
            sock.close()

        def delete(session: str, sock: socket.socket) -> None:
            self.assertEqual(self.post(None, {"Mcp-Session-Id": session}, method="DELETE").status, 204)

        def cancel(session: str, sock: socket.socket) -> None:
            self.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}},
                      {"Mcp-Session-Id": session})

        for leave in (hang_up, send_a_byte_and_hang_up, delete, cancel):
            with self.subTest(leave.__name__):
                session = self.open_session()
                self.tasks(session, "tasks/list")  # (the tasks are the owner's: read by id after its end only)
                sock = self.wait_for_task(owner, running)
                busy = self.tasks(owner, "tasks/result", other, request_id="second")
                self.assertEqual(busy["error"]["code"], SERVER_BUSY)  # the one place is the waiting one's
                self.assertIn("tasks/result", busy["error"]["message"])
                leave(owner, sock)
                if leave is delete:
                    owner = session  # the tasks of an ended session are read by their id
                # (on the old code: no cap, and a wait whose client left held on until its task ended)
                give_up = time.monotonic() + WAIT_S  # a hang guard
                while self.server.result_waits.slots._value == 0 and time.monotonic() < give_up:  # type: ignore[attr-defined]
                    threading.Event().wait(0.01)
                self.assertEqual(self.server.result_waits.slots._value, 1)  # type: ignore[attr-defined]
                sock.close()
        self.assertEqual(self.tasks(owner, "tasks/get", running)["result"]["status"], "working")  # the task runs on

    def test_a_task_that_has_ended_is_answered_with_every_place_taken(self) -> None:
        # An ended task needs no wait: its tasks/result was answered "server busy" (reproduced by review).
        owner = self.open_session()
        running, other = self.start_task(owner), self.start_task(owner, key="k-2")
        done = self.start_task(owner, "export_now", key="k-3")
        give_up = time.monotonic() + WAIT_S  # a hang guard: until its run has recorded its end
        while self.tasks(owner, "tasks/get", done)["result"]["status"] != "completed" and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        sock = self.wait_for_task(owner, running)
        self.assertEqual(self.tasks(owner, "tasks/result", other, request_id="second")["error"]["code"], SERVER_BUSY)
        answer = self.tasks(owner, "tasks/result", done, request_id="third")
        self.assertEqual(answer["result"]["structuredContent"], {"exported": 1})
        unknown = self.tasks(owner, "tasks/result", "task-" + "0" * 32, request_id="fourth")
        self.assertEqual(unknown["error"]["code"], INVALID_PARAMS)
        sock.close()

    def wait_for_task(self, session: str, task_id: str) -> socket.socket:
        """A tasks/result ("w") on a socket of its own, once it waits."""
        sock = self.open_post({"jsonrpc": "2.0", "id": "w", "method": "tasks/result", "params": {"taskId": task_id}},
                              session)
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while self.server.sessions[session].channel.internal_for("w") is None and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        return sock

    def test_a_request_pipelined_behind_a_waiting_one_is_answered_after_it(self) -> None:
        # HTTP/1.1 lets a client pipeline: the ping sent behind the wait was read and dropped, and the
        # connection ended after the wait's answer, the ping never answered (reproduced by review).
        session = self.open_session()
        running = self.start_task(session)
        sock = self.wait_for_task(session, running)
        sock.sendall(self.request_bytes({"jsonrpc": "2.0", "id": "next", "method": "ping"}, session))
        self.assertEqual(self.tasks(session, "tasks/get", running)["result"]["status"], "working")
        self.gate.set()
        head, answer = self.answered(sock)
        self.assertEqual(answer["result"]["structuredContent"], {"exported": 1})
        self.assertNotIn(b"Connection: close", head)
        self.assertEqual(self.answered(sock)[1], {"jsonrpc": "2.0", "id": "next", "result": {}})
        sock.close()

    def test_requests_kept_behind_a_wait_are_answered_in_order_each_under_its_own_session(self) -> None:
        session, other = self.open_session(), self.open_session()
        running = self.start_task(session)
        sock = self.wait_for_task(session, running)
        split = self.request_bytes({"jsonrpc": "2.0", "id": "split", "method": "ping"}, session)
        sock.sendall(b"".join(self.request_bytes({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"}, session)
                              for n in range(5))
                     + self.request_bytes({"jsonrpc": "2.0", "id": "theirs", "method": "tasks/get",
                                           "params": {"taskId": running}}, other)
                     + split[:-5])  # the rest of it only once the wait is answered
        self.assertEqual(self.tasks(session, "tasks/get", running)["result"]["status"], "working")
        self.gate.set()
        self.assertEqual(self.answered(sock)[1]["id"], "w")
        self.assertEqual([self.answered(sock)[1]["id"] for _ in range(5)], [f"p{n}" for n in range(5)])
        theirs = self.answered(sock)[1]  # answered for the session it names: not its task
        self.assertEqual((theirs["id"], theirs["error"]["code"]), ("theirs", INVALID_PARAMS))
        sock.sendall(split[-5:])
        self.assertEqual(self.answered(sock)[1], {"jsonrpc": "2.0", "id": "split", "result": {}})
        sock.close()

    def test_past_what_is_kept_the_answer_says_connection_close_and_the_connection_ends(self) -> None:
        session = self.open_session()
        running = self.start_task(session)
        sock = self.wait_for_task(session, running)
        too_much = {"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"pad": "x" * (HELD_BYTES + 1)}}
        sock.sendall(self.request_bytes(too_much, session))  # read as the request waits, and not kept
        self.assertEqual(self.tasks(session, "tasks/get", running)["result"]["status"], "working")
        self.gate.set()
        head, answer = self.answered(sock)
        self.assertEqual(answer["result"]["structuredContent"], {"exported": 1})
        self.assertIn(b"Connection: close", head)  # the client can tell its ping was not answered
        self.assertEqual(sock.recv(65536), b"")
        sock.close()


class ResultWaitSharesTest(TaskCase):
    """With the default limits, tasks/result waits never take the whole server: one session holds at most
    max_result_waits_per_session of them, all sessions max_result_waits, and either way the others' short
    requests (the tasks/get a busy answer points to) still have in-flight room."""

    def wait_on(self, session: str, task_id: str, request_id: str) -> socket.socket:
        return self.open_post({"jsonrpc": "2.0", "id": request_id, "method": "tasks/result",
                               "params": {"taskId": task_id}}, session)

    def test_one_session_holds_a_few_waits_and_every_session_together_leaves_room(self) -> None:
        limits = HttpLimits()
        self.assertLess(limits.max_result_waits, limits.max_in_flight)
        sessions = [self.open_session() for _ in range(limits.max_result_waits // limits.max_result_waits_per_session)]
        running = {session: self.start_task(session, key=f"k-{n}") for n, session in enumerate(sessions)}
        first = sessions[0]
        waiting = [self.wait_on(first, running[first], f"w{n}") for n in range(32)]  # one session tries 32
        refused = 0
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while refused < 32 - limits.max_result_waits_per_session and time.monotonic() < give_up:
            readable, _, _ = select.select(waiting, [], [], 0.1)
            for sock in readable:
                _, answer = self.answered(sock)
                self.assertEqual(answer["error"]["code"], SERVER_BUSY)
                self.assertIn("poll tasks/get", answer["error"]["message"])
                waiting.remove(sock)
                sock.close()
                refused += 1
        self.assertEqual(len(waiting), limits.max_result_waits_per_session)  # (old code: all 32 waited)
        for session in sessions[1:]:  # the others fill the server's places
            for n in range(limits.max_result_waits_per_session):
                waiting.append(self.wait_on(session, running[session], f"w{n}"))
        give_up = time.monotonic() + WAIT_S  # a hang guard: until every place is taken
        while self.server.result_waits.slots._value and time.monotonic() < give_up:  # type: ignore[attr-defined]
            threading.Event().wait(0.01)
        other = self.open_session()
        own = self.start_task(other, key="k-other")
        busy = self.tasks(other, "tasks/result", own)
        self.assertEqual(busy["error"]["code"], SERVER_BUSY)  # every place is taken ...
        self.assertEqual(self.tasks(other, "tasks/get", own)["result"]["status"], "working")  # ... not the server
        self.gate.set()
        for sock in waiting:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"exported": 1})
            sock.close()


class WaitingPlacesTest(TaskCase):
    """With the default limits requests that wait (tool calls, tasks/result waiting for a task) never hold
    every in-flight slot together, however many sessions send them: past max_waiting they are refused
    "server busy", and what never waits (initialize, ping, tasks/get, tasks/cancel) is still served."""

    def test_waiting_requests_of_many_sessions_leave_room_for_those_that_never_wait(self) -> None:
        # Each session's calls were within its share (8), but nothing bounded the shares together:
        # 4 sessions x 8 slow calls held all 32 in-flight slots, and a new client's initialize, another
        # session's ping, tasks/get and tasks/cancel were 503 (reproduced by review).
        limits = HttpLimits()
        self.assertEqual((limits.max_in_flight, limits.max_waiting), (32, 24))
        owner = self.open_session()
        running = self.start_task(owner)
        sessions = [self.open_session() for _ in range(limits.max_in_flight // limits.max_pending_calls_per_session)]
        waiting = [self.open_post({"jsonrpc": "2.0", "id": f"c{n}", "method": "tools/call", "params": {
            "name": "export", "arguments": {"request_id": f"{session}-{n}"}}}, session)
            for session in sessions for n in range(limits.max_pending_calls_per_session)]
        refused = 0
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while refused < limits.max_in_flight - limits.waiting_places and time.monotonic() < give_up:
            readable, _, _ = select.select(waiting, [], [], 0.1)
            for sock in readable:
                _, answer = self.answered(sock)
                self.assertEqual(answer["error"]["code"], SERVER_BUSY)
                self.assertIn("requests are waiting", answer["error"]["message"])
                waiting.remove(sock)
                sock.close()
                refused += 1
        self.assertEqual(len(waiting), limits.waiting_places)  # (old code: all 32 waited)
        self.assertEqual(self.post(INITIALIZE).status, 200)  # (old code: 503, as for each below)
        self.assertEqual(self.tasks(owner, "ping"), {"jsonrpc": "2.0", "id": 3, "result": {}})
        self.assertEqual(self.tasks(owner, "tasks/get", running)["result"]["status"], "working")
        busy = self.tasks(owner, "tasks/result", running)  # a wait: no place left for it
        self.assertEqual(busy["error"]["code"], SERVER_BUSY)
        self.assertIn("poll tasks/get", busy["error"]["message"])
        self.assertIn("result", self.tasks(owner, "tasks/cancel", running))
        self.gate.set()
        for sock in waiting:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"exported": 1})
            sock.close()
        self.assertIn("result", self.until_not_busy(  # the places came back as the requests were answered
            lambda: self.post({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                "name": "export_now", "arguments": {"request_id": "after"}}}, {"Mcp-Session-Id": owner}).message))

    def test_max_waiting_must_leave_room_below_max_in_flight(self) -> None:
        self.assertEqual(HttpLimits(max_in_flight=8).max_waiting, 6)
        self.assertEqual(HttpLimits(max_in_flight=8, max_waiting=7).max_waiting, 7)
        for bad in ({"max_in_flight": 8, "max_waiting": 8}, {"max_in_flight": 8, "max_waiting": 0},
                    {"max_in_flight": 1}):
            with self.subTest(bad), self.assertRaisesRegex(ValueError, "below max_in_flight"):
                HttpLimits(**bad)
        with self.assertRaises(TypeError):
            HttpLimits(max_waiting=True)


class StatelessSharesTest(HttpCase):
    """2026-07-28 clients share one dispatcher, but none of them is another's share: each one's unit is its
    connection (one request at a time), so one client's waiting calls, however many and however large,
    leave every other stateless client's calls served, within the server-wide caps."""

    def make_server(self) -> McpHttpServer:
        from agent_lab.registry import Registry

        registry = Registry(max_workers=32)  # (the registry's pool of handler threads is not what is tested)
        registry.register(ToolSpec(name="slow", description="Waits for the test.", input_schema={"type": "object"},
                                   timeout_ms=int(WAIT_S * 1000), max_input_bytes=4 << 20),
                          lambda arguments: self.gate.wait(WAIT_S) and {"done": True})
        registry.register(ToolSpec(name="quick", description="Answers at once.", input_schema={"type": "object"}),
                          lambda arguments: {"quick": True})
        return McpHttpServer(registry, actor=ACTOR)

    def modern_post(self, request_id: Any, name: str, arguments: dict[str, Any]) -> socket.socket:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}}).encode()
        sock = socket.create_connection((self.host, self.port), timeout=WAIT_S)
        sock.sendall(("\r\n".join(["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Content-Type: application/json",
                                    f"Content-Length: {len(body)}", "MCP-Protocol-Version: 2026-07-28",
                                    "Mcp-Method: tools/call", f"Mcp-Name: {name}"]) + "\r\n\r\n").encode() + body)
        return sock

    def test_one_stateless_clients_waiting_calls_leave_the_others_served(self) -> None:
        # Counted as one session, the stateless side let one client's 8 slow calls make every other
        # stateless client's call busy, its 4 slow calls queue every other one's until its deadline (the
        # session's 4 run slots), and its 3 calls of 3 MiB make every other one's busy (the session's
        # 8 MiB backlog) (reproduced by review).
        limits = HttpLimits()
        greedy = [self.modern_post(n, "slow", {"pad": "x" * (3 << 20)} if n < 3 else {})
                  for n in range(limits.max_pending_calls_per_session + 1)]
        give_up = time.monotonic() + WAIT_S  # a hang guard: until each waits, or one is answered
        while len(self.server.modern_channel.exchanges) < len(greedy) and time.monotonic() < give_up:
            if select.select(greedy, [], [], 0.01)[0]:
                break
        self.assertEqual(select.select(greedy, [], [], 0)[0], [])  # none refused (old code: busy)
        other = self.modern_call("quick", {})
        self.assertEqual(other.message["result"]["structuredContent"], {"quick": True})  # (old code: busy)
        self.gate.set()
        for sock in greedy:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"done": True})
            sock.close()

    def test_under_one_share_of_calls_another_stateless_call_runs_at_once(self) -> None:
        # The stateless side's 4 run slots: another client's quick call queued behind one client's 4 slow
        # ones until its deadline ran out (reproduced by review: deadline_exceeded).
        greedy = [self.modern_post(n, "slow", {}) for n in range(DEFAULT_MAX_WORKERS)]
        give_up = time.monotonic() + WAIT_S  # a hang guard
        while len(self.server.modern_channel.exchanges) < len(greedy) and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        answered: list[Answer] = []
        caller = threading.Thread(target=lambda: answered.append(self.modern_call("quick", {})))
        caller.start()
        caller.join(WAIT_S)  # a hang guard
        self.assertEqual(answered[0].message["result"]["structuredContent"], {"quick": True})
        self.assertEqual(select.select(greedy, [], [], 0)[0], [])  # while they wait (old code: once they ended)
        self.gate.set()
        for sock in greedy:
            self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"done": True})
            sock.close()


class StatelessCapabilitiesTest(TaskCase):
    def test_each_stateless_call_runs_under_the_capabilities_it_declares(self) -> None:
        # Every 2026-07-28 client shares one dispatcher, and each request wrote its declared capabilities
        # on the dispatcher's session: a call read those of whichever request came last, so a client that
        # declared the tasks extension got a plain result (reproduced by review, on cue as here).
        from agent_lab.mcp_tasks import TASKS_EXTENSION

        slots, held, go = self.server.modern.call_slots, threading.Event(), threading.Event()

        class HoldTheFirst:  # the first call stops after its envelope was read, before it is started
            def acquire(self, blocking: bool = True) -> bool:
                if not held.is_set():
                    held.set()
                    go.wait(WAIT_S)
                return slots.acquire(blocking)

            def release(self) -> None:
                slots.release()

        self.server.modern.call_slots = HoldTheFirst()

        def call(key: str, capabilities: dict[str, Any]) -> Any:
            meta = dict(MODERN_META, **{"io.modelcontextprotocol/clientCapabilities": capabilities})
            return self.post({"jsonrpc": "2.0", "id": key, "method": "tools/call", "params": {
                "name": "export_now", "arguments": {"request_id": key}, "_meta": meta}},
                {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "export_now"}).message

        answers: list[Any] = []
        declaring = threading.Thread(target=lambda: answers.append(call("a", {"extensions": {TASKS_EXTENSION: {}}})))
        declaring.start()
        held.wait(WAIT_S)
        self.assertEqual(call("b", {})["result"]["structuredContent"], {"exported": 1})  # no extension: plain
        go.set()
        declaring.join(WAIT_S)
        self.assertIn("taskId", answers[0]["result"])  # (old code: a plain result, as the other declared)


class ManyFilesTest(TaskCase):
    def test_a_wait_on_a_descriptor_past_1024_is_kept_until_its_answer(self) -> None:
        # The look for a vanished client used select(), which refuses a descriptor of 1024 or more: in a
        # process with that many files open, every wait was taken for gone at its first look (reproduced
        # by review: no answer, the connection closed).
        import resource
        from unittest import mock

        from agent_lab.mcp_http_answers import _Answering

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 1200:
            self.skipTest(f"the hard limit on open files ({hard}) is under the 1,200 this test opens")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if hard == resource.RLIM_INFINITY
                                                     else min(max(soft, 1200), hard), hard))
        self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        ballast = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the host's other files
        self.addCleanup(lambda: [os.close(each) for each in ballast])
        looked = threading.Event()
        original = _Answering.client_gone

        def look(handler: Any) -> bool:
            gone = original(handler)
            looked.set()
            return gone

        session = self.open_session()
        running = self.start_task(session)
        with mock.patch.object(_Answering, "client_gone", look):
            sock = self.open_post({"jsonrpc": "2.0", "id": "w", "method": "tasks/result",
                                   "params": {"taskId": running}}, session)
            self.addCleanup(sock.close)
            self.assertGreaterEqual(sock.fileno(), 1024)  # (and the server's side of it, opened after it)
            self.assertTrue(looked.wait(WAIT_S))
            looked.clear()
            self.assertTrue(looked.wait(WAIT_S))  # a look that began once the first had ended
        self.assertIsNotNone(self.server.sessions[session].channel.internal_for("w"))  # (old code: abandoned)
        self.gate.set()
        self.assertEqual(self.answered(sock)[1]["result"]["structuredContent"], {"exported": 1})


class GatewayConfirmationLeftTest(HttpCase):
    """A call waiting for its user's confirmation holds one of the server's call slots (here the only one):
    once nobody can answer (the stream closed, the session ended, the call cancelled) the wait ends at
    once, not approved, and the slot is free for the next call."""

    def make_server(self) -> McpHttpServer:
        from tests.test_gateway import ACTOR as GATEWAY_ACTOR
        from tests.test_gateway import build_registry as gateway_registry

        self.runs: list[str] = []
        return gateway_http_server(gateway_registry(self.runs), actor=GATEWAY_ACTOR,
                                   limits=HttpLimits(max_pending_calls=1))

    def ask(self, session: str) -> tuple[socket.socket, Any]:
        """A transfer (it needs approval) on its own socket, read until its elicitation arrives."""
        sock = self.open_post({"jsonrpc": "2.0", "id": "t", "method": "tools/call", "params": {
            "name": "transfer", "arguments": {"account": "acc-1", "amount": 40, "request_id": "t-1"}}}, session)
        received = b""
        while b"\n\n" not in received.partition(b"data: ")[2]:
            chunk = sock.recv(65536)
            self.assertTrue(chunk, received)
            received += chunk
        return sock, json.loads(received.partition(b"data: ")[2].partition(b"\n")[0])

    def next_call(self) -> Any:
        """A call from another session once the slot is free (busy while the confirmation wait holds it:
        on the old code for CONFIRM_WAIT_S, 300 s; a hang guard of WAIT_S, never a timing)."""
        session = self.open_session()
        give_up = time.monotonic() + WAIT_S
        answer = self.call(session, "report", {"topic": "q3"}).message
        while answer.get("error", {}).get("code") == SERVER_BUSY and time.monotonic() < give_up:
            threading.Event().wait(0.01)
            answer = self.call(session, "report", {"topic": "q3"}).message
        return answer

    def test_a_confirmation_nobody_can_answer_ends_not_approved_and_frees_the_call_slot(self) -> None:
        def hang_up(session: str, sock: socket.socket, asked: Any) -> None:
            sock.close()

        def send_a_byte_and_hang_up(session: str, sock: socket.socket, asked: Any) -> None:
            sock.sendall(b"x")  # (on the old code held until a keep-alive write failed, twice sse_ping_s)
            sock.close()

        def delete(session: str, sock: socket.socket, asked: Any) -> None:
            self.assertEqual(self.post(None, {"Mcp-Session-Id": session}, method="DELETE").status, 204)

        def cancel(session: str, sock: socket.socket, asked: Any) -> None:
            self.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "t"}},
                      {"Mcp-Session-Id": session})

        for leave in (hang_up, send_a_byte_and_hang_up, delete, cancel):
            with self.subTest(leave.__name__):
                session = self.open_session({"elicitation": {}})
                sock, asked = self.ask(session)
                self.assertEqual(asked["method"], "elicitation/create")
                self.assertEqual(self.call(self.open_session(), "report", {"topic": "q3"}).message["error"]["code"],
                                 SERVER_BUSY)  # the one call slot is the transfer's
                leave(session, sock, asked)
                answer = self.next_call()
                self.assertEqual(json.loads(answer["result"]["content"][0]["text"])["error"]["code"],
                                 "approval_required")
                yes = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": True}}}
                self.post(yes, {"Mcp-Session-Id": session})  # too late: nobody waits for it any more
                sock.close()
                self.assertEqual(self.runs, [])  # the transfer never ran


def read_event(response: http.client.HTTPResponse) -> Any:
    """The next `message` event's data, read line by line from an open event stream."""
    data: list[bytes] = []
    while True:
        line = response.fp.readline()
        if not line:
            raise AssertionError("the event stream ended")
        line = line.rstrip(b"\r\n")
        if not line and data:
            return json.loads(b"\n".join(data))
        if line.startswith(b"data:"):
            data.append(line[5:].lstrip())


class CommandLineTest(unittest.TestCase):
    def run_lab(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "run_lab.py", "serve-mcp", *args], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=60, env=env)

    def test_bad_http_settings_are_one_line_and_exit_2(self) -> None:
        env = {key: value for key, value in os.environ.items() if key != "AGENT_LAB_NO_SUCH_TOKEN"}
        for args, expected in (
            (["--http", "0", "--http-token-env", "AGENT_LAB_NO_SUCH_TOKEN"], "AGENT_LAB_NO_SUCH_TOKEN is not set"),
            (["--allow-origin", "https://app.example.com"], "--allow-origin applies to --http"),
            (["--http-token-env", "X"], "--http-token-env applies to --http"),
            (["--http", "localhost:http"], "expected [HOST:]PORT"),
            (["--http", "0", "--allow-origin", "not an origin"], "expected an origin"),
        ):
            process = self.run_lab(*args, env=env)
            self.assertEqual(process.returncode, 2, (args, process.stderr))
            self.assertIn(expected, process.stderr)
            self.assertEqual(len(process.stderr.strip().splitlines()), 1, process.stderr)
            self.assertNotIn("Traceback", process.stderr)

    def test_serve_mcp_http_prints_its_url_and_serves_the_lab_with_a_token(self) -> None:
        env = dict(os.environ, AGENT_LAB_TEST_TOKEN="tok-abc-123")
        process = subprocess.Popen([sys.executable, "run_lab.py", "serve-mcp", "--http", "127.0.0.1:0",
                                    "--http-token-env", "AGENT_LAB_TEST_TOKEN"],
                                   cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = process.stderr.readline()
            self.assertRegex(line, r"^agent-lab mcp: serving on http://127\.0\.0\.1:[0-9]+/mcp$")
            url = urllib.parse.urlsplit(line.split()[-1])
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=WAIT_S)
            connection.request("POST", url.path, body=json.dumps(INITIALIZE),
                               headers={"Content-Type": "application/json", "Authorization": "Bearer tok-abc-123"})
            answer = connection.getresponse()
            self.assertEqual(answer.status, 200)
            self.assertEqual(json.loads(answer.read())["result"]["serverInfo"]["name"], "agent-lab")
            connection.close()
        finally:
            process.terminate()
            self.assertEqual(process.wait(WAIT_S), 0)
            rest = process.stderr.read()
            process.stderr.close()
        self.assertNotIn("tok-abc-123", rest)


if __name__ == "__main__":
    unittest.main()
