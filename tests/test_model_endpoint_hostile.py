"""model-eval's HTTP client against hostile endpoints and proxies on loopback addresses (issue 20, items 2,
3 and 5).

- A redirect is never followed: the key goes to the configured origin only (a 302 to another host got
  `Authorization: Bearer ...`). Every 3xx, to another host, another port or a URL with user info, is an
  infrastructure failure naming its status, and nothing reaches where `Location` points.
- The timeout bounds the whole exchange: a server that trickles its body, its headers or never answers
  a TLS handshake is cut off at the deadline (one byte every half second held a 2 s request for 45 s).
  The tests assert what the server saw (cut off before it finished), never how long anything took.
- Proxies the environment names: an https endpoint is reached through CONNECT, which carries no key; a
  key is never sent to a proxy over plain http (refused, nothing sent).
- A key with white space around it is sent without it; one with a control or non-ASCII character inside
  is refused, and no message shows any part of it.

Endpoints listen on 127.0.0.1; a host the client must not reach is 127.0.0.2 (also loopback).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import threading
import unittest
from pathlib import Path
from typing import Any, Callable, Optional
from unittest import mock

from agent_lab import cli
from agent_lab.modeleval.models import HttpRequest, InfrastructureFailure, UrllibTransport
from agent_lab.modeleval.transcript import TurnContext

from model_eval_fixtures import TempDirMixin, get_task, write_tasks

KEY = "sk-hostile-0123456789abcdef"
CONTEXT = TurnContext("task", "surface", 1, 0)
ANSWER = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hello"}}]}).encode()


class RawServer:
    """A TCP server on `host` that hands each connection to `serve(connection, request_bytes)` on its own
    thread and keeps every request it read. `stop` ends whatever a handler is still doing."""

    def __init__(self, serve: Callable[[socket.socket, bytes, "RawServer"], None], host: str = "127.0.0.1") -> None:
        self.serve = serve
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self.finished_sending = threading.Event()
        self.cut_off = threading.Event()
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            try:
                request = _read_request(connection)
                self.requests.append(request)
                self.serve(connection, request, self)
            except OSError:
                self.cut_off.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()

    def trickle(self, connection: socket.socket, data: bytes, every_s: float) -> None:
        """Send `data` one byte at a time; note whether the client cut the connection before the end."""
        for byte in data:
            if self.stop.wait(every_s):
                return
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                self.cut_off.set()
                return
        self.finished_sending.set()


def _read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _answer(status: int, body: bytes = b"", headers: Optional[dict[str, str]] = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}", "content-type: application/json",
             "connection: close", *(f"{name}: {value}" for name, value in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _send(url: str, *, timeout_s: float = 5.0, attempts: int = 1, key: Optional[str] = KEY) -> Any:
    request = HttpRequest(base_url=url, path="/chat/completions", body={"messages": []},
                          secret_headers={"authorization": f"Bearer {key}"} if key else {})
    return UrllibTransport(timeout_s=timeout_s, max_attempts=attempts, sleep=lambda seconds: None).send(request, CONTEXT)


class ServerTestCase(unittest.TestCase):
    def server(self, serve: Callable[[socket.socket, bytes, RawServer], None], host: str = "127.0.0.1") -> RawServer:
        server = RawServer(serve, host)
        self.addCleanup(server.close)
        return server


class RedirectsTest(ServerTestCase):
    def test_no_redirect_is_followed_and_each_is_an_infrastructure_failure_naming_its_status(self) -> None:
        thief = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)), "127.0.0.2")
        same_host = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)))
        targets = {
            "another host": f"{thief.url}/steal",
            "the same host on another port": f"{same_host.url}/steal",
            "a URL with user info": f"http://user:pass@127.0.0.2:{thief.port}/steal",
            "a relative path": "/elsewhere",
        }
        for status in (301, 302, 303, 307, 308):
            for label, location in targets.items():
                with self.subTest(status=status, location=label):
                    endpoint = self.server(lambda connection, request, server: connection.sendall(
                        _answer(status, headers={"location": location})))
                    with self.assertRaises(InfrastructureFailure) as failure:
                        _send(endpoint.url, attempts=3)
                    self.assertIn(f"HTTP {status}", failure.exception.reason)
                    self.assertIn("not followed", failure.exception.reason)
                    self.assertEqual(failure.exception.attempts, 1)  # not retried either
                    self.assertEqual(len(endpoint.requests), 1)
                    self.assertIn(KEY.encode(), endpoint.requests[0])
        self.assertEqual(thief.requests, [])
        self.assertEqual(same_host.requests, [])


class WholeResponseTimeoutTest(ServerTestCase):
    def assert_cut_off(self, server: RawServer) -> None:
        with self.assertRaises(InfrastructureFailure) as failure:
            _send(server.url, timeout_s=0.5, attempts=1)
        self.assertIn("within the 0.5 s timeout", failure.exception.reason)
        self.assertTrue(server.cut_off.wait(5), "the client never cut the connection")
        self.assertFalse(server.finished_sending.is_set(), "the client waited for the whole trickle")

    def test_a_body_trickled_one_byte_at_a_time_is_cut_off_at_the_deadline(self) -> None:
        def serve(connection: socket.socket, request: bytes, server: RawServer) -> None:
            head, _, body = _answer(200, b" " * 60 + ANSWER).partition(b"\r\n\r\n")
            connection.sendall(head + b"\r\n\r\n")
            server.trickle(connection, body, 0.05)  # the whole body would take over 10 s

        self.assert_cut_off(self.server(serve))

    def test_headers_trickled_one_byte_at_a_time_are_cut_off_at_the_deadline(self) -> None:
        self.assert_cut_off(self.server(lambda connection, request, server: server.trickle(
            connection, _answer(200, ANSWER, {f"x-pad-{n}": "y" * 20 for n in range(8)}), 0.05)))

    def test_a_server_that_never_answers_a_tls_handshake_is_cut_off_at_the_deadline(self) -> None:
        seen = threading.Event()

        def silent(connection: socket.socket) -> None:
            seen.set()
            try:
                while connection.recv(65536):  # the ClientHello, then nothing until the client hangs up
                    pass
                cut.set()
            except OSError:
                cut.set()

        cut = threading.Event()
        listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)

        def accept() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(10)
                silent(connection)

        threading.Thread(target=accept, daemon=True).start()
        with self.assertRaises(InfrastructureFailure) as failure:
            _send(f"https://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.5)
        self.assertIn("timeout", failure.exception.reason)
        self.assertTrue(seen.is_set())
        self.assertTrue(cut.wait(5), "the client left the handshake hanging")

    def test_a_prompt_answer_still_comes_through(self) -> None:
        server = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)))
        self.assertEqual(_send(server.url, timeout_s=5).body["choices"][0]["message"]["content"], "hello")


class ProxiesTest(ServerTestCase):
    def proxy(self) -> RawServer:
        return self.server(lambda connection, request, server: connection.sendall(_answer(403)))

    def test_an_https_endpoint_is_reached_through_connect_which_carries_no_key(self) -> None:
        proxy = self.proxy()
        with mock.patch.dict(os.environ, {"HTTPS_PROXY": proxy.url, "https_proxy": proxy.url, "NO_PROXY": "",
                                          "no_proxy": ""}):
            with self.assertRaises(InfrastructureFailure):
                _send("https://127.0.0.2:9")
        [request] = proxy.requests
        self.assertTrue(request.startswith(b"CONNECT 127.0.0.2:9 "))
        self.assertNotIn(KEY.encode(), request)

    def test_a_key_is_never_sent_to_a_proxy_over_plain_http(self) -> None:
        proxy = self.proxy()
        with mock.patch.dict(os.environ, {"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "",
                                          "no_proxy": ""}):
            with self.assertRaises(InfrastructureFailure) as failure:
                _send("http://127.0.0.2:9", attempts=3)
            self.assertIn("NO_PROXY", failure.exception.reason)
            self.assertEqual(failure.exception.attempts, 1)
            self.assertEqual(proxy.requests, [])
            with self.assertRaises(InfrastructureFailure) as keyless:  # no key: the proxy may carry it
                _send("http://127.0.0.2:9", key=None)
            self.assertEqual(keyless.exception.reason, "the endpoint answered HTTP 403")
        self.assertEqual(len(proxy.requests), 1)
        self.assertNotIn(b"authorization", proxy.requests[0].lower())

    def test_a_host_in_no_proxy_and_the_loopback_endpoint_go_direct_with_the_key(self) -> None:
        proxy = self.proxy()
        endpoint = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)), "127.0.0.2")
        local = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)))
        with mock.patch.dict(os.environ, {"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "127.0.0.2",
                                          "no_proxy": "127.0.0.2"}):
            _send(endpoint.url)
            _send(local.url)
        self.assertEqual(proxy.requests, [])
        self.assertIn(KEY.encode(), endpoint.requests[0])
        self.assertIn(KEY.encode(), local.requests[0])


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue() + err.getvalue()


class KeysTest(TempDirMixin, ServerTestCase):
    def model_eval(self, url: str, key: str) -> tuple[int, str]:
        directory = self.make_dir()
        tasks = write_tasks(directory, [get_task()])
        with mock.patch.dict(os.environ, {"H20_KEY": key}):
            code, output = run("model-eval", "--model", f"openai:m@{url}#H20_KEY", "--tasks", tasks, "--repeats", "1",
                               "--attempts", "1", "--timeout", "5", "--out", str(directory / "out"))
        written = "".join(path.read_text(encoding="utf-8") for path in (directory / "out").glob("*")) if (
            directory / "out").exists() else ""
        return code, output + written

    def assert_no_part_of_the_key(self, text: str) -> None:
        core = KEY.strip()
        pieces = [core[start:start + 5] for start in range(len(core) - 4)]
        self.assertFalse([piece for piece in pieces if piece in text], "a part of the key was shown")

    def test_white_space_around_a_key_is_dropped_before_it_is_sent(self) -> None:
        server = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)))
        for key in (KEY + "\n", f"  {KEY}\r\n", f"\t{KEY} "):
            with self.subTest(key=repr(key).replace(KEY, "KEY")):
                server.requests.clear()
                code, output = self.model_eval(server.url, key)
                self.assertIn(code, (0, 1))  # the stand-in's answer is no tool call; the run itself works
                self.assertTrue(f"\r\nauthorization: bearer {KEY.lower()}\r\n".encode() in server.requests[0].lower())
                self.assert_no_part_of_the_key(output)

    def test_a_key_with_a_control_or_non_ascii_character_inside_is_refused_without_showing_it(self) -> None:
        server = self.server(lambda connection, request, server: connection.sendall(_answer(200, ANSWER)))
        for inside in ("\n", "\r", "\t", "\x1b", "\x7f", "\u2028", "é"):
            with self.subTest(character=repr(inside)):
                code, output = self.model_eval(server.url, KEY[:12] + inside + KEY[12:])
                self.assertEqual(code, 2)
                self.assertIn("H20_KEY", output)
                self.assertIn("the key is not shown", output)
                self.assert_no_part_of_the_key(output)
        self.assertEqual(server.requests, [])


if __name__ == "__main__":
    unittest.main()
