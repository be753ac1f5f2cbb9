"""Replay one case on one surface of a lab, against a fresh world and a fresh registry.

Everything that could vary between runs is pinned: the wall clock the registry sees (`LAB_NOW`), the
cursor secret, the fingerprint key, call ids (`<case_id>:<surface>:<n>`) and approval ids. Operations the world holds are
released and waited for (`settle`) before side effects are counted, so a write that timed out but
finished late is counted once it lands, exactly as a user would later find it.

The engine talks to the world only through the lab (`world`, `build`, `effects`, `secrets`, `settle`,
`writes_started`); anything the lab's code raises is a `LabError`. A value of the case file that
cannot be turned into a call (an approval that cannot be built, say) is a `CaseFileError` at the
case's FILE:LINE: bad input either way, never a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..calls import ToolCall, ToolResult
from ..idempotency import InMemoryReceiptStore, ReceiptKey, ReservationStatus, SqliteReceiptStore, canonical_json
from ..policy import Actor, Approval
from ..redaction import contains_secret
from ..registry import Registry
from .cases import Case, CaseFileError, CaseProblem, Steps
from .definition import Lab, Surface
from .pointer import MISSING, resolve_pointer

__all__ = [
    "DEFAULT_APPROVER",
    "LAB_CURSOR_SECRET",
    "LAB_FINGERPRINT_KEY",
    "LAB_NOW",
    "WAIT_LIMIT_S",
    "CallRun",
    "SurfaceRun",
    "registry_options",
    "replay_case",
]

LAB_NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the registry's wall clock during a replay
LAB_CURSOR_SECRET = b"agent-lab tool-eval cursor secret (fixed so reports are reproducible)"
LAB_FINGERPRINT_KEY = b"agent-lab tool-eval fingerprint key (fixed so reports are reproducible)"
DEFAULT_APPROVER = "supervisor@lab.example"
DEFAULT_APPROVAL_TTL_S = 300.0
POLL_INTERVAL_S = 0.002
WAIT_LIMIT_S = 5.0  # how long a replay waits for background calls, writes and receipts before moving on


@dataclass(frozen=True)
class CallRun:
    """One proposed call and what the model was shown (`view` is `ToolResult.to_model()`)."""

    index: int
    call_id: str
    tool: str
    arguments: Any = field(repr=False)  # never in a repr: a tool may redact them (the view is redacted)
    approved: bool
    view: Mapping[str, Any]
    leaked_secret: bool  # the view shows a secret of the world


@dataclass(frozen=True)
class SurfaceRun:
    """Everything one surface did for one case."""

    case_id: str
    surface: str
    role: str
    calls: tuple[CallRun, ...]
    side_effects: int
    duplicate_side_effects: int
    secrets: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # to mask in reports


def registry_options(receipts: Any) -> dict[str, Any]:
    """The keyword arguments a surface's `build(world, **options)` hands on to `Registry(**options)`."""
    return {"receipts": receipts, "clock": _lab_clock, "cursor_secret": LAB_CURSOR_SECRET}


def _lab_clock() -> float:
    return LAB_NOW


def replay_case(case: Case, surface: str | Surface, *, lab: Lab | None = None) -> SurfaceRun:
    """Run `case`'s proposals for `surface` (a name, a role or a Surface of `lab`; default lab: the
    built-in one) and report the calls and the side effects they left. ValueError if the case does not
    run that surface."""
    if lab is None:
        from .loader import default_lab

        lab = default_lab()
    target = surface if isinstance(surface, Surface) else lab.surface(surface)
    steps = case.steps_for(target.name, target.role)
    if steps is None:
        raise ValueError(f"case {case.case_id!r} does not run surface {target.name!r}")
    prefix = "calls" if case.shared_calls else f"calls/{target.name if target.name in case.calls else target.role}"
    with _receipt_directory(case) as workdir:
        session = _Session(case, lab, target, prefix, workdir)
        try:
            for position, step in enumerate(steps):
                session.run_step(position, step)
            session.finish()
        except BaseException:
            session.abandon()
            raise
    return session.surface_run()


@contextlib.contextmanager
def _receipt_directory(case: Case) -> Iterator[Path | None]:
    """A private temporary directory for a case's SQLite receipts, removed afterwards; None for the
    in-memory receipts most cases use, which need no file (and so no directory to make and remove)."""
    if case.receipts != "sqlite":
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="agent-lab-") as workdir:
        yield Path(workdir)


class _Session:
    """The state of one replay: world, registry, receipts, background calls and results."""

    def __init__(self, case: Case, lab: Lab, surface: Surface, prefix: str, workdir: Path | None) -> None:
        self.case = case
        self.lab = lab
        self.surface = surface
        self.prefix = prefix  # where this surface's steps are in the case line, for messages
        self.actor = self._case_value("actor", case.actor_for_run)
        self.world = lab.new_world(case.world)
        self.secrets = set(lab.secrets_of(self.world))
        self.receipt_path = workdir / "receipts.sqlite3" if workdir is not None else None
        self.results: dict[int, tuple[ToolCall, bool, Mapping[str, Any]]] = {}
        self.started: dict[int, tuple[ToolCall, bool]] = {}  # index -> (call, approved)
        self.keys: list[ReceiptKey] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.next_index = 0
        self.writes_before_background = 0  # writes started when the latest background call was launched
        self.effects: list[Any] = []
        self.receipts, self.registry = self._open_registry()

    def _open_registry(self) -> tuple[Any, Registry]:
        if self.receipt_path is not None:  # the case asked for "sqlite" receipts
            receipts: Any = SqliteReceiptStore(str(self.receipt_path), fingerprint_key=LAB_FINGERPRINT_KEY)
        else:
            receipts = InMemoryReceiptStore(fingerprint_key=LAB_FINGERPRINT_KEY)
        try:
            registry = self.lab.build(self.surface, self.world, **registry_options(receipts))
        except BaseException:
            receipts.close()
            raise
        return receipts, registry

    # -- steps -----------------------------------------------------------------------------------

    def run_step(self, position: int, step: Mapping[str, Any]) -> None:
        marker = step.get("do")
        if marker == "restart":
            self._restart()
        elif marker == "await_write_started":
            self._await_write_started()
        elif marker == "settle":
            self._settle()
        else:
            self._call(position, step)

    def _call(self, position: int, step: Mapping[str, Any]) -> None:
        index = self.next_index
        self.next_index += 1
        call = ToolCall(
            step["tool"], self._resolve_references(step["arguments"]), f"{self.case.case_id}:{self.surface.name}:{index}"
        )
        approval = self._case_value(f"{position}/approval", lambda: self._approval(step.get("approval"), call))
        self.started[index] = (call, approval is not None)
        self._remember_key(call)
        if step.get("background"):
            if self.lab.writes_started is not None:
                self.writes_before_background = self.lab.writes_started_in(self.world)  # its own write is next
            thread = threading.Thread(target=self._invoke, args=(index, call, approval), daemon=True,
                                      name=f"lab-{call.call_id}")
            self.threads.append(thread)
            thread.start()
        else:
            self._invoke(index, call, approval)

    def _invoke(self, index: int, call: ToolCall, approval: Approval | None) -> None:
        result: ToolResult = self.registry.invoke(call, actor=self.actor, approval=approval)
        view = result.to_model()
        with self.lock:
            self.results[index] = (call, approval is not None, view)

    def _case_value(self, where: str, build: Any) -> Any:
        """`build()`, turning what the library refuses about a case value into a problem at FILE:LINE."""
        try:
            return build()
        except (TypeError, ValueError, OverflowError) as error:  # the library's own, safe messages
            location = where if where == "actor" else f"{self.prefix}/{where}"
            message = " ".join(str(error).split()) or type(error).__name__
            raise CaseFileError([CaseProblem(self.case.source_path, self.case.source_line,
                                             f"'{location}' cannot be replayed: {message}")]) from None

    def _resolve_references(self, value: Any) -> Any:
        """Replace `{"$from_call": i, "pointer": p}` by the value at p in call i's model view (null if absent)."""
        if isinstance(value, dict):
            if set(value) == {"$from_call", "pointer"}:
                earlier = self.results.get(value["$from_call"])
                found = resolve_pointer(earlier[2], value["pointer"]) if earlier is not None else MISSING
                return None if found is MISSING else found
            return {key: self._resolve_references(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve_references(item) for item in value]
        return value

    def _approval(self, request: Any, call: ToolCall) -> Approval | None:
        """Build the approval a person gave, for this call or (to test binding) for another one."""
        if request is None:
            return None
        options: Mapping[str, Any] = request if isinstance(request, dict) else {}
        approved_call = ToolCall(options.get("tool", call.name), options.get("arguments", call.arguments))
        approved_actor = Actor(id=options.get("actor", self.actor.id), tenant=options.get("tenant", self.actor.tenant),
                               permissions=self.actor.permissions)
        approval = Approval.for_call(
            approved_call,
            actor=approved_actor,
            approver=options.get("approver", DEFAULT_APPROVER),
            registry=self.registry,
            ttl_s=options.get("ttl_s", DEFAULT_APPROVAL_TTL_S),
            now=LAB_NOW - options.get("age_s", 0),
        )
        return dataclasses.replace(approval, approval_id=f"apr-{call.call_id}")

    def _remember_key(self, call: ToolCall) -> None:
        """Note the idempotency key a call uses, so settling can wait for its receipt."""
        if call.name not in self.registry.names() or not isinstance(call.arguments, dict):
            return
        key_name = self.registry.spec(call.name).idempotency_key
        if key_name is not None and isinstance(call.arguments.get(key_name), str):
            with contextlib.suppress(TypeError, ValueError):  # a key the store refuses is never in progress
                self.keys.append(ReceiptKey(self.actor.tenant, call.name, call.arguments[key_name]))

    # -- markers ---------------------------------------------------------------------------------

    def _await_write_started(self) -> None:
        """Wait until the latest background call's own write has begun: the one after those that had
        begun when it was launched."""
        self._wait_for_writes(self.writes_before_background + 1)

    def _wait_for_writes(self, count: int) -> None:
        """Wait until `count` writes have begun in the world (or the wait limit passes)."""
        give_up = time.monotonic() + WAIT_LIMIT_S
        while self.lab.writes_started_in(self.world) < count and time.monotonic() < give_up:
            time.sleep(POLL_INTERVAL_S)

    def _settle(self) -> None:
        """Wait for background calls to return, then let the world end its held operations and wait
        for the late handlers and their receipts. In that order: a call that returns at its deadline has
        answered before its held write lands, however slow the machine, so its answer is the same on
        every run."""
        for thread in self.threads:
            thread.join(WAIT_LIMIT_S)
        self.threads = [thread for thread in self.threads if thread.is_alive()]
        self.lab.settle_world(self.world)
        give_up = time.monotonic() + WAIT_LIMIT_S
        while any(self._in_progress(key) for key in self.keys) and time.monotonic() < give_up:
            time.sleep(POLL_INTERVAL_S)

    def _in_progress(self, key: ReceiptKey) -> bool:
        try:
            reservation = self.receipts.lookup(key)
        except Exception:  # noqa: BLE001 - a store that cannot answer has nothing left to wait for
            return False
        return reservation is not None and reservation.status is ReservationStatus.IN_PROGRESS

    def _restart(self) -> None:
        """Stop the registry as a process restart would, and start a new one on the same receipts."""
        self._settle()
        self._close()
        self.receipts, self.registry = self._open_registry()

    def _close(self) -> None:
        self.registry.close()
        self.receipts.close()

    def finish(self) -> None:
        """Settle, read what the world observed, and close."""
        self._settle()
        self.effects = self.lab.effects_of(self.world)
        self.secrets |= self.lab.secrets_of(self.world)
        self._close()

    def abandon(self) -> None:
        """Close after a failure, calling none of the lab's code again."""
        with contextlib.suppress(Exception):
            self._close()

    # -- the record ------------------------------------------------------------------------------

    def surface_run(self) -> SurfaceRun:
        secrets = frozenset(self.secrets)
        return SurfaceRun(
            case_id=self.case.case_id,
            surface=self.surface.name,
            role=self.surface.role,
            calls=tuple(self._call_run(index, secrets) for index in range(self.next_index)),
            side_effects=len(self.effects),
            duplicate_side_effects=_duplicates(self.effects),
            secrets=secrets,
        )

    def _call_run(self, index: int, secrets: frozenset[str]) -> CallRun:
        """The record of call `index`. A call still running when the replay stopped waiting keeps its
        place (later calls are not shifted onto its index) and every grade on it fails."""
        call, approved = self.started[index]
        answer = self.results.get(index)
        view: Mapping[str, Any] = answer[2] if answer is not None else {
            "unanswered": "the call had not returned when the replay stopped waiting"}
        return CallRun(index=index, call_id=call.call_id or "", tool=call.name, arguments=call.arguments,
                       approved=approved, view=view, leaked_secret=answer is not None and shows_secret(view, secrets))


_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON text escapes when non-ASCII is kept as is


def shows_secret(view: Any, secrets: frozenset[str]) -> bool:
    """Whether any secret appears in `view`: in any string or member name, or in its JSON text (a number
    that shows a PIN), as the reports would mask it (`contains_secret`: a short secret, a CVV `737`, only
    as a whole token, never inside `17375`).

    A string holding a secret shows it in the JSON text too, unless the secret has a character JSON
    escapes (a quote, a backslash, a control character): only such secrets are looked for string by
    string."""
    if not secrets:
        return False
    text = json.dumps(view, ensure_ascii=False)
    if contains_secret(text, secrets):
        return True
    escaped = [secret for secret in secrets if _JSON_ESCAPED.search(secret)]
    return bool(escaped) and any(contains_secret(string, escaped) for string in _strings(view))


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, member names included (an explicit stack: no depth limit applies)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, member in item.items():
                if isinstance(key, str):
                    yield key
                stack.append(member)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _duplicates(records: list[Any]) -> int:
    """Records equal, as canonical JSON, to an earlier record of the same replay."""
    seen: set[str] = set()
    duplicates = 0
    for record in records:
        text = canonical_json(record)
        duplicates += text in seen
        seen.add(text)
    return duplicates
