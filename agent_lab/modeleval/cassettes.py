"""Cassettes: model requests and responses recorded once, replayed offline and byte for byte.

A recording is keyed by the SHA-256 of the canonical JSON (`agent_lab.canonical_json`) of the request:
its endpoint path, its public headers and its body. Secret headers (the key) are never part of the key
or the file; the base URL is not either, so a cassette recorded against one host replays for a spec
that names another. Nor is the key where an endpoint echoes it (an answer quoting the Authorization
header, a tool call's arguments): every spelling of it is masked in the request and the response before
either is kept or keyed, and the run goes on with the masked answer, so the trial recorded is the trial
a replay gives (masking only the file would leave a replay answering differently from the recording). The file, `CASSETTE_DIR/cassette.jsonl`, holds one recording per line, sorted by
key, each with the request body (its tool list replaced by a digest, to keep the file small), the
response body and the few response headers worth keeping, the latency measured when it was recorded,
and where it was asked (task, surface, trial, step).

The same request is asked once per trial (every trial starts from the same conversation), and a model
may answer it differently each time: that is what pass^k measures. So a request is recorded once for
each task, surface and trial that asked it, and a replay answers each trial with its own recording;
one answer per request would replay a task that passed 1 of 3 trials as passing 3 of 3.

Replaying a request that has no recording raises `MissingRecording`, which names the task, the step
and the first message that differs from the nearest recording of the same task and surface, so the
change that broke the replay is easy to find.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from ..fingerprint import canonical_json
from ..lab.jsonl import NotPlainJSON, lone_surrogate_at, read_plain_json
from ..redaction import SecretMask
from .models.http import HttpRequest, HttpResponse, Transport, is_secret_header
from .transcript import TurnContext

__all__ = ["CASSETTE_FILE", "Cassette", "CassetteError", "MissingRecording", "RecordingTransport",
           "ReplayTransport", "request_key"]

CASSETTE_FILE = "cassette.jsonl"
MESSAGE_LISTS = ("messages", "input")  # where the three wire formats keep the conversation
MAX_SHOWN_CHARS = 120


class CassetteError(ValueError):
    """A cassette that cannot be read or written (the message names the file and the line)."""


class MissingRecording(LookupError):
    """A replayed request that the cassette does not hold."""

    def __init__(self, context: TurnContext, detail: str) -> None:
        self.context = context
        self.detail = detail
        super().__init__(f"no recording for {context.describe()}: {detail}")


def _public_headers(request: HttpRequest) -> dict[str, str]:
    return {name.lower(): value for name, value in sorted(request.headers.items()) if not is_secret_header(name)}


def _masked(value: Any, mask: SecretMask) -> Any:
    """`value` (JSON) with every spelling of the mask's secrets masked in its strings, keys included
    (`SecretMask.json_text`, the reports' path); the value itself when there is nothing to mask."""
    if not mask.secrets:
        return value
    text = json.dumps(value, ensure_ascii=False)
    masked = mask.json_text(text)
    return value if masked == text else json.loads(masked)


def _public_request(request: HttpRequest) -> dict[str, Any]:
    """Path, public headers and body, with the key masked wherever the body shows it."""
    return _masked({"path": request.path, "headers": _public_headers(request), "body": request.body},
                   SecretMask(request.credentials))


def request_key(request: HttpRequest) -> str:
    """The SHA-256 of the canonical request: path, public headers and body (never the key or the host)."""
    return _key_of(_public_request(request))


def _key_of(public: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(public).encode("utf-8")).hexdigest()


def _stored_request(public: Mapping[str, Any]) -> dict[str, Any]:
    body = dict(public["body"])
    if "tools" in body:
        body["tools"] = {"sha256": hashlib.sha256(canonical_json(body["tools"]).encode("utf-8")).hexdigest()}
    return {"path": public["path"], "headers": public["headers"], "body": body}


@dataclass(frozen=True)
class Recording:
    key: str
    request: Mapping[str, Any]
    response: HttpResponse
    asked: Mapping[str, Any]  # task, surface, trial, step

    @property
    def place(self) -> tuple[str, Any, Any, Any]:
        """(key, task, surface, trial): one recording per trial that asked the request."""
        return (self.key, self.asked.get("task"), self.asked.get("surface"), self.asked.get("trial"))

    def to_line(self) -> str:
        """One line, keys in the order they were sent and received: sorting them would reorder a tool
        call's arguments object (Anthropic's `input`), and the replay would no longer be the recording."""
        return json.dumps({
            "key": self.key,
            "asked": dict(self.asked),
            "request": self.request,
            "response": {"status": self.response.status, "headers": dict(sorted(self.response.headers.items())),
                         "body": self.response.body, "latency_ms": self.response.latency_ms},
        }, ensure_ascii=False, separators=(",", ":"))


class Cassette:
    """The recordings of one directory. Thread-safe; `save()` writes the file atomically."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CASSETTE_FILE
        self._recordings: dict[tuple[str, Any, Any, Any], Recording] = {}
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: str | Path) -> Cassette:
        cassette = cls(directory)
        try:
            text = cassette.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CassetteError(f"{cassette.path}:1: no such cassette (record one with --record)") from None
        except (OSError, UnicodeDecodeError) as error:
            raise CassetteError(f"{cassette.path}:1: cannot read the cassette ({type(error).__name__})") from None
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                data = read_plain_json(line, max_depth=0, kind="cassettes")
                if lone_surrogate_at(data) is not None:
                    raise NotPlainJSON("a lone surrogate escape")
            except NotPlainJSON:
                raise CassetteError(f"{cassette.path}:{number}: not plain JSON (NaN, a number too large, "
                                    "a repeated key or a lone surrogate escape)") from None
            except (ValueError, RecursionError):
                raise CassetteError(f"{cassette.path}:{number}: not a cassette recording") from None
            if isinstance(data, dict) and "first_asked" in data and "asked" not in data:
                raise CassetteError(f"{cassette.path}:{number}: recorded with one answer per request, before "
                                    "cassettes kept one per trial: record it again with --record")
            try:
                response = data["response"]
                asked = data["asked"]
                if not isinstance(asked, dict):
                    raise TypeError("asked")
                recording = Recording(
                    key=str(data["key"]), request=data["request"], asked=asked,
                    response=HttpResponse(status=int(response["status"]), body=response["body"],
                                          headers={str(k): str(v) for k, v in (response.get("headers") or {}).items()},
                                          latency_ms=_latency(response.get("latency_ms"))),
                )
                hash(recording.place)  # TypeError for a task, surface or trial that is a list or an object
            except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
                raise CassetteError(f"{cassette.path}:{number}: not a cassette recording") from None
            cassette._recordings[recording.place] = recording
            cassette._keys.add(recording.key)
        return cassette

    def get(self, key: str, context: TurnContext) -> Optional[Recording]:
        """The recording of this request as the trial of `context` asked it."""
        return self._recordings.get((key, context.task_id, context.surface, context.trial))

    def holds(self, key: str) -> bool:
        """Whether some trial asked this request."""
        return key in self._keys

    def put(self, recording: Recording) -> None:
        with self._lock:
            self._recordings.setdefault(recording.place, recording)
            self._keys.add(recording.key)

    def __len__(self) -> int:
        return len(self._recordings)

    def recordings(self) -> list[Recording]:
        return [self._recordings[place] for place in sorted(self._recordings, key=_place_order)]

    def text(self) -> str:
        return "".join(recording.to_line() + "\n" for recording in self.recordings())


def _latency(value: Any) -> Optional[float]:
    """A recorded latency as the reports sum it: none, or a finite number of milliseconds, at least 0
    (TypeError otherwise: a hand-edited "x" ended the replay in a traceback when the trial's were summed)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise TypeError("latency_ms")
    return value


class RecordingTransport:
    """Sends through `inner` (the network) and keeps every successful exchange in `cassette`."""

    def __init__(self, inner: Transport, cassette: Cassette) -> None:
        self.inner = inner
        self.cassette = cassette

    def send(self, request: HttpRequest, context: TurnContext) -> HttpResponse:
        response = self.inner.send(request, context)
        if not 200 <= response.status < 300:
            return response  # never kept: the run reports the status alone
        mask = SecretMask(request.credentials)
        if mask.secrets:  # the run goes on with what the cassette keeps (see the module docstring)
            response = dataclasses.replace(response, body=_masked(response.body, mask),
                                           headers=_masked(dict(response.headers), mask))
        public = _public_request(request)
        self.cassette.put(Recording(_key_of(public), _stored_request(public), response, _asked(context)))
        return response


class ReplayTransport:
    """Answers from `cassette` only; never touches the network."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    def send(self, request: HttpRequest, context: TurnContext) -> HttpResponse:
        public = _public_request(request)
        key = _key_of(public)
        recording = self.cassette.get(key, context)
        if recording is None:
            if self.cassette.holds(key):
                raise MissingRecording(context, "the request was recorded, but not for this task, surface and "
                                                "trial (record again with the same tasks and --repeats)")
            raise MissingRecording(context, self._nearest_difference(_stored_request(public), context))
        response = recording.response
        return HttpResponse(status=response.status, body=json.loads(json.dumps(response.body)),
                            headers=dict(response.headers), latency_ms=response.latency_ms, attempts=1)

    def _nearest_difference(self, wanted: Mapping[str, Any], context: TurnContext) -> str:
        """The first differing message against the recording of this task and surface that agrees longest."""
        same_place = [r for r in self.cassette.recordings()
                      if r.asked.get("task") == context.task_id and r.asked.get("surface") == context.surface]
        candidates = same_place or self.cassette.recordings()
        if not candidates:
            return "the cassette is empty"
        wanted_messages = _messages(wanted)
        best, best_shared = None, -1
        for recording in candidates:
            shared = _shared_prefix(wanted_messages, _messages(recording.request))
            if shared > best_shared:
                best, best_shared = recording, shared
        assert best is not None
        where = best.asked
        nearest = f"nearest recording: task {where.get('task')!r}, step {where.get('step')}"
        theirs = _messages(best.request)
        if best_shared < len(wanted_messages):
            if best_shared < len(theirs):
                recorded, now = _where_they_differ(theirs[best_shared], wanted_messages[best_shared])
                return f"message {best_shared} differs ({nearest}): recorded {recorded}, now {now}"
            return f"message {best_shared} is new ({nearest}): now {_shown(wanted_messages[best_shared])}"
        if best_shared < len(theirs):
            return f"the request ends at message {best_shared}, the recording goes on ({nearest})"
        for part in ("path", "headers"):
            if canonical_json(wanted.get(part)) != canonical_json(best.request.get(part)):
                return f"the request's {part} differ ({nearest})"
        for name in sorted(set(wanted["body"]) | set(best.request["body"])):
            if name in MESSAGE_LISTS:
                continue
            if canonical_json(wanted["body"].get(name)) != canonical_json(best.request["body"].get(name)):
                return f"the request's {name!r} differs ({nearest})"
        return f"the request differs in a way the comparison cannot show ({nearest})"


def _place_order(place: tuple[str, Any, Any, Any]) -> tuple[str, str, str, int]:
    key, task, surface, trial = place
    return (key, str(task), str(surface), trial if isinstance(trial, int) and not isinstance(trial, bool) else -1)


def _asked(context: TurnContext) -> dict[str, Any]:
    return {"task": context.task_id, "surface": context.surface, "trial": context.trial, "step": context.step}


def _messages(stored: Mapping[str, Any]) -> list[Any]:
    body = stored.get("body") or {}
    for name in MESSAGE_LISTS:
        if isinstance(body.get(name), list):
            return list(body[name])
    return []


def _shared_prefix(left: list[Any], right: list[Any]) -> int:
    shared = 0
    for a, b in zip(left, right):
        if canonical_json(a) != canonical_json(b):
            break
        shared += 1
    return shared


def _where_they_differ(recorded: Any, now: Any) -> tuple[str, str]:
    """The two messages' JSON around the first character where they differ."""
    left = json.dumps(recorded, ensure_ascii=False, sort_keys=True)
    right = json.dumps(now, ensure_ascii=False, sort_keys=True)
    at = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
    start = max(0, at - MAX_SHOWN_CHARS // 3)

    def window(text: str) -> str:
        piece = text[start:start + MAX_SHOWN_CHARS]
        return ("…" if start else "") + piece + ("…" if start + MAX_SHOWN_CHARS < len(text) else "")

    return window(left), window(right)


def _shown(message: Any) -> str:
    text = json.dumps(message, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


