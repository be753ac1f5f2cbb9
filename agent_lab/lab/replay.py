"""Replay one case through one strategy, against a fresh backend and a fresh registry.

Everything that could vary between runs is pinned: the wall clock the registry sees (`LAB_NOW`), the
cursor secret, the fingerprint key, call ids (`<case_id>:<strategy>:<n>`) and approval ids. Slow writes are waited for
(`settle`) before side effects are counted, so a write that timed out but finished late is counted once
it lands, exactly as a user would later find it.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..calls import ToolCall, ToolResult
from ..idempotency import InMemoryReceiptStore, ReceiptKey, ReservationStatus, SqliteReceiptStore
from ..policy import Actor, Approval
from ..registry import Registry
from .backend import WAIT_LIMIT_S, TicketBackend
from .baseline import build_baseline_registry
from .candidate import build_candidate_registry
from .cases import Case
from .pointer import MISSING, resolve_pointer

__all__ = [
    "DEFAULT_APPROVER",
    "LAB_CURSOR_SECRET",
    "LAB_FINGERPRINT_KEY",
    "LAB_NOW",
    "STRATEGY_BUILDERS",
    "CallRun",
    "StrategyRun",
    "replay_case",
]

LAB_NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the registry's wall clock during a replay
LAB_CURSOR_SECRET = b"agent-lab tool-eval cursor secret (fixed so reports are reproducible)"
LAB_FINGERPRINT_KEY = b"agent-lab tool-eval fingerprint key (fixed so reports are reproducible)"
DEFAULT_APPROVER = "supervisor@lab.example"
DEFAULT_APPROVAL_TTL_S = 300.0
POLL_INTERVAL_S = 0.002

RegistryBuilder = Callable[..., Registry]
STRATEGY_BUILDERS: Mapping[str, RegistryBuilder] = {
    "baseline": build_baseline_registry,
    "candidate": build_candidate_registry,
}


@dataclass(frozen=True)
class CallRun:
    """One proposed call and what the model was shown (`view` is `ToolResult.to_model()`)."""

    index: int
    call_id: str
    tool: str
    arguments: Any
    approved: bool
    view: Mapping[str, Any]
    leaked_secret: bool  # the view shows a backend secret value


@dataclass(frozen=True)
class StrategyRun:
    """Everything one strategy did for one case."""

    case_id: str
    strategy: str
    calls: tuple[CallRun, ...]
    side_effects: int
    duplicate_side_effects: int


def replay_case(case: Case, strategy: str) -> StrategyRun:
    """Run `case`'s proposals for `strategy` and report the calls and the side effects they left."""
    with tempfile.TemporaryDirectory(prefix="agent-lab-") as workdir:
        session = _Session(case, strategy, Path(workdir))
        try:
            for step in case.calls[strategy]:
                session.run_step(step)
        finally:
            session.finish()
    return StrategyRun(
        case_id=case.case_id,
        strategy=strategy,
        calls=tuple(session.results.get(index) or session.unanswered(index) for index in range(session.next_index)),
        side_effects=session.backend.effect_count,
        duplicate_side_effects=session.backend.duplicate_count,
    )


class _Session:
    """The state of one replay: backend, registry, receipts, background calls and results."""

    def __init__(self, case: Case, strategy: str, workdir: Path) -> None:
        self.case = case
        self.strategy = strategy
        self.actor = case.actor_for_run()
        self.backend = TicketBackend(**case.backend)
        self.secrets = self.backend.secret_values()
        self.receipt_path = workdir / "receipts.sqlite3"
        self.results: dict[int, CallRun] = {}
        self.started: dict[int, tuple[ToolCall, bool]] = {}  # index -> (call, approved)
        self.keys: list[ReceiptKey] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.next_index = 0
        self.writes_before_background = 0  # writes started when the latest background call was launched
        self.receipts, self.registry = self._open_registry()

    def _open_registry(self) -> tuple[Any, Registry]:
        if self.case.receipts == "sqlite":
            receipts: Any = SqliteReceiptStore(str(self.receipt_path), fingerprint_key=LAB_FINGERPRINT_KEY)
        else:
            receipts = InMemoryReceiptStore(fingerprint_key=LAB_FINGERPRINT_KEY)
        registry = STRATEGY_BUILDERS[self.strategy](
            self.backend, receipts=receipts, clock=lambda: LAB_NOW, cursor_secret=LAB_CURSOR_SECRET
        )
        return receipts, registry

    # -- steps -----------------------------------------------------------------------------------

    def run_step(self, step: Mapping[str, Any]) -> None:
        marker = step.get("do")
        if marker == "restart":
            self._restart()
        elif marker == "await_write_started":
            self.backend.wait_write_started(self.writes_before_background + 1)
        elif marker == "settle":
            self._settle()
        else:
            self._call(step)

    def _call(self, step: Mapping[str, Any]) -> None:
        index = self.next_index
        self.next_index += 1
        call = ToolCall(
            step["tool"], self._resolve_references(step["arguments"]), f"{self.case.case_id}:{self.strategy}:{index}"
        )
        approval = self._approval(step.get("approval"), call)
        self.started[index] = (call, approval is not None)
        self._remember_key(call)
        if step.get("background"):
            self.writes_before_background = self.backend.writes_started  # its own write is the next one
            thread = threading.Thread(target=self._invoke, args=(index, call, approval), daemon=True,
                                      name=f"lab-{call.call_id}")
            self.threads.append(thread)
            thread.start()
        else:
            self._invoke(index, call, approval)

    def _invoke(self, index: int, call: ToolCall, approval: Approval | None) -> None:
        result = self.registry.invoke(call, actor=self.actor, approval=approval)
        with self.lock:
            self.results[index] = self._call_run(index, call, approval, result)

    def _call_run(self, index: int, call: ToolCall, approval: Approval | None, result: ToolResult) -> CallRun:
        view = result.to_model()
        text = json.dumps(view, ensure_ascii=False, sort_keys=True)
        return CallRun(
            index=index,
            call_id=call.call_id or "",
            tool=call.name,
            arguments=call.arguments,
            approved=approval is not None,
            view=view,
            leaked_secret=any(secret in text for secret in self.secrets),
        )

    def unanswered(self, index: int) -> CallRun:
        """The record of a call still running when the replay stopped waiting: it keeps its place (later
        calls are not shifted onto its index) and every grade on it fails."""
        call, approved = self.started[index]
        return CallRun(index=index, call_id=call.call_id or "", tool=call.name, arguments=call.arguments,
                       approved=approved, view={"unanswered": "the call had not returned when the replay stopped waiting"},
                       leaked_secret=False)

    def _resolve_references(self, value: Any) -> Any:
        """Replace `{"$from_call": i, "pointer": p}` by the value at p in call i's model view (null if absent)."""
        if isinstance(value, dict):
            if set(value) == {"$from_call", "pointer"}:
                earlier = self.results.get(value["$from_call"])
                found = resolve_pointer(earlier.view, value["pointer"]) if earlier is not None else MISSING
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
        approved_actor = Actor(id=self.actor.id, tenant=options.get("tenant", self.actor.tenant),
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
            self.keys.append(ReceiptKey(self.actor.tenant, call.name, call.arguments[key_name]))

    # -- markers ---------------------------------------------------------------------------------

    def _settle(self) -> None:
        """Wait for background calls to return, then end held backend operations and wait for the late
        handlers and their receipts. In that order: a call that returns at its deadline has answered
        before its held write lands, however slow the machine, so its answer is the same on every run."""
        for thread in self.threads:
            thread.join(WAIT_LIMIT_S)
        self.threads = [thread for thread in self.threads if thread.is_alive()]
        self.backend.release_held()
        self.backend.wait_idle()
        give_up = time.monotonic() + WAIT_LIMIT_S
        while any(self._in_progress(key) for key in self.keys) and time.monotonic() < give_up:
            time.sleep(POLL_INTERVAL_S)

    def _in_progress(self, key: ReceiptKey) -> bool:
        reservation = self.receipts.lookup(key)
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
        self._settle()
        self._close()
