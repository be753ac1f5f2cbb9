"""Sending one model request over HTTP with the standard library: timeouts, bounded retries, and a clear
line between the model's answer and the infrastructure's failure.

The timeout bounds the whole exchange of one attempt: connecting, sending, the status line and headers,
and the body. A socket timeout alone bounds each read, so a server that trickles one byte every half
second held a 2 s request for 45 s; here the attempt runs on a worker thread, and at the deadline the
caller stops waiting and shuts the attempt's sockets down (which ends any read or write blocked on
them). Only a name lookup cannot be cut: the worker may outlive the deadline until the resolver answers,
the caller does not.

The key goes to the configured origin and nowhere else. Redirects are never followed: a 3xx answer is
an infrastructure failure naming its status (urllib would send the key on to wherever `Location`
points, another host included). The loopback interface never goes through a proxy. Through a proxy the
environment names (`HTTPS_PROXY`), an `https://` endpoint is reached through a CONNECT tunnel: the proxy
relays TLS it cannot read and is never sent the key. A plain `http://` endpoint is never sent a key
through a proxy (`HTTP_PROXY`): the request is refused, naming the way out (https, or the host in
`NO_PROXY`).

A request is retried on 408, 425, 429, 500, 502, 503, 504 and 529 (Anthropic's "overloaded"), on a
connection error, on a timeout and on a body that is cut short or is not JSON. It waits `backoff_s`,
then twice that, and so on up to `max_backoff_s`, or what the server's `Retry-After` asks, when that
is within `retry_after_cap_s` (a server that asks for longer is not waited for: the request fails).
After `max_attempts` the request fails with `InfrastructureFailure`: the evaluation reports it as an
infrastructure outcome and never grades it as something the model did. A body that is complete JSON
text but not plain JSON (NaN, a number no float holds such as 1e400, a repeated key, a lone surrogate
escape) fails at once: nothing built from it could be sent back, recorded or reported.

Secrets: headers that carry credentials are held apart from the public ones (`secret_headers`), are
never part of a cassette key, a log line, an exception message or a report.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Protocol

from ...lab.jsonl import NotPlainJSON, lone_surrogate_at, read_plain_json
from ..transcript import TurnContext

__all__ = [
    "RETRYABLE_STATUSES",
    "HttpRequest",
    "HttpResponse",
    "InfrastructureFailure",
    "Transport",
    "UrllibTransport",
    "is_secret_header",
]

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 529})
KEPT_RESPONSE_HEADERS = ("content-type", "retry-after", "x-agent-lab-scripted")
SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "cookie", "password")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_ATTEMPTS = 4
DEFAULT_BACKOFF_S = 1.0
DEFAULT_MAX_BACKOFF_S = 20.0
DEFAULT_RETRY_AFTER_CAP_S = 60.0


def is_secret_header(name: str) -> bool:
    """True for a header that may carry a credential (Authorization, x-api-key, api-key, cookies...)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_HEADER_WORDS)


class InfrastructureFailure(Exception):
    """The endpoint could not give an answer (network, timeout, HTTP error, unreadable body).

    `reason` is one safe sentence: a status code, an error class or a limit, never a response body,
    a header value or a key."""

    def __init__(self, reason: str, *, attempts: int = 1) -> None:
        self.reason = reason
        self.attempts = attempts
        super().__init__(reason)


@dataclass(frozen=True)
class HttpRequest:
    """A JSON POST to `base_url + path`. `secret_headers` are sent but never stored or shown."""

    base_url: str
    path: str
    body: Mapping[str, Any] = field(repr=False)  # the conversation, arguments included: never in a repr
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The key the secret headers carry, for whoever keeps the exchange to mask (an endpoint may echo it).
    credentials: tuple[str, ...] = field(default=(), repr=False)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.path


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names, only KEPT_RESPONSE_HEADERS
    latency_ms: Optional[float] = None
    attempts: int = 1


class Transport(Protocol):
    def send(self, request: HttpRequest, context: TurnContext) -> HttpResponse: ...


class _Retry(Exception):
    """One attempt failed in a way another attempt may not; `wait_s` is what the server asked, if anything."""

    def __init__(self, reason: str, wait_s: Optional[float] = None) -> None:
        self.reason = reason
        self.wait_s = wait_s
        super().__init__(reason)


class UrllibTransport:
    """Sends requests with urllib, one attempt at a time (see the module docstring). `sleep` can be replaced
    (tests wait for nothing)."""

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        retry_after_cap_s: float = DEFAULT_RETRY_AFTER_CAP_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for name, value in (("timeout_s", timeout_s), ("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s),
                            ("retry_after_cap_s", retry_after_cap_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number of seconds, at least 0")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be more than 0")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError("max_attempts must be an integer, at least 1")
        self.timeout_s = float(timeout_s)
        self.max_attempts = max_attempts
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.retry_after_cap_s = float(retry_after_cap_s)
        self._sleep = sleep

    def send(self, request: HttpRequest, context: TurnContext) -> HttpResponse:
        data = json.dumps(request.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"content-type": "application/json", "accept": "application/json",
                   **request.headers, **request.secret_headers}
        if request.secret_headers:
            _refuse_a_plain_http_proxy(request.url)
        started = time.monotonic()
        for attempt in range(1, self.max_attempts + 1):
            try:
                status, body, kept = self._attempt(request.url, data, headers)
            except _Retry as failure:
                if attempt == self.max_attempts:
                    raise InfrastructureFailure(
                        f"{failure.reason}; gave up after {attempt} attempt(s)", attempts=attempt) from None
                self._sleep(self._wait(attempt, failure.wait_s, attempt))
                continue
            latency = round((time.monotonic() - started) * 1000.0, 3)
            return HttpResponse(status=status, body=body, headers=kept, latency_ms=latency, attempts=attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, attempt: int, asked_s: Optional[float], attempts: int) -> float:
        if asked_s is not None:
            if asked_s > self.retry_after_cap_s:
                raise InfrastructureFailure(
                    f"the endpoint asked to wait {asked_s:g} s before retrying, more than the "
                    f"{self.retry_after_cap_s:g} s cap", attempts=attempts)
            return asked_s
        return min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))

    def _attempt(self, url: str, data: bytes, headers: Mapping[str, str]) -> tuple[int, Any, dict[str, str]]:
        """One exchange, bounded as a whole by the timeout (see the module docstring)."""
        sockets = _Sockets()
        outcome = _Outcome()
        worker = threading.Thread(target=outcome.run, args=(self._exchange, url, data, headers, sockets),
                                  name="agent-lab-model-request", daemon=True)
        worker.start()
        if not outcome.done.wait(self.timeout_s):
            sockets.cut()
            raise _Retry(f"no complete answer within the {self.timeout_s:g} s timeout")
        sockets.cut()  # the exchange is over: its descriptors' copies are closed
        return outcome.value()

    def _exchange(self, url: str, data: bytes, headers: Mapping[str, str],
                  sockets: _Sockets) -> tuple[int, Any, dict[str, str]]:
        http_request = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")
        handlers: list[Any] = [_NoRedirects(), _HTTPHandler(sockets), _HTTPSHandler(sockets)]
        if urllib.parse.urlsplit(url).hostname in LOOPBACK_HOSTS:
            handlers.append(urllib.request.ProxyHandler({}))  # no proxy sees a local model server
        opener = urllib.request.build_opener(*handlers)
        try:
            response = opener.open(http_request, timeout=self.timeout_s)
        except urllib.error.HTTPError as error:
            kept = _kept_headers(error.headers)
            try:
                error.close()
            except Exception:  # noqa: BLE001 - closing a failed response is best effort
                pass
            if error.code in RETRYABLE_STATUSES:
                raise _Retry(f"the endpoint answered HTTP {error.code}", _retry_after(kept.get("retry-after"))) from None
            if 300 <= error.code < 400:
                raise InfrastructureFailure(f"the endpoint answered HTTP {error.code}, a redirect: not followed "
                                            "(the key goes to the configured origin only)") from None
            raise InfrastructureFailure(f"the endpoint answered HTTP {error.code}") from None
        except (socket.timeout, TimeoutError):
            raise _Retry(f"no answer within the {self.timeout_s:g} s timeout") from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, (socket.timeout, TimeoutError)):
                raise _Retry(f"no answer within the {self.timeout_s:g} s timeout") from None
            raise _Retry(f"cannot reach the endpoint ({type(error.reason).__name__})") from None
        except (ConnectionError, http.client.HTTPException, OSError) as error:
            raise _Retry(f"the connection failed ({type(error).__name__})") from None
        with response:
            kept = _kept_headers(response.headers)
            raw = _read_body(response, self.timeout_s)
            status = response.status
        try:
            body = read_plain_json(raw.decode("utf-8"), max_depth=0, kind="answers")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _Retry("the endpoint's answer is not complete JSON (cut short or not JSON)") from None
        except NotPlainJSON as error:
            raise InfrastructureFailure(f"the endpoint's answer is not plain JSON ({_why_not_plain(error)})") from None
        try:
            surrogate_at = lone_surrogate_at(body)
        except RecursionError:
            raise InfrastructureFailure("the endpoint's answer is not plain JSON (nested too deeply)") from None
        if surrogate_at is not None:
            raise InfrastructureFailure("the endpoint's answer is not plain JSON (a lone surrogate escape, "
                                        "which is not Unicode text)")
        return status, body, kept


def _why_not_plain(error: NotPlainJSON) -> str:
    """The reason in a few words, never quoting the answer (a repeated key's name stays out of it)."""
    text = str(error)
    if text.startswith("duplicate key"):
        return "an object repeats a key"
    if text.startswith("JSON nested too deeply"):
        return "nested too deeply"
    return text


def _read_body(response: Any, timeout_s: float) -> bytes:
    """The whole body, in chunks, up to `MAX_RESPONSE_BYTES` (the attempt's deadline cuts a trickle)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = response.read(READ_CHUNK_BYTES)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise InfrastructureFailure(f"the endpoint's answer is larger than {MAX_RESPONSE_BYTES} bytes")
            chunks.append(chunk)
    except (socket.timeout, TimeoutError):
        raise _Retry(f"no answer within the {timeout_s:g} s timeout") from None
    except http.client.IncompleteRead:
        raise _Retry("the endpoint's answer was cut short") from None
    except (ConnectionError, http.client.HTTPException, OSError) as error:
        raise _Retry(f"the connection failed while reading ({type(error).__name__})") from None
    return b"".join(chunks)


class _Outcome:
    """What the worker of one attempt ended with: a value, or the exception to raise in the caller."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def run(self, exchange: Callable[..., Any], *arguments: Any) -> None:
        try:
            self._value = exchange(*arguments)
        except (_Retry, InfrastructureFailure) as error:
            self._error = error
        except Exception as error:  # noqa: BLE001 - an error from below may quote a header: only its type
            self._error = InfrastructureFailure(f"the request could not be sent ({type(error).__name__})")
        finally:
            self.done.set()

    def value(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class _Sockets:
    """The sockets one attempt opened, to be shut down at its deadline.

    Each is kept as a duplicate descriptor: TLS wraps (and detaches) the socket it was given, but
    shutting a duplicate down shuts the connection down for every descriptor of it, so a read, a write
    or a handshake blocked on the original returns at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: list[socket.socket] = []
        self._cut = False

    def keep(self, connection: socket.socket) -> socket.socket:
        duplicate = connection.dup()
        with self._lock:
            if not self._cut:
                self._kept.append(duplicate)
                return connection
        _shut(duplicate)  # the deadline passed while connecting
        return connection

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            kept, self._kept = self._kept, []
        for duplicate in kept:
            _shut(duplicate)


def _shut(duplicate: socket.socket) -> None:
    try:
        duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the peer or by the exchange
        pass
    duplicate.close()


def _bounded(connection_class: type, sockets: _Sockets) -> Callable[..., Any]:
    """A connection factory for urllib whose sockets `sockets` keeps (to cut them at the deadline)."""

    def connect(address: tuple[str, int], timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT,  # type: ignore[attr-defined]
                source_address: Any = None) -> socket.socket:
        return sockets.keep(socket.create_connection(address, timeout, source_address))

    def connection(host: str, **options: Any) -> Any:
        made = connection_class(host, **options)
        made._create_connection = connect  # how http.client opens its socket (a proxy's too)
        return made

    return connection


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self._sockets = sockets

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_bounded(http.client.HTTPConnection, self._sockets), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self._sockets = sockets

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_bounded(http.client.HTTPSConnection, self._sockets), req,
                            context=self._context)  # type: ignore[attr-defined]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follows a redirect: urllib then raises the 3xx as an HTTPError, reported as a failure."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def _refuse_a_plain_http_proxy(url: str) -> None:
    """A key is never sent in clear to a proxy: over plain http a proxy reads every header."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "http" or host in LOOPBACK_HOSTS:
        return
    proxy = urllib.request.getproxies().get("http")
    if proxy and not urllib.request.proxy_bypass(parts.netloc):
        raise InfrastructureFailure("not sent: the key would go in clear to the proxy the environment names "
                                    "(HTTP_PROXY) on the way to a plain http:// endpoint; use https://, or name the "
                                    "host in NO_PROXY")


def _kept_headers(headers: Any) -> dict[str, str]:
    kept: dict[str, str] = {}
    if headers is None:
        return kept
    for name in KEPT_RESPONSE_HEADERS:
        value = headers.get(name)
        if isinstance(value, str):
            kept[name] = value
    return kept


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date (None when absent or unreadable)."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds or seconds == float("inf"):
        return None
    return max(0.0, seconds)
