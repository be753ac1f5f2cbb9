"""The MCP client against servers that misbehave, and against our own serve-mcp (standard library only).

The hostile stdio server is `tests/mcp_hostile_server.py` (a stand-in: no real server hangs, floods,
lies or dies on cue); the hostile HTTP server is a small `http.server` on 127.0.0.1 in this file. Every
misbehaviour must end in one `McpError` of one line naming the server, raised before the request's
timeout has passed by more than a loaded machine's slack: never a traceback, never a hang. The official
SDK's server and the reference servers are in test_interop_mcp_client.py.
"""

from __future__ import annotations

import gc
import http.server
import json
import os
import sys
import threading
import time
import unittest
from pathlib import Path
from typing import Any

from agent_lab.mcp_client import (
    McpClient,
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpRemoteError,
    McpTimeout,
    connect,
    parse_server,
)
from agent_lab.mcp_client.stdio import MAX_STDERR_BYTES, Outgoing, StdioTransport
from agent_lab.mcp_client.wire import HANDSHAKE_VERSIONS, MODERN_VERSIONS

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HOSTILE = f"{sys.executable} {HERE / 'mcp_hostile_server.py'}"
TIMEOUT_S = 1.0  # a request's (and, where connecting is what is tested, the connection's) timeout
CONNECT_TIMEOUT_S = 15.0  # elsewhere: starting Python on a loaded machine is not what these tests are about
SLACK_S = 4.0  # a loaded two-core machine; the point is "not a hang", not a speed


def hostile(mode: str, *extra: str) -> str:
    return " ".join([HOSTILE, mode, *extra])


class ErrorShape:
    """Assertions every client error must satisfy."""

    def assertOneLineAboutServer(self: Any, error: McpError, server: str) -> None:
        text = str(error)
        self.assertNotIn("\n", text)
        self.assertTrue(text.startswith(f"mcp server {parse_server(server).label}: "), text)
        self.assertNotIn("Traceback", text)


class HostileStdioServerTest(unittest.TestCase, ErrorShape):
    def fails(self, mode: str, action: str = "call", *, expected: type[McpError] = McpError,
              **options: Any) -> McpError:
        """The error `action` ends in, raised within its timeout (plus slack): connecting is timed when
        the action is "connect", else only the listing or the call is."""
        server = hostile(mode)
        client = McpClient(server, timeout_s=TIMEOUT_S,
                           connect_timeout_s=TIMEOUT_S if action == "connect" else CONNECT_TIMEOUT_S, **options)
        self.addCleanup(client.close)
        with self.assertRaises(expected) as caught:
            if action != "connect":
                client.connect()
            started = time.monotonic()
            if action == "connect":
                client.connect()
            elif action == "list":
                client.list_tools()
            else:
                client.call_tool("echo", {"text": "hi"})
        self.assertLess(time.monotonic() - started, TIMEOUT_S + SLACK_S, "the error came long after the timeout")
        self.assertOneLineAboutServer(caught.exception, server)
        return caught.exception

    def test_a_server_that_never_answers_a_call_times_out(self) -> None:
        error = self.fails("hang", expected=McpTimeout)
        self.assertIn("did not answer in time: tools/call", str(error))

    def test_a_server_that_never_answers_at_all_fails_to_connect_in_time(self) -> None:
        error = self.fails("hang-start", "connect", expected=McpTimeout)
        self.assertIn("answered neither server/discover nor initialize", str(error))

    def test_an_endless_line_breaks_the_connection_at_the_size_limit(self) -> None:
        error = self.fails("flood", expected=McpProtocolError, max_message_bytes=64 * 1024)
        self.assertIn("larger than 65536 bytes", str(error))

    def test_endless_notifications_do_not_stop_the_timeout(self) -> None:
        self.fails("flood-lines", expected=McpTimeout)

    def test_a_protocol_version_it_was_not_offered_is_refused(self) -> None:
        error = self.fails("lie-version", "connect", expected=McpProtocolError)
        self.assertIn("'1999-01-01', which it was not offered", str(error))

    def test_an_answer_that_is_not_json_rpc_2_is_refused(self) -> None:
        error = self.fails("lie-jsonrpc", "connect", expected=McpProtocolError)
        self.assertIn("not JSON-RPC 2.0", str(error))

    def test_a_result_that_is_not_an_object_is_refused(self) -> None:
        error = self.fails("lie-result", "list", expected=McpProtocolError)
        self.assertIn("tools/list with a result that is not an object", str(error))

    def test_a_server_speaking_only_unknown_revisions_is_refused(self) -> None:
        error = self.fails("future-only", "connect", expected=McpProtocolError)
        self.assertIn("speaks only 2099-01-01", str(error))

    def test_a_server_that_dies_mid_call_is_named_with_its_exit_code_and_last_words(self) -> None:
        error = self.fails("die", expected=McpConnectionError)
        self.assertIn("exited with code 3", str(error))
        self.assertIn("panic: the tool broke the server", str(error))
        self.assertIn("(during tools/call)", str(error))
        self.assertTrue(error.sent)  # the call reached it: a write may have happened

    def test_garbage_on_stdout_is_named_in_the_timeout(self) -> None:
        error = self.fails("garbage", "connect", expected=McpTimeout)
        self.assertIn("not JSON-RPC", str(error))
        self.assertIn("this is not json at all", str(error))

    def test_pagination_that_never_ends_is_refused(self) -> None:
        error = self.fails("endless-pages", "list", expected=McpProtocolError)
        self.assertIn("would never end", str(error))

    def test_a_program_that_does_not_exist_cannot_start(self) -> None:
        with self.assertRaises(McpConnectionError) as caught:
            connect("no-such-program-for-agent-lab --flag")
        self.assertIn("no program 'no-such-program-for-agent-lab'", str(caught.exception))
        self.assertFalse(caught.exception.sent)

    def test_after_a_broken_connection_every_request_fails_at_once_without_being_sent(self) -> None:
        client = connect(hostile("well-behaved"), timeout_s=TIMEOUT_S, max_message_bytes=4096)
        try:
            with self.assertRaises(McpProtocolError):
                client.call_tool("big_output", {"kib": 16})
            with self.assertRaises(McpProtocolError) as again:
                client.call_tool("echo", {"text": "hi"})
            self.assertFalse(again.exception.sent)
        finally:
            client.close()

    def test_only_the_tail_of_stderr_is_kept(self) -> None:
        with connect(hostile("chatty"), timeout_s=TIMEOUT_S) as client:
            client.call_tool("echo", {"text": "hi"})
            time.sleep(0.2)
            assert isinstance(client.transport.stderr_tail(), str)
            self.assertLessEqual(len(client.transport._stderr_tail), MAX_STDERR_BYTES)  # type: ignore[union-attr]
            self.assertEqual(client.transport.stderr_tail(), "the last words")  # type: ignore[union-attr]


class WellBehavedServerTest(unittest.TestCase):
    def test_both_eras_list_and_call(self) -> None:
        for versions, era in ((None, "modern"), (HANDSHAKE_VERSIONS, "handshake"), (HANDSHAKE_VERSIONS[2:], "handshake")):
            with self.subTest(era=era, versions=versions):
                with connect(hostile("well-behaved"), versions=versions, timeout_s=TIMEOUT_S) as client:
                    self.assertEqual(client.era, era)
                    self.assertEqual(client.server_info["name"], "hostile-well-behaved")
                    names = [tool["name"] for tool in client.list_tools()]
                    self.assertIn("echo", names)
                    result = client.call_tool("echo", {"text": "hello"})
                    self.assertEqual(result["structuredContent"], {"text": "hello"})

    def test_a_listing_over_many_pages_is_followed_to_its_end(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=5) as client:
            whole = [tool["name"] for tool in client.list_tools()]
        with connect(hostile("paged"), timeout_s=5) as client:
            self.assertEqual([tool["name"] for tool in client.list_tools()], whole)

    def test_a_handshake_era_server_is_reached_by_falling_back(self) -> None:
        with connect(hostile("handshake-only"), timeout_s=TIMEOUT_S) as client:
            self.assertEqual((client.era, client.protocol_version), ("handshake", "2025-11-25"))

    def test_a_tool_error_is_a_result_not_an_exception(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=TIMEOUT_S) as client:
            result = client.call_tool("fail", {})
        self.assertIs(result["isError"], True)

    def test_an_unknown_tool_is_a_remote_error(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=TIMEOUT_S) as client:
            with self.assertRaises(McpRemoteError) as caught:
                client.call_tool("nope", {})
        self.assertEqual(caught.exception.code, -32602)

    def test_a_cancelled_call_returns_at_once_and_the_connection_still_works(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=30) as client:
            cancel = threading.Event()
            threading.Timer(0.2, cancel.set).start()
            started = time.monotonic()
            with self.assertRaises(McpTimeout) as caught:
                client.call_tool("slow", {"seconds": 3}, cancel_event=cancel)
            self.assertLess(time.monotonic() - started, 2.5)
            self.assertIn("cancelled by the caller", str(caught.exception))
            self.assertEqual(client.call_tool("echo", {"text": "still here"})["structuredContent"]["text"], "still here")

    def test_calls_from_several_threads_each_get_their_own_answer(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=10) as client:
            answers: dict[int, Any] = {}

            def one(index: int) -> None:
                answers[index] = client.call_tool("echo", {"text": f"t{index}"})["structuredContent"]["text"]

            threads = [threading.Thread(target=one, args=(index,)) for index in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
        self.assertEqual(answers, {index: f"t{index}" for index in range(16)})

    def test_list_changed_is_noticed(self) -> None:
        with connect(hostile("well-behaved"), timeout_s=TIMEOUT_S) as client:
            client.list_tools()
            self.assertFalse(client.tools_changed)
            client.call_tool("rug_pull", {})
            deadline = time.monotonic() + 2
            while not client.tools_changed and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertTrue(client.tools_changed)
            echo = next(tool for tool in client.list_tools() if tool["name"] == "echo")
            self.assertIn("id_rsa", echo["description"])
            self.assertFalse(client.tools_changed)

    def test_the_server_sees_a_small_environment_plus_what_the_address_sets(self) -> None:
        os.environ["AGENT_LAB_TEST_SECRET_TOKEN"] = "do-not-leak"
        try:
            with connect(f"GIVEN_TO_SERVER=yes {hostile('well-behaved')}", timeout_s=TIMEOUT_S) as client:
                names = client.call_tool("environment", {})["structuredContent"]["names"]
            with connect(hostile("well-behaved"), timeout_s=TIMEOUT_S,
                         pass_env=["AGENT_LAB_TEST_SECRET_TOKEN"]) as client:
                passed = client.call_tool("environment", {})["structuredContent"]["names"]
        finally:
            del os.environ["AGENT_LAB_TEST_SECRET_TOKEN"]
        self.assertIn("GIVEN_TO_SERVER", names)
        self.assertNotIn("AGENT_LAB_TEST_SECRET_TOKEN", names)
        self.assertIn("AGENT_LAB_TEST_SECRET_TOKEN", passed)


class OwnServerTest(unittest.TestCase):
    """Our own serve-mcp, in both eras."""

    def test_serve_mcp_lists_and_calls_in_every_revision(self) -> None:
        server = f"{sys.executable} {REPO / 'run_lab.py'} serve-mcp"
        for version in MODERN_VERSIONS + HANDSHAKE_VERSIONS:
            with self.subTest(version=version):
                with McpClient(server, versions=[version], cwd=str(REPO), timeout_s=20) as client:
                    self.assertEqual(client.protocol_version, version)
                    self.assertIn("get_ticket", [tool["name"] for tool in client.list_tools()])
                    result = client.call_tool("get_ticket", {"ticket_id": "T-1001"})
                    self.assertFalse(result["isError"])
                    self.assertEqual(result["structuredContent"]["ticket"]["id"], "T-1001")


    def test_a_client_dropped_without_close_stops_its_server_and_its_threads(self) -> None:
        client = McpClient(f"{sys.executable} {REPO / 'run_lab.py'} serve-mcp", cwd=str(REPO), timeout_s=20)
        client.connect()
        self.assertIn("get_ticket", [tool["name"] for tool in client.list_tools()])
        process, threads = client.transport._process, list(client.transport._threads)
        self.addCleanup(process.kill)  # (a no-op once it has exited)
        del client
        gc.collect()
        process.wait(timeout=CONNECT_TIMEOUT_S)  # raises TimeoutExpired while the server runs on
        for thread in threads:
            thread.join(CONNECT_TIMEOUT_S)
            self.assertFalse(thread.is_alive(), f"{thread.name} still runs for a dropped client")

class _PipeTakingAFewBytes:
    """A server's unbuffered stdin (a raw FileIO) whose writes take at most 7 bytes, as one interrupted by
    a signal does: what reached the server is in `received`."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.closed = False

    def write(self, data: Any) -> int:
        taken = bytes(data[:7])
        self.received += taken
        return len(taken)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class StdinWriterTest(unittest.TestCase):
    def test_a_message_the_pipe_takes_in_parts_reaches_the_server_whole(self) -> None:
        transport = StdioTransport(parse_server("server-that-is-never-started"), label="s", max_message_bytes=1 << 20)
        pipe = _PipeTakingAFewBytes()
        transport._process = type("Process", (), {"stdin": pipe})()  # type: ignore[assignment]
        message = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"record_note"}}\n'
        transport._outbox.put(Outgoing(message))
        transport._outbox.put(None)
        transport._write_stdin()
        self.assertEqual(bytes(pipe.received), message)
        self.assertTrue(pipe.closed)


class AddressTest(unittest.TestCase):
    def test_command_lines_and_urls(self) -> None:
        stdio = parse_server("A=1 B='two words' npx -y '@scope/server'")
        self.assertEqual((stdio.transport, stdio.argv, dict(stdio.env)),
                         ("stdio", ("npx", "-y", "@scope/server"), {"A": "1", "B": "two words"}))
        self.assertEqual(stdio.label, "npx -y @scope/server")  # the environment may hold secrets: not shown
        http = parse_server("https://mcp.example.com/api/mcp?key=abc#EXAMPLE_TOKEN")
        self.assertEqual((http.transport, http.token_env), ("http", "EXAMPLE_TOKEN"))
        self.assertEqual(http.label, "https://mcp.example.com/api/mcp?\u2026")
        self.assertEqual(http.origin, "https://mcp.example.com:443")

    def test_the_label_hides_values_of_flags_named_like_credentials(self) -> None:
        label = parse_server("srv --api-key=abc123 --token xyz789 --root '/tmp/a b' --AUTH hdr --verbose").label
        self.assertEqual(label, "srv --api-key=\u2026 --token \u2026 --root '/tmp/a b' --AUTH \u2026 --verbose")

    def test_what_is_refused(self) -> None:
        for text, reason in (("", "empty"), ("https://user:pw@host/mcp", "credentials"),
                             ("https://host/mcp#not-a-name", "not a variable name"), ("ftp://host/x", "http://"),
                             ("X=1", "names no command"), ("'unclosed", "cannot split")):
            with self.subTest(text=text):
                with self.assertRaises(ValueError) as caught:
                    parse_server(text)
                self.assertIn(reason, str(caught.exception))

    def test_the_world_placeholder(self) -> None:
        address = parse_server("FILE={world}/m.jsonl server --root {world}").with_world("/tmp/w 1")
        self.assertEqual(address.argv, ("server", "--root", "/tmp/w 1"))
        self.assertEqual(address.env["FILE"], "/tmp/w 1/m.jsonl")


# -- a hostile Streamable HTTP server ----------------------------------------------------------------------

class _HostileHttp(http.server.BaseHTTPRequestHandler):
    """Path decides the behaviour; every request's Authorization header is recorded."""

    seen_authorization: list[str | None] = []
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        type(self).seen_authorization.append(self.headers.get("Authorization"))
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        path = self.path
        if "id" not in body:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/redirect":
            self.send_response(307)
            self.send_header("Location", self.server.elsewhere + "/mcp?token=x")  # type: ignore[attr-defined]
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/auth" and self.headers.get("Authorization") != "Bearer s3cret-token":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/null-id-error":
            self.reply({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad request\nforged line"}},
                       status=400)
            return
        method = body["method"]
        if method == "server/discover":
            self.reply({"jsonrpc": "2.0", "id": body["id"], "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-hostile", "version": "1"}}})
        elif method == "tools/call" and path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for _ in range(200):
                    self.wfile.write(b": still here\n")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                return
        elif method == "tools/call" and path == "/flood":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"jsonrpc":"2.0","id":' + str(body["id"]).encode() + b',"result":{"x":"' + b"y" * 200_000)
            except OSError:
                return
        else:
            self.reply({"jsonrpc": "2.0", "id": body["id"], "result": {
                "resultType": "complete", "content": [{"type": "text", "text": "ok"}], "tools": []}})

    def reply(self, message: Any, status: int = 200) -> None:
        data = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that hangs up (as ours does at a deadline) is not news


class HostileHttpServerTest(unittest.TestCase, ErrorShape):
    @classmethod
    def setUpClass(cls) -> None:
        cls.servers = []
        for _ in range(2):
            server = _QuietServer(("127.0.0.1", 0), _HostileHttp)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            cls.servers.append(server)
        cls.base = f"http://127.0.0.1:{cls.servers[0].server_address[1]}"
        cls.servers[0].elsewhere = f"http://127.0.0.1:{cls.servers[1].server_address[1]}"  # type: ignore[attr-defined]

    @classmethod
    def tearDownClass(cls) -> None:
        for server in cls.servers:
            server.shutdown()
            server.server_close()

    def setUp(self) -> None:
        _HostileHttp.seen_authorization = []
        os.environ["AGENT_LAB_TEST_MCP_TOKEN"] = "s3cret-token"
        self.addCleanup(os.environ.pop, "AGENT_LAB_TEST_MCP_TOKEN", None)

    def test_the_bearer_token_goes_to_its_origin_and_a_redirect_is_not_followed(self) -> None:
        server = f"{self.base}/redirect#AGENT_LAB_TEST_MCP_TOKEN"
        with self.assertRaises(McpError) as caught:
            connect(server, timeout_s=TIMEOUT_S, connect_timeout_s=TIMEOUT_S, versions=MODERN_VERSIONS)
        self.assertOneLineAboutServer(caught.exception, server)
        self.assertIn("redirect", str(caught.exception))
        self.assertIn(self.servers[0].elsewhere.replace("http://", ""), str(caught.exception))  # type: ignore[attr-defined]
        self.assertNotIn("token=x", str(caught.exception))
        self.assertEqual(len(_HostileHttp.seen_authorization), 1)  # only the first server was ever asked
        self.assertNotIn("s3cret-token", str(caught.exception))

    def test_a_token_from_the_named_variable_is_sent(self) -> None:
        with connect(f"{self.base}/auth#AGENT_LAB_TEST_MCP_TOKEN", timeout_s=TIMEOUT_S) as client:
            self.assertEqual(client.call_tool("x", {})["content"][0]["text"], "ok")
        self.assertTrue(all(value == "Bearer s3cret-token" for value in _HostileHttp.seen_authorization))
        self.assertNotIn("s3cret-token", repr(client) + repr(client.transport))

    def test_without_the_token_the_refusal_says_how_to_give_one(self) -> None:
        with self.assertRaises(McpConnectionError) as caught:
            connect(f"{self.base}/auth", timeout_s=TIMEOUT_S, versions=MODERN_VERSIONS)
        self.assertIn("HTTP 401", str(caught.exception))
        with self.assertRaises(McpConnectionError) as unset:
            connect(f"{self.base}/auth#AGENT_LAB_UNSET_VARIABLE", timeout_s=TIMEOUT_S)
        self.assertIn("AGENT_LAB_UNSET_VARIABLE", str(unset.exception))
        self.assertFalse(unset.exception.sent)

    def test_a_trickling_event_stream_is_cut_at_the_deadline(self) -> None:
        with connect(f"{self.base}/trickle", timeout_s=TIMEOUT_S) as client:
            started = time.monotonic()
            with self.assertRaises(McpTimeout):
                client.call_tool("x", {})
            self.assertLess(time.monotonic() - started, TIMEOUT_S + SLACK_S)

    def test_a_body_over_the_limit_is_refused(self) -> None:
        with connect(f"{self.base}/flood", timeout_s=TIMEOUT_S, max_message_bytes=64 * 1024) as client:
            with self.assertRaises(McpProtocolError) as caught:
                client.call_tool("x", {})
        self.assertIn("larger than 65536 bytes", str(caught.exception))

    def test_an_error_refused_before_its_id_was_read_answers_the_request(self) -> None:
        with self.assertRaises(McpRemoteError) as caught:
            connect(f"{self.base}/null-id-error", timeout_s=TIMEOUT_S, versions=MODERN_VERSIONS)
        self.assertEqual(caught.exception.code, -32600)
        self.assertNotIn("\n", str(caught.exception))  # the server's line break is not ours to print

    def test_a_server_that_is_not_there(self) -> None:
        import socket

        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()  # bound once, never listening: nothing answers there
        with self.assertRaises(McpConnectionError) as caught:
            connect(f"http://127.0.0.1:{port}/mcp", timeout_s=TIMEOUT_S, versions=MODERN_VERSIONS)
        self.assertIn("connection failed", str(caught.exception))
        self.assertFalse(caught.exception.sent)


if __name__ == "__main__":
    unittest.main()
