"""The stdio transport: spawn the server, write one JSON-RPC message per line to its stdin, read them
from its stdout. It only moves messages; the session (`agent_lab.mcp_client.session`) speaks MCP.

Bounded in every direction, since the server is untrusted:
- stdout is read in chunks and split into lines here; a line longer than `max_message_bytes` breaks
  the connection at once (every pending request fails with a one-line error) instead of being buffered;
  lines that are not JSON are skipped and counted, up to `MAX_IGNORED_LINES`;
- stderr is drained on its own thread and only its last `MAX_STDERR_BYTES` are kept, quoted in errors;
- writes go through a writer thread, so a server that never reads its stdin stalls only the requests
  waiting on it (each has a timeout), never the caller beyond it.

The child runs in a session of its own (so `close` can end the whole process group: `npx` starts a
second process) and gets a small environment: a few variables a program needs to run (PATH, HOME,
locale, temp directory) plus those the address sets. The rest of this process's environment (API keys,
the bearer token of another server) never reaches it unless named in `pass_env`.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Iterable

from ..redaction import SecretMask
from .address import ServerAddress, credential_values
from .wire import (
    MAX_IGNORED_LINES,
    MAX_STDERR_BYTES,
    McpConnectionError,
    McpError,
    McpProtocolError,
    decode_message,
    encode_message,
    quote_server_text,
)

__all__ = ["INHERITED_ENV", "StdioTransport"]

logger = logging.getLogger("agent_lab.mcp_client")

INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
                 "TZ", "SYSTEMROOT", "PATHEXT", "COMSPEC", "APPDATA", "LOCALAPPDATA", "USERPROFILE")
"""Variables of this process a stdio server inherits (when set); everything else must be named."""
CLOSE_GRACE_S = 2.0  # after stdin closes, how long a healthy server has to exit before SIGTERM, then SIGKILL
STUCK_GRACE_S = 0.1  # the same for a server that left a request unanswered or broke the protocol
READ_CHUNK = 64 * 1024


class Outgoing:
    """One message handed to the writer; `started` is set once its first byte may have reached the pipe.

    A message given up before then (`withdraw`) is never written: a request whose caller was told it was
    not sent (a timed-out call queued behind a server that stopped reading) must not reach the server
    later, or a retry under the same idempotency key would be its second effect."""

    __slots__ = ("data", "started", "withdrawn", "lock", "on_written")

    def __init__(self, data: bytes, on_written: Callable[[], None] | None = None) -> None:
        self.data = data
        self.started = threading.Event()
        self.withdrawn = False
        self.lock = threading.Lock()
        self.on_written = on_written  # called once the writer is done with it (written, dropped or withdrawn)

    def take(self) -> bool:
        """For the writer: True (and `started` set) unless it was withdrawn first."""
        with self.lock:
            if not self.withdrawn:
                self.started.set()
            return not self.withdrawn

    def withdraw(self) -> bool:
        """Never write it, unless its writing has started; True when it will never be written."""
        with self.lock:
            if not self.started.is_set():
                self.withdrawn = True
            return self.withdrawn

    def done(self) -> None:
        callback, self.on_written = self.on_written, None
        if callback is not None:
            callback()


class StdioTransport:
    """A spawned server. `open(deliver, lost)` starts it; `deliver(message)` is called on the reader
    thread for each JSON message, `lost(error)` once when the connection ends for any reason but `close`."""

    kind = "stdio"
    cancels_by_notification = True

    def __init__(self, address: ServerAddress, *, label: str, max_message_bytes: int,
                 pass_env: Iterable[str] = (), cwd: str | None = None) -> None:
        self.address = address
        self.label = label
        self.max_message_bytes = max_message_bytes
        self.pass_env = tuple(pass_env)
        self.cwd = cwd
        self._process: subprocess.Popen[bytes] | None = None
        self._outbox: queue.Queue[Outgoing | None] = queue.Queue()
        self._stderr_tail = bytearray()
        self._stderr_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._gone = threading.Event()
        self._deliver: Callable[[Any], None] = lambda message: None
        self._lost: Callable[[McpError], None] = lambda error: None
        self.ignored_lines = 0
        self.first_ignored: str | None = None
        self.mask = SecretMask(self.secret_values())  # what the server's text is masked with where it is quoted

    # -- opening ---------------------------------------------------------------------------------

    def child_environment(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in INHERITED_ENV + self.pass_env if name in os.environ}
        env.update(self.address.env)
        return env

    def secret_values(self) -> tuple[str, ...]:
        """What this server was given that it must not get to quote back (see `credential_values`): the
        environment set on its command line and the variables passed on by name, credentials in its words."""
        passed = {name: os.environ[name] for name in self.pass_env if name in os.environ}
        return credential_values(self.address, passed)

    def open(self, deliver: Callable[[Any], None], lost: Callable[[McpError], None]) -> None:
        self._deliver, self._lost = deliver, lost
        try:
            self._process = subprocess.Popen(
                list(self.address.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=self.child_environment(), cwd=self.cwd, start_new_session=True, bufsize=0,
            )
        except FileNotFoundError:
            raise McpConnectionError(self.label, f"cannot start it: no program {self.address.argv[0]!r} "
                                     "(not found on PATH)", sent=False) from None
        except OSError as error:
            raise McpConnectionError(self.label, f"cannot start it: {error.strerror or error}", sent=False) from None
        for target, name in ((self._read_stdout, "out"), (self._read_stderr, "err"), (self._write_stdin, "in")):
            thread = threading.Thread(target=target, name=f"mcp-stdio-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    # -- moving messages -------------------------------------------------------------------------

    def send(self, message: Any, *, on_written: Callable[[], None] | None = None) -> Outgoing:
        """Queue one message; McpConnectionError (sent=False) when the server is already gone.
        `on_written` is called once the writer is done with it (not when this raises)."""
        if self._gone.is_set() or self._process is None:
            raise McpConnectionError(self.label, f"is not running{self._exit_note()}", sent=False)
        outgoing = Outgoing(encode_message(message), on_written)
        self._outbox.put(outgoing)
        return outgoing

    def abort(self, handle: Any) -> None:
        """A request given up before its first byte was written is withdrawn: it is never written, so
        its `sent` stays false for good. One already on its way is cancelled by the session's
        notifications/cancelled (stdio has no per-request stream to close)."""
        if isinstance(handle, Outgoing):
            handle.withdraw()

    def _write_stdin(self) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        while True:
            outgoing = self._outbox.get()
            if outgoing is None:
                break
            try:
                if not outgoing.take():
                    continue  # given up before it left: never written
                _write_all(process.stdin, outgoing.data)
            except (BrokenPipeError, OSError, ValueError):
                break  # the reader sees the end of stdout and reports how the server ended
            finally:
                outgoing.done()
        try:
            process.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read_stdout(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        descriptor = process.stdout.fileno()
        pending = bytearray()
        while True:
            try:
                chunk = os.read(descriptor, READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            pending += chunk
            while True:
                end = pending.find(b"\n")
                if end < 0:
                    break
                line = bytes(pending[:end])
                del pending[: end + 1]
                if not self._take_line(line):
                    return
            if len(pending) > self.max_message_bytes:
                self._fail(McpProtocolError(self.label, f"sent a message larger than {self.max_message_bytes} bytes "
                                            "(the limit); the connection was closed"))
                return
        if pending.strip() and len(pending) <= self.max_message_bytes:
            self._take_line(bytes(pending))
        self._ended()

    def _take_line(self, line: bytes) -> bool:
        """Deliver one line; False once the connection has been given up."""
        if len(line) > self.max_message_bytes:
            self._fail(McpProtocolError(self.label, f"sent a message larger than {self.max_message_bytes} bytes "
                                        "(the limit); the connection was closed"))
            return False
        if not line.strip():
            return True
        try:
            message = decode_message(line.rstrip(b"\r"))
        except ValueError as error:
            return self._ignore(line, str(error))
        if not isinstance(message, (dict, list)):
            return self._ignore(line, "a JSON value that is not a message")
        try:
            self._deliver(message)
        except Exception as error:  # noqa: BLE001 - a bug in the session must not kill the reader
            # The type only, never the message or a traceback: it may quote what the server sent.
            logger.warning("mcp client: a message from %s could not be handled: %s", self.label, type(error).__name__)
        return True

    def _ignore(self, line: bytes, reason: str) -> bool:
        self.ignored_lines += 1
        if self.first_ignored is None:
            self.first_ignored = f"{reason}: {quote_server_text(line.decode('utf-8', 'replace'), 60)!r}"
        logger.debug("mcp client: %s wrote %s on stdout; skipped", self.label, reason)
        if self.ignored_lines > MAX_IGNORED_LINES:
            self._fail(McpProtocolError(self.label, f"wrote more than {MAX_IGNORED_LINES} lines on stdout that are "
                                        f"not JSON-RPC messages (first: {self.first_ignored})"))
            return False
        return True

    def _read_stderr(self) -> None:
        process = self._process
        assert process is not None and process.stderr is not None
        descriptor = process.stderr.fileno()
        while True:
            try:
                chunk = os.read(descriptor, READ_CHUNK)
            except OSError:
                return
            if not chunk:
                return
            with self._stderr_lock:
                self._stderr_tail += chunk
                if len(self._stderr_tail) > MAX_STDERR_BYTES:
                    del self._stderr_tail[: len(self._stderr_tail) - MAX_STDERR_BYTES]

    # -- ending ----------------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The last non-empty line of the server's stderr, fit to quote ("" when it wrote none)."""
        with self._stderr_lock:
            text = bytes(self._stderr_tail).decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if line.strip()]
        return quote_server_text(self.mask.text(lines[-1])) if lines else ""  # masked before it is cut

    def _exit_note(self) -> str:
        process = self._process
        code = process.poll() if process is not None else None
        note = f" (it exited with code {code})" if code is not None else ""
        tail = self.stderr_tail()
        return note + (f"; its stderr ends: {tail!r}" if tail else "")

    def _ended(self) -> None:
        """stdout reached its end: the server exited or closed it."""
        if self._closing:
            self._gone.set()
            return
        process = self._process
        if process is not None:
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        code = process.poll() if process is not None else None
        what = f"exited with code {code}" if code is not None else "closed its stdout"
        self._gone.set()
        time.sleep(0.05)  # let the stderr reader take the last words
        tail = self.stderr_tail()
        self._lost(McpConnectionError(self.label, what + (f"; its stderr ends: {tail!r}" if tail else "")))

    def _fail(self, error: McpError) -> None:
        """Give the connection up: report `error` once, then end the process."""
        if self._gone.is_set() or self._closing:
            return
        self._gone.set()
        self._lost(error)
        self._terminate(grace_s=0.0)

    def close(self, *, grace_s: float = CLOSE_GRACE_S) -> None:
        """Close stdin, give the server `grace_s` to exit, then SIGTERM and SIGKILL its process group."""
        self._closing = True
        self._outbox.put(None)
        self._terminate(grace_s=grace_s)
        for thread in self._threads:
            thread.join(timeout=1.0)
        process = self._process
        if process is not None and not any(thread.is_alive() for thread in self._threads):
            for stream in (process.stdin, process.stdout, process.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass

    def _terminate(self, *, grace_s: float) -> None:
        process = self._process
        if process is None:
            return
        if grace_s > 0:
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
            if process.poll() is not None:
                break
            self._signal_group(process, sig)
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                continue
        self._signal_group(process, getattr(signal, "SIGKILL", signal.SIGTERM))  # children left behind

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
        try:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, sig)  # its own session: the group id is its pid
            else:  # pragma: no cover - Windows
                process.send_signal(sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def _write_all(pipe: Any, data: bytes) -> None:
    """Write every byte of `data` to an unbuffered pipe (`bufsize=0`: a raw FileIO, whose `write` may
    take only part of it, e.g. when a signal arrives mid-write; a message cut short would be lost)."""
    view = memoryview(data)
    while view:
        written = pipe.write(view)
        if written is None:  # a non-blocking pipe that is full: not how the server's stdin is opened
            raise OSError("the server's stdin would block")
        view = view[written:]
