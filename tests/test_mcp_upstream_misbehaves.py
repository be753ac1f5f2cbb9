"""The MCP client against an upstream that stops reading, floods requests of its own, or stalls a listing.

Each test states a promise that did not hold on main (9b92a30):
- a tools/call queued behind a message the server had not read yet, and given up at its deadline, was
  reported as never sent (`unavailable`, which frees its idempotency key) and then written anyway once
  the server read again: a retry under the same key was its second effect;
- a server that sends ping requests and never reads its stdin had every reply queued in the client's
  process (700 MB after 8 s of pings);
- a call run inline waited for another call's re-listing of a stalled server past its own deadline;
- over Streamable HTTP, a call given up while its connection was still being made was reported as never
  sent, and was posted anyway once the connection was made;
- a client closed (a gateway's shutdown) while a call waited reported it never sent whatever it had done:
  one already in a stdio server's pipe, or posted, ran once the server read it, and one still queued or
  connecting was written or posted anyway during the close (on main at 995c822).
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_lab import Actor, Registry, ToolCall
from agent_lab.mcp_client import McpError, McpTimeout, connect, import_tools
from agent_lab.mcp_client.wire import MAX_SERVER_REQUEST_REPLIES
from agent_lab.stores.memory import InMemoryReceiptStore

HERE = Path(__file__).resolve().parent
ACTOR = Actor(id="agent-1", tenant="acme", permissions={"notes:write"})


class _Upstream(unittest.TestCase):
    def upstream(self, mode: str) -> tuple[Any, str]:
        world = tempfile.TemporaryDirectory()
        self.addCleanup(world.cleanup)
        client = connect(f"{sys.executable} {HERE / 'mcp_hostile_server.py'} {mode} {world.name}", timeout_s=10)
        self.addCleanup(client.close)
        self.addCleanup(self.release, world.name)  # (cleanups run last first: released before it is closed)
        return client, world.name

    @staticmethod
    def release(world: str) -> None:
        Path(world, "release").touch()

    @staticmethod
    def notes(world: str) -> str:
        path = Path(world, "notes.jsonl")
        return path.read_text(encoding="utf-8") if path.exists() else ""


class AnUnsentCallIsNeverSentLaterTest(_Upstream):
    def test_a_call_reported_never_sent_never_reaches_the_server_later(self) -> None:
        client, world = self.upstream("deaf")
        client.call_tool("append_note", {"note": "hold", "request_id": "h"})  # the server now reads nothing
        bulk = client.transport.send({"jsonrpc": "2.0", "method": "notifications/message",
                                      "params": {"level": "info", "data": "x" * (1 << 20)}})
        self.assertTrue(bulk.started.wait(10))  # the writer is stuck in it: the pipe is full
        with self.assertRaises(McpTimeout) as given_up:
            client.call_tool("append_note", {"note": "effect-K", "request_id": "K"}, timeout_s=0.2)
        self.assertFalse(given_up.exception.sent)  # what lets a retry run under the same key
        self.release(world)
        client.call_tool("echo", {"text": "after"})  # answered once the server has read all that came before
        self.assertNotIn("effect-K", self.notes(world))

    def test_a_keyed_write_given_up_unsent_and_retried_has_one_effect(self) -> None:
        client, world = self.upstream("deaf")
        policy = {"tools": {"append_note": {"permission": "notes:write", "effect": "write", "approval": "never",
                                            "idempotency_key": "request_id", "timeout_ms": 200,
                                            "max_input_bytes": 1 << 21}}}
        store = InMemoryReceiptStore()
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        import_tools(client, policy=policy).register(registry)
        held = registry.invoke(ToolCall("append_note", {"note": "hold", "request_id": "h"}), actor=ACTOR)
        self.assertTrue(held.ok, held.to_model())
        bulk = client.transport.send({"jsonrpc": "2.0", "method": "notifications/message",
                                      "params": {"level": "info", "data": "x" * (1 << 20)}})
        self.assertTrue(bulk.started.wait(10))
        call = ToolCall("append_note", {"note": "effect-K", "request_id": "K"})
        registry.invoke(call, actor=ACTOR)
        self.release(world)
        registry.close(wait=True)  # the given-up handler has settled the key
        retry = Registry(receipts=store)  # the same receipts, in a fresh registry
        self.addCleanup(retry.close)
        import_tools(client, policy=policy).register(retry)
        self.assertTrue(retry.invoke(call, actor=ACTOR).ok)  # it never reached the server: now it runs, once
        client.call_tool("echo", {"text": "after"})
        self.assertEqual(self.notes(world).count("effect-K"), 1)


class ServerRequestsHoldBoundedMemoryTest(_Upstream):
    def test_pings_of_a_server_that_never_reads_queue_a_bounded_number_of_replies(self) -> None:
        client, _ = self.upstream("ping-flood")
        result = client.call_tool("echo", {"text": "x"})  # answered after its 20,000 pings, all read by then
        self.assertEqual(result["content"][0]["text"], "pinged")
        queued = client.transport._outbox.qsize()  # replies written by nobody: the server reads nothing
        self.assertLessEqual(queued, MAX_SERVER_REQUEST_REPLIES)


class AStalledListingHoldsNoOtherCallTest(_Upstream):
    def test_an_inline_call_answers_while_another_calls_listing_is_stalled(self) -> None:
        client, world = self.upstream("stall-relist")
        policy = {"tools": {
            "echo": {"permission": "notes:write", "effect": "read", "approval": "never", "timeout_ms": 200,
                     "execution": "inline"},
            "slow": {"permission": "notes:write", "effect": "read", "approval": "never", "timeout_ms": 60_000},
            "rug_pull": {"permission": "notes:write", "effect": "read", "approval": "never"}}}
        registry = Registry()
        self.addCleanup(registry.close)
        import_tools(client, policy=policy).register(registry)
        registry.invoke(ToolCall("rug_pull", {}), actor=ACTOR)  # the server says its tools changed
        holder = threading.Thread(target=registry.invoke, args=(ToolCall("slow", {"seconds": 0}),),
                                  kwargs={"actor": ACTOR}, daemon=True)
        holder.start()
        for _ in range(500):  # the holder's listing has reached the server, which does not answer it
            if Path(world, "listing").exists():
                break
            threading.Event().wait(0.02)
        answered: list[Any] = []
        inline = threading.Thread(target=lambda: answered.append(
            registry.invoke(ToolCall("echo", {"text": "hi"}), actor=ACTOR)), daemon=True)
        inline.start()
        inline.join(20)  # far past its 200 ms; the stalled listing waits for the release
        self.assertTrue(answered, "the inline call waited on another call's stalled listing")
        self.assertEqual(answered[0].error.code, "tool_timeout")
        self.assertTrue(holder.is_alive())  # it was answered while the other listing was still stalled


if __name__ == "__main__":
    unittest.main()


class ClosingTheClientMidCallTest(_Upstream):
    """A client closed while a call waits (ServerRegistry.close: a gateway's shutdown) says of the call what
    the call did: one reported not sent frees its idempotency key, and a registry retries it."""

    def call_while_closing(self, client: Any, world: str, *, queued: bool) -> tuple[McpError, threading.Thread]:
        if queued:  # the writer is stuck in a message the deaf server has not read: the call waits behind it
            bulk = client.transport.send({"jsonrpc": "2.0", "method": "notifications/message",
                                          "params": {"level": "info", "data": "x" * (1 << 20)}})
            self.assertTrue(bulk.started.wait(10))
        handed, handles, send = threading.Event(), [], client.transport.send

        def recording(message: Any, **options: Any) -> Any:
            handle = send(message, **options)
            if message.get("method") == "tools/call":
                handles.append(handle)
                handed.set()
            return handle

        client.transport.send = recording
        failed: list[McpError] = []

        def call() -> None:
            try:
                client.call_tool("append_note", {"note": "effect-K", "request_id": "K"})
            except McpError as error:
                failed.append(error)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        self.assertTrue(handed.wait(10))
        if queued:
            self.assertFalse(handles[0].started.is_set())
        else:
            self.assertTrue(handles[0].started.wait(10))  # in the server's pipe, which it reads later
        closing = threading.Thread(target=client.close, daemon=True)
        closing.start()
        caller.join(10)
        self.assertEqual(len(failed), 1)
        return failed[0], closing

    def test_a_call_in_the_servers_pipe_when_the_client_closes_is_not_reported_unsent(self) -> None:
        client, world = self.upstream("deaf")
        client.call_tool("append_note", {"note": "hold", "request_id": "h"})  # the server now reads nothing
        error, closing = self.call_while_closing(client, world, queued=False)
        self.assertTrue(error.sent)  # the server reads it in close's grace and runs it: its outcome is unknown
        self.release(world)
        closing.join(30)

    def test_a_call_queued_when_the_client_closes_is_never_written(self) -> None:
        client, world = self.upstream("deaf")
        client.call_tool("append_note", {"note": "hold", "request_id": "h"})
        error, closing = self.call_while_closing(client, world, queued=True)
        self.assertFalse(error.sent)
        self.release(world)  # the server reads again while the client closes: what is queued is not written
        closing.join(30)
        self.assertFalse(closing.is_alive())
        self.assertNotIn("effect-K", self.notes(world))


class _Counting(BaseHTTPRequestHandler):
    """A stateless-enough Streamable HTTP server that counts the tools/call requests it receives."""

    calls: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            self.send_response(202)
            self.end_headers()
            return
        if method == "initialize":
            answer: dict[str, Any] = {"result": {"protocolVersion": message["params"]["protocolVersion"],
                                                 "capabilities": {"tools": {}}, "serverInfo": {"name": "counting"}}}
        elif method == "tools/call":
            self.calls.append(message["params"]["arguments"]["note"])
            answer = {"result": {"content": [{"type": "text", "text": "noted"}]}}
        else:
            answer = {"error": {"code": -32601, "message": "Method not found"}}
        data = json.dumps({"jsonrpc": "2.0", "id": request_id, **answer}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _slow_to_connect(client: Any) -> tuple[threading.Event, threading.Event, threading.Event]:
    """Make each of `client`'s HTTP connections wait to be made until the first event is set; the
    second is set once an exchange's connection is closed (its exchange is over), the third once one
    waits to be made."""
    connecting, closed, waiting = threading.Event(), threading.Event(), threading.Event()
    plain = client.transport._connection

    def slow_to_connect(timeout: float) -> Any:  # a connection still being made at the call's deadline
        connection = plain(timeout)
        connect_now, close_now = connection.connect, connection.close

        def connect_late() -> None:
            waiting.set()
            connecting.wait(10)
            connect_now()

        def close() -> None:
            close_now()
            closed.set()

        connection.connect, connection.close = connect_late, close
        return connection

    client.transport._connection = slow_to_connect
    return connecting, closed, waiting


class AnUnsentHttpCallIsNeverSentLaterTest(unittest.TestCase):
    def test_a_call_given_up_while_connecting_is_never_posted(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        _Counting.calls = []
        client = connect(f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout_s=10)
        self.addCleanup(client.close)
        connecting, closed, _ = _slow_to_connect(client)
        with self.assertRaises(McpTimeout) as given_up:
            client.call_tool("append_note", {"note": "effect-K"}, timeout_s=0.2)
        self.assertFalse(given_up.exception.sent)
        connecting.set()  # the connection is made after all
        self.assertTrue(closed.wait(10))  # and its exchange is over
        self.assertEqual(_Counting.calls, [])

    def test_a_call_connecting_when_the_client_closes_is_never_posted(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        _Counting.calls = []
        client = connect(f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout_s=10)
        connecting, closed, waiting = _slow_to_connect(client)
        failed: list[McpError] = []

        def call() -> None:
            try:
                client.call_tool("append_note", {"note": "effect-K"})
            except McpError as error:
                failed.append(error)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        self.assertTrue(waiting.wait(10))
        client.close()  # a gateway's shutdown, while the call's connection is being made
        caller.join(10)
        self.assertEqual(len(failed), 1)
        self.assertFalse(failed[0].sent)
        connecting.set()  # the connection is made after all
        self.assertTrue(closed.wait(10))
        self.assertEqual(_Counting.calls, [])


class _TrickledDelete(_Counting):
    """A handshake-era session (Mcp-Session-Id) whose DELETE is answered one header line at a time,
    for as long as the test lets it."""

    release = threading.Event()

    def end_headers(self) -> None:
        if self.command == "POST":
            self.send_header("Mcp-Session-Id", "session-1")
        super().end_headers()

    def do_DELETE(self) -> None:  # noqa: N802 - the http.server name
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        while not self.release.wait(0.5):
            self.wfile.write(b"X-Slow: a\r\n")
            self.wfile.flush()


class ClosingAnHttpUpstreamEndsTest(unittest.TestCase):
    def test_close_ends_though_the_server_answers_its_delete_a_line_at_a_time(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _TrickledDelete)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        _TrickledDelete.release.clear()
        self.addCleanup(_TrickledDelete.release.set)
        client = connect(f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout_s=10)
        self.assertEqual(client.transport.session_id, "session-1")
        closing = threading.Thread(target=client.close, daemon=True)
        closing.start()
        closing.join(30)  # far past CLOSE_TIMEOUT_S; the server trickles until the test ends
        self.assertFalse(closing.is_alive(), "close() waited for a server answering its DELETE a line at a time")
