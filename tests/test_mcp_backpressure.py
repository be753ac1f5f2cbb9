"""The MCP server's memory is bounded whatever the client does, and a handler's sys.exit is answered.

A client that never reads stdout used to make the server hold every answer it owed: 2025-03-26 batches
of cheap requests with one call last were accepted one after another while the workers that had
finished earlier batches sat blocked on the full pipe (904 MB after 12 MB of input). Now an accepted
call holds its place, with the bytes of its line and of the answers made for it, until its answer is
written; past `MAX_HELD_BYTES` (or `MAX_PENDING_CALLS`) a call is refused by the reader itself, which
then blocks on the pipe like every writer: the server stops reading. These tests measure what the
server read and held (bytes, answers), never how long anything took; the limits are patched small so
the reproducer stays cheap.

Also here: a handler that calls `sys.exit(3)` under `serve` (and `serve-mcp`, a real process) gets an
error answer, and the server keeps serving.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

from agent_lab import Actor, Registry, ToolSpec
from agent_lab import mcp
from agent_lab.mcp import SERVER_BUSY, serve

REPO_ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 30.0  # a cap on waiting for the server to reach a state; never reached when all is well
ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def encoded(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class Feeder:
    """The server's stdin: the given lines in order, then end of input (with `ended`, at once; else
    once `end()` is called, which also ends it before the lines run out). It counts what the server has
    read, and lets a handler wait until the server has moved past a line."""

    def __init__(self, lines: list[bytes], *, ended: bool = False) -> None:
        self._lines = lines
        self.read = 0  # lines handed to the server
        self.bytes_read = 0
        self._changed = threading.Condition()
        self._ended = False
        self._ends_after_lines = ended

    def readline(self, limit: int = -1) -> bytes:
        with self._changed:
            if self.read < len(self._lines) and not self._ended:
                line = self._lines[self.read]
                self.read += 1
                self.bytes_read += len(line)
                self._changed.notify_all()
                return line
            if not self._ends_after_lines:
                self._changed.wait_for(lambda: self._ended, WAIT_S)
            return b""

    def wait_past(self, index: int) -> None:
        """Wait until the server has asked for the line after line `index` (it is done with `index`)."""
        with self._changed:
            self._changed.wait_for(lambda: self.read > index + 1 or self._ended, WAIT_S)

    def exhausted(self) -> bool:
        return self.read >= len(self._lines)

    def end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()


class StalledStdout:
    """The server's stdout when the client never reads it: the first `capacity` bytes fit (the pipe's
    buffer), every later write blocks until `drain()`. Counts the bytes written."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.written = bytearray()
        self._drained = threading.Event()

    def write(self, data: bytes) -> int:
        if len(self.written) + len(data) > self.capacity:
            self._drained.wait(WAIT_S)
        self.written += data
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> None:
        self._drained.set()

    def answers(self) -> list[Any]:
        return [json.loads(line) for line in bytes(self.written).splitlines()]


def reader_waits_to_write(thread: threading.Thread) -> bool:
    """Whether the server's reader thread is inside the protocol writer (waiting for it, or for the pipe)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith("mcp.py") and code.co_name.startswith("send"):
            return True
        frame = frame.f_back
    return False


class NeverReadingClientTest(unittest.TestCase):
    HELD = 64 * 1024  # MAX_HELD_BYTES for these tests
    BATCH_ANSWERS = 32 * 1024  # MAX_BATCH_ANSWER_BYTES

    def setUp(self) -> None:
        for name, value in (("MAX_HELD_BYTES", self.HELD), ("MAX_BATCH_ANSWER_BYTES", self.BATCH_ANSWERS)):
            patcher = mock.patch.object(mcp, name, value, create=True)
            patcher.start()
            self.addCleanup(patcher.stop)

    def serve_until_stuck(self, registry: Registry, lines: list[bytes], stdout: StalledStdout,
                          feeder: Feeder) -> tuple[Any, threading.Thread]:
        """Serve `lines` to a client that never reads, until the server has read them all or its reader
        is blocked on writing; the servers's internals are returned for the bounds they measure."""
        servers: list[Any] = []
        real_server = mcp._Server

        def keep(*arguments: Any, **options: Any) -> Any:
            servers.append(real_server(*arguments, **options))
            return servers[-1]

        patcher = mock.patch.object(mcp, "_Server", side_effect=keep)
        patcher.start()
        self.addCleanup(patcher.stop)
        thread = threading.Thread(target=serve, args=(registry,), kwargs={
            "actor": ACTOR, "stdin": feeder, "stdout": stdout}, daemon=True)
        thread.start()

        def finish() -> None:
            stdout.drain()
            feeder.end()
            thread.join(WAIT_S)

        self.addCleanup(finish)
        give_up = time.monotonic() + WAIT_S
        while not feeder.exhausted() and not reader_waits_to_write(thread) and time.monotonic() < give_up:
            time.sleep(0.01)
        self.assertTrue(feeder.exhausted() or reader_waits_to_write(thread), "the server neither read nor blocked")
        return (servers[0] if servers else None), thread

    def test_batches_with_a_call_last_stop_being_read_once_the_unwritten_answers_fill_the_backlog(self) -> None:
        """The issue's reproducer: 2025-03-26 batches of cheap requests with one call last; each call
        finishes once the server has read the next line, so its batch's answer is written by a worker
        (which blocks on the full pipe) while the reader goes on."""
        pings_per_batch = 200
        lines = [encoded(INITIALIZE), encoded(INITIALIZED)]
        first_batch = len(lines)
        for batch in range(400):  # about 3.4 MB of input: far more than the backlog may hold
            line = first_batch + batch
            lines.append(encoded([{"jsonrpc": "2.0", "id": f"{batch}-{index}", "method": "ping"}
                                  for index in range(pings_per_batch)]
                                 + [{"jsonrpc": "2.0", "id": f"{batch}-call", "method": "tools/call",
                                     "params": {"name": "after", "arguments": {"line": line}}}]))
        feeder = Feeder(lines)
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="after", description="Ends once the server has read on.",
                                   input_schema={"type": "object"}, timeout_ms=WAIT_S * 1000),
                          lambda arguments: feeder.wait_past(arguments["line"]) or {})
        stdout = StalledStdout(capacity=len(encoded({"jsonrpc": "2.0", "id": 0, "result": {}})) + 400)
        server, thread = self.serve_until_stuck(registry, lines, stdout, feeder)

        batch_bytes = len(lines[first_batch])
        self.assertFalse(feeder.exhausted(), "the server read every batch although no answer was read")
        # What the server read and still owes an answer for: the held lines (at most MAX_HELD_BYTES),
        # the line the reader is stuck answering, and the one a finished call's wait let it read.
        owed_bytes = feeder.bytes_read - len(lines[0]) - len(lines[1])
        self.assertLessEqual(owed_bytes, self.HELD + 2 * batch_bytes)
        answers_owed = (feeder.read - first_batch) * (pings_per_batch + 1)
        self.assertLessEqual(answers_owed, (self.HELD // batch_bytes + 2) * (pings_per_batch + 1))
        self.assertLessEqual(server.backlog.peak_calls, mcp.MAX_PENDING_CALLS)
        # Lines and encoded answers held: the bound, plus one batch's answers counted after it was accepted.
        self.assertLessEqual(server.backlog.peak_bytes, self.HELD + 2 * batch_bytes)

    def test_calls_with_large_answers_stop_running_once_unread_answers_fill_the_backlog(self) -> None:
        output = {"blob": "x" * 20_000}  # each answer about 40 KB: its output twice (structured and as text)
        runs: list[int] = []
        registry = Registry()
        self.addCleanup(registry.close)

        def big(arguments: Any) -> Any:  # ends once the reader has moved on: a worker writes its answer
            runs.append(1)
            feeder.wait_past(arguments["line"])
            return output

        registry.register(ToolSpec(name="big", description="A large answer.", input_schema={"type": "object"},
                                   timeout_ms=WAIT_S * 1000), big)
        lines = [encoded(INITIALIZE), encoded(INITIALIZED)]
        lines += [encoded({"jsonrpc": "2.0", "id": line, "method": "tools/call",
                           "params": {"name": "big", "arguments": {"line": line}}}) for line in range(2, 42)]
        lines.append(encoded({"jsonrpc": "2.0", "id": "last", "method": "ping"}))  # answered by the reader itself
        feeder = Feeder(lines)
        stdout = StalledStdout(capacity=len(encoded({"jsonrpc": "2.0", "id": 0, "result": {}})) + 400)
        server, thread = self.serve_until_stuck(registry, lines, stdout, feeder)
        # A call starts only while the unread answers are under MAX_HELD_BYTES, and at most
        # DEFAULT_MAX_WORKERS run at once: so at most this many answers of ~40 KB were ever made.
        answer_bytes = 2 * len(json.dumps(output))
        self.assertLessEqual(len(runs), self.HELD // answer_bytes + 1 + mcp.DEFAULT_MAX_WORKERS)
        self.assertLessEqual(server.backlog.peak_bytes, self.HELD + (mcp.DEFAULT_MAX_WORKERS + 1) * answer_bytes)
        stdout.drain()
        feeder.end()
        thread.join(WAIT_S)
        answers = [answer for answer in stdout.answers() if answer["id"] not in (0, "last")]
        self.assertEqual(sorted(answer["id"] for answer in answers), sorted(set(answer["id"] for answer in answers)))
        refused = [answer for answer in answers if "error" in answer]
        self.assertTrue(refused)
        self.assertEqual(len(answers) - len(refused), len(runs))  # each call ran and answered, or was refused
        self.assertTrue(all(answer["error"]["code"] == SERVER_BUSY for answer in refused))

    def test_a_batch_whose_answers_grow_too_large_is_answered_busy_past_the_limit(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        for index in range(20):  # a page of tools/list is about 3 KB
            registry.register(ToolSpec(name=f"tool_{index:02d}", description="A tool with a long description. " * 4,
                                       input_schema={"type": "object"}), lambda arguments: {})
        batch = [{"jsonrpc": "2.0", "id": index, "method": "tools/list"} for index in range(200)]
        lines = [encoded(INITIALIZE), encoded(INITIALIZED), encoded(batch)]
        feeder = Feeder(lines, ended=True)
        stdout = StalledStdout(capacity=10**9)  # this client reads
        thread = threading.Thread(target=serve, args=(registry,), kwargs={
            "actor": ACTOR, "stdin": feeder, "stdout": stdout}, daemon=True)
        thread.start()
        thread.join(WAIT_S)
        answered = stdout.answers()[1]
        self.assertEqual([answer["id"] for answer in answered], list(range(200)))
        served = [answer for answer in answered if "result" in answer]
        refused = [answer for answer in answered if "error" in answer]
        self.assertTrue(served and refused)
        self.assertTrue(all(answer["error"]["code"] == SERVER_BUSY for answer in refused))
        compact = {"separators": (",", ":")}
        self.assertLessEqual(len(json.dumps(served, **compact)), self.BATCH_ANSWERS + len(json.dumps(served[-1], **compact)) + 2)


class HandlerExitTest(unittest.TestCase):
    """A handler's sys.exit(3) is the call's error answer; the server keeps serving."""

    def test_a_handler_that_calls_sys_exit_is_answered_and_the_server_keeps_serving(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="exits", description="Calls sys.exit.", input_schema={"type": "object"}),
                          lambda arguments: sys.exit(3))
        registry.register(ToolSpec(name="interrupts", description="Raises KeyboardInterrupt.",
                                   input_schema={"type": "object"}), _raise_keyboard_interrupt)
        registry.register(ToolSpec(name="fine", description="Answers.", input_schema={"type": "object"}),
                          lambda arguments: {"ok": True})
        calls = [{"jsonrpc": "2.0", "id": name, "method": "tools/call", "params": {"name": name}}
                 for name in ("exits", "interrupts", "fine")]
        feeder = Feeder([encoded(INITIALIZE), encoded(INITIALIZED), *map(encoded, calls)], ended=True)
        stdout = StalledStdout(capacity=10**9)
        thread = threading.Thread(target=serve, args=(registry,), kwargs={
            "actor": ACTOR, "stdin": feeder, "stdout": stdout}, daemon=True)
        thread.start()
        thread.join(WAIT_S)
        self.assertFalse(thread.is_alive())
        answers = {answer["id"]: answer for answer in stdout.answers()}
        for name in ("exits", "interrupts"):
            self.assertTrue(answers[name]["result"]["isError"], answers[name])
            self.assertEqual(json.loads(answers[name]["result"]["content"][0]["text"])["error"]["code"],
                             "handler_exception")
        self.assertFalse(answers["fine"]["result"]["isError"])

    def test_serve_mcp_answers_a_handlers_sys_exit_and_keeps_serving_as_a_real_process(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            module = Path(directory) / "exiting_tools.py"
            module.write_text(textwrap.dedent('''
                import sys
                from agent_lab import Registry, ToolSpec

                def registry():
                    tools = Registry()
                    tools.register(ToolSpec(name="exits", description="Calls sys.exit.",
                                            input_schema={"type": "object"}), lambda arguments: sys.exit(3))
                    tools.register(ToolSpec(name="fine", description="Answers.",
                                            input_schema={"type": "object"}), lambda arguments: {"ok": True})
                    return tools
            '''), encoding="utf-8")
            calls = [{"jsonrpc": "2.0", "id": index, "method": "tools/call", "params": {"name": name}}
                     for index, name in enumerate(("exits", "fine", "exits", "fine"), start=1)]
            stdin = b"".join(map(encoded, [INITIALIZE, INITIALIZED, *calls]))
            process = subprocess.run([sys.executable, "run_lab.py", "serve-mcp", "--registry", f"{module}:registry"],
                                     cwd=REPO_ROOT, input=stdin, capture_output=True, timeout=60)
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        self.assertNotIn(b"Traceback", process.stderr)
        answers = {answer["id"]: answer for answer in map(json.loads, process.stdout.splitlines())}
        self.assertEqual(sorted(answers), [0, 1, 2, 3, 4])
        self.assertEqual([answers[index]["result"]["isError"] for index in (1, 2, 3, 4)], [True, False, True, False])


def _raise_keyboard_interrupt(arguments: Any) -> Any:
    raise KeyboardInterrupt


if __name__ == "__main__":
    unittest.main()
