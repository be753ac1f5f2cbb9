"""Replay one case on one surface of a lab, against a fresh world and a fresh registry.

Everything that could vary between runs is pinned: the clocks the registry and the receipt store read
(`LabClocks`: still at `LAB_NOW` until a `lapse_lease` or `clock_step` step moves them), the cursor
secret, the fingerprint key, call ids (`<case_id>:<surface>:<n>`) and approval ids. Operations the
world holds are released and waited for (`settle`) before side effects are counted, so a write that
timed out but finished late is counted once it lands, exactly as a user would later find it.

Fault markers are done for real (see `agent_lab.lab.faults`): the receipt store refuses on cue
(`FaultInjectingStore`), a crashing call runs in a child process that is SIGKILLed after its effect
(`agent_lab.lab.crash`), a delivery twice at once is two threads released together. The world's
effects are read at every step boundary, so each change is kept with the calls that may have made it
(`agent_lab.lab.observed`): what a tool declared is then checked against what its calls did.

The engine talks to the world only through the lab (`world`, `build`, `effects`, `secrets`, `settle`,
`writes_started`); anything the lab's code raises is a `LabError`. A value of the case file that
cannot be turned into a call (an approval that cannot be built, say) is a `CaseFileError` at the
case's FILE:LINE: bad input either way, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

from ..calls import ToolCall, ToolResult
from ..fingerprint import canonical_json
from ..policy import Actor, Approval
from ..redaction import SecretMask, contains_secret
from ..registry import Registry
from .cases import Case, CaseFileError, CaseProblem
from .clocks import LAB_NOW, LabClocks
from .definition import Lab, LabError, Surface
from .fault_store import FaultInjectingStore, FaultPlan
from .faults import (CLOCK_STEP, CRASH, FAIL_RECEIPT_WRITES, LAPSE_LEASE, REDELIVER, RESOLVE, STORE_UNAVAILABLE, TWICE,
                     signed_seconds)
from .observed import CallFacts, EffectFinding, EffectObserver, call_key, declaration, effect_findings, ran_handler
from .pointer import MISSING, resolve_pointer
from .receipt_places import LAB_FINGERPRINT_KEY, ReceiptPlace, receipt_place, replay_directory

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

LAB_CURSOR_SECRET = b"agent-lab tool-eval cursor secret (fixed so reports are reproducible)"
DEFAULT_APPROVER = "supervisor@lab.example"
DEFAULT_APPROVAL_TTL_S = 300.0
POLL_INTERVAL_S = 0.002
WAIT_LIMIT_S = 5.0  # how long a replay waits for background calls, writes and receipts before moving on
UNANSWERED_VIEW = {"unanswered": "the call had not returned when the replay stopped waiting"}


@dataclass(frozen=True)
class CallRun:
    """One delivered call and what the model was shown (`view` is `ToolResult.to_model()`). `faults`
    says how a fault marker delivered it (`redeliver`, `deliver_twice`, `crash_after_effect`)."""

    index: int
    call_id: str
    tool: str
    arguments: Any = field(repr=False)  # never in a repr: a tool may redact them (the view is redacted)
    approved: bool
    view: Mapping[str, Any]
    leaked_secret: bool  # the view shows a secret of the world
    faults: tuple[str, ...] = ()


@dataclass(frozen=True)
class SurfaceRun:
    """Everything one surface did for one case: its calls, the effects they left, the fault markers it
    ran (with what each did: `crash_after_effect (killed)`), and what its tools did against what they
    declared (`effect_findings`)."""

    case_id: str
    surface: str
    role: str
    calls: tuple[CallRun, ...]
    side_effects: int
    duplicate_side_effects: int
    secrets: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # to mask in reports
    faults: tuple[str, ...] = ()
    effect_findings: tuple[EffectFinding, ...] = ()


def registry_options(receipts: Any, clock: Optional[Callable[[], float]] = None) -> dict[str, Any]:
    """The keyword arguments a surface's `build(world, **options)` hands on to `Registry(**options)`:
    the receipt store, the replay's wall clock (default: `LAB_NOW`, still) and the cursor secret."""
    return {"receipts": receipts, "clock": clock if clock is not None else _lab_clock,
            "cursor_secret": LAB_CURSOR_SECRET}


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
    crashes = any(step.get("do") == CRASH for step in steps)
    with replay_directory(case.receipts == "sqlite" or crashes) as workdir, \
            receipt_place(case.receipts, workdir) as place:
        session = _Session(case, lab, target, prefix, place, workdir / "world" if crashes and workdir else None)
        try:
            for position, step in enumerate(steps):
                session.run_step(position, step)
            session.finish()
        except BaseException:
            session.abandon()
            raise
    return session.surface_run()


@dataclass(frozen=True)
class _Delivery:
    """One delivery of a call: the call, the approval it carried, how a fault marker delivered it, and
    its tool's spec (None: the surface has no such tool)."""

    call: ToolCall
    approval: Optional[Approval]
    faults: tuple[str, ...]
    spec: Any


class _Session:
    """The state of one replay: world, clocks, registries, receipts, deliveries and results."""

    def __init__(self, case: Case, lab: Lab, surface: Surface, prefix: str, place: ReceiptPlace,
                 world_directory: Optional[Path]) -> None:
        self.case = case
        self.lab = lab
        self.surface = surface
        self.prefix = prefix  # where this surface's steps are in the case line, for messages
        self.actor = self._case_value("actor", case.actor_for_run)
        self.place = place
        self.clocks = LabClocks()
        self.plan = FaultPlan()
        self.world_directory = world_directory
        if world_directory is not None:
            world_directory.mkdir()
        self.world = lab.new_world(case.world, directory=None if world_directory is None else str(world_directory))
        self.secrets = set(lab.secrets_of(self.world))
        self.deliveries: dict[int, _Delivery] = {}
        self.results: dict[int, Mapping[str, Any]] = {}
        self.pairs: list[tuple[int, list[Mapping[str, Any]]]] = []  # deliver_twice: first index, views so far
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.next_index = 0
        self.writes_before_background = 0  # writes started when the latest background call was launched
        self.effects: list[Any] = []
        self.armed: list[str] = []  # arming markers waiting for the next delivery
        self.faults: list[str] = []  # the fault markers run, and what each did, for the reports
        self.retired: list[Registry] = []  # workers a lapse_lease left behind, their handlers still running
        self.observer = EffectObserver(lambda: self.lab.effects_of(self.world))
        self.receipts, self.registry = self._open_registry()

    def _open_registry(self) -> tuple[FaultInjectingStore, Registry]:
        receipts = FaultInjectingStore(self.place.open(self.clocks), self.plan)
        try:
            return receipts, self._build(receipts)
        except BaseException:
            receipts.close()
            raise

    def _build(self, receipts: FaultInjectingStore) -> Registry:
        registry: Registry = self.lab.build(self.surface, self.world, **registry_options(receipts, self.clocks.wall))
        return registry

    # -- steps -----------------------------------------------------------------------------------

    def run_step(self, position: int, step: Mapping[str, Any]) -> None:
        marker = step.get("do")
        if marker is None:
            self._call(position, step)
        elif marker == "restart":
            self._restart()
        elif marker == "await_write_started":
            self._await_write_started()
        elif marker == "settle":
            self._settle()
        elif marker == REDELIVER:
            self._redeliver(position, step)
        elif marker == RESOLVE:
            self._resolve(position, step)
        else:
            self._fault(marker, step)

    def _call(self, position: int, step: Mapping[str, Any]) -> None:
        call = ToolCall(step["tool"], self._resolve_references(step["arguments"]),
                        f"{self.case.case_id}:{self.surface.name}:{self.next_index}")
        approval = self._case_value(f"{position}/approval", lambda: self._approval(step.get("approval"), call))
        self._deliver(call, approval, background=bool(step.get("background")))

    def _deliver(self, call: ToolCall, approval: Optional[Approval], *, background: bool = False,
                 faults: tuple[str, ...] = ()) -> None:
        """Deliver `call` as the markers armed for it say: in a child process that crashes, twice at once,
        in the background, or here and now."""
        armed, self.armed = self.armed, []
        if CRASH in armed:
            self._deliver_in_child(call, approval)
        elif TWICE in armed:
            self._deliver_twice(call, approval)
        elif background:
            self._note_writes_started()
            index = self._new_delivery(call, approval, faults)
            self._launch(index, call, approval)
        else:
            index = self._new_delivery(call, approval, faults)
            view = self._invoke(self.registry, call, approval)
            self._record(index, view)
            if not _may_still_run(view):
                self.observer.end(index)

    def _new_delivery(self, call: ToolCall, approval: Optional[Approval], faults: tuple[str, ...]) -> int:
        index = self.next_index
        self.next_index += 1
        spec = self.registry.spec(call.name) if call.name in self.registry.names() else None
        self.deliveries[index] = _Delivery(call, approval, faults, spec)
        self.observer.start(index)
        return index

    def _note_writes_started(self) -> None:
        if self.lab.writes_started is not None:
            self.writes_before_background = self.lab.writes_started_in(self.world)  # its own write is next

    def _launch(self, index: int, call: ToolCall, approval: Optional[Approval]) -> None:
        registry = self.registry  # a background call keeps the worker it started on (see lapse_lease)

        def run() -> None:
            self._record(index, self._invoke(registry, call, approval))

        self._start_thread(run, f"lab-{call.call_id}")

    def _start_thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, daemon=True, name=name)
        self.threads.append(thread)
        thread.start()

    def _invoke(self, registry: Registry, call: ToolCall, approval: Optional[Approval]) -> Mapping[str, Any]:
        result: ToolResult = registry.invoke(call, actor=self.actor, approval=approval)
        return result.to_model()

    def _record(self, index: int, view: Mapping[str, Any]) -> None:
        with self.lock:
            self.results[index] = view

    def _case_value(self, where: str, build: Any) -> Any:
        """`build()`, turning what the library refuses about a case value into a problem at FILE:LINE."""
        try:
            return build()
        except (TypeError, ValueError, OverflowError) as error:  # the library's own, safe messages
            location = where if where == "actor" else f"{self.prefix}/{where}"
            message = " ".join(str(error).split()) or type(error).__name__
            raise self._problem(f"'{location}' cannot be replayed: {message}") from None

    def _problem(self, message: str) -> CaseFileError:
        return CaseFileError([CaseProblem(self.case.source_path, self.case.source_line, message)])

    def _resolve_references(self, value: Any) -> Any:
        """Replace `{"$from_call": i, "pointer": p}` by the value at p in call i's model view (null if absent)."""
        if isinstance(value, dict):
            if set(value) == {"$from_call", "pointer"}:
                earlier = self.results.get(value["$from_call"])
                found = resolve_pointer(earlier, value["pointer"]) if earlier is not None else MISSING
                return None if found is MISSING else found
            return {key: self._resolve_references(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve_references(item) for item in value]
        return value

    def _approval(self, request: Any, call: ToolCall, approval_id: Optional[str] = None) -> Approval | None:
        """Build the approval a person gave, for this call or (to test binding) for another one, issued
        by the replay's wall clock as it reads now (minus `age_s`)."""
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
            now=self.clocks.wall() - options.get("age_s", 0),
        )
        return dataclasses.replace(approval, approval_id=approval_id or f"apr-{call.call_id}")

    # -- fault markers ---------------------------------------------------------------------------

    def _fault(self, marker: str, step: Mapping[str, Any]) -> None:
        """A marker that arms the next delivery, or changes the store or the clocks from now on."""
        label = marker
        if marker in (CRASH, TWICE):
            self.armed.append(marker)
            return  # recorded with what it did, once the delivery is done
        if marker == FAIL_RECEIPT_WRITES:
            self.plan.refuse("complete", step["times"])
            label = f"{marker} ×{step['times']}"
        elif marker == STORE_UNAVAILABLE:
            self.plan.refuse("reserve", step["times"])
            label = f"{marker} ×{step['times']}"
        elif marker == CLOCK_STEP:
            self.clocks.step_wall_clock(step["seconds"])
            label = f"{marker} {signed_seconds(step['seconds'])}"
        elif marker == LAPSE_LEASE:
            self._lapse_lease()
        self.faults.append(label)

    def _lapse_lease(self) -> None:
        """The worker holding the leases stalls past them: time passes beyond the store's lease, and the
        next calls go to another worker on the same receipts and world; the stalled one's handlers go on
        (and store their receipts, if the store still lets them, when they finish)."""
        self.clocks.time_passes(float(self.receipts.lease_s) + 1.0)
        self.retired.append(self.registry)
        self.registry = self._build(self.receipts)

    def _latest(self) -> _Delivery:
        return self.deliveries[self.next_index - 1]

    def _redeliver(self, position: int, step: Mapping[str, Any]) -> None:
        """The latest call again, unchanged: the same call id, arguments and approval, or with a person's
        approval of exactly that call (a run resumed after `approval_required`)."""
        latest = self._latest()
        approval = latest.approval
        if "approval" in step:
            approval_id = f"apr-{latest.call.call_id}-{self.next_index}"
            approval = self._case_value(f"{position}/approval",
                                        lambda: self._approval(step["approval"], latest.call, approval_id))
        self.faults.append(REDELIVER if "approval" not in step else f"{REDELIVER} (approved)")
        self._deliver(latest.call, approval, faults=(REDELIVER,))

    def _deliver_twice(self, call: ToolCall, approval: Optional[Approval]) -> None:
        """Two deliveries of `call` at once, from two threads released together. Which wins the race is
        up to the scheduler, so their results are recorded in a fixed order (by their views' canonical
        JSON) once both are in (at the next settle)."""
        self._note_writes_started()
        first = self._new_delivery(call, approval, (TWICE,))
        self._new_delivery(call, approval, (TWICE,))
        views: list[Mapping[str, Any]] = []
        self.pairs.append((first, views))
        registry = self.registry
        barrier = threading.Barrier(2)

        def run() -> None:
            try:
                barrier.wait(WAIT_LIMIT_S)
            except threading.BrokenBarrierError:
                pass
            view = self._invoke(registry, call, approval)
            with self.lock:
                views.append(view)

        for twin in (1, 2):
            self._start_thread(run, f"lab-{call.call_id}-{twin}")
        self.faults.append(TWICE)

    def _deliver_in_child(self, call: ToolCall, approval: Optional[Approval]) -> None:
        """Deliver `call` in a child process that is SIGKILLed after its effect (see agent_lab.lab.crash),
        then go on with a fresh registry over the same receipts and world."""
        from .crash import CRASHED_VIEW, deliver_in_child  # child processes: only a case that crashes needs them

        index = self._new_delivery(call, approval, (CRASH,))
        try:
            answer = deliver_in_child(self._child_job(call, approval))
        except LabError as error:  # the child's last words may quote the world or the DSN: mask them
            raise LabError(SecretMask(frozenset(self.secrets) | self.place.secrets()).text(str(error))) from None
        view = answer.view if answer.view is not None else CRASHED_VIEW if answer.crashed else UNANSWERED_VIEW
        self._record(index, view)
        changes = len(self.observer.changes)
        self.observer.end(index)
        if answer.world_changed and len(self.observer.changes) == changes:
            raise LabError(f"lab {self.lab.name!r}: a crash child changed its world, but the replay's world does not "
                           "show it: world(directory=...) must keep what effects(world) reads in files there")
        what = "killed" if answer.crashed else "no effect: not killed" if answer.view is not None else "hung: killed"
        self.faults.append(f"{CRASH} ({what})")
        self._restart()

    def _child_job(self, call: ToolCall, approval: Optional[Approval]) -> dict[str, Any]:
        import os
        import sys

        from .crash import lab_reference

        return {
            "path": [os.path.abspath(entry) for entry in sys.path],
            "lab": lab_reference(self.lab),
            "surface": self.surface.name,
            "world_options": dict(self.case.world),
            "world_directory": str(self.world_directory),
            "receipts": self.place.description(),
            "wall": self.clocks.wall(),
            "monotonic": self.clocks.monotonic(),
            "cursor_secret": LAB_CURSOR_SECRET.hex(),
            "actor": {"id": self.actor.id, "tenant": self.actor.tenant, "permissions": sorted(self.actor.permissions)},
            "call": {"name": call.name, "arguments": call.arguments, "call_id": call.call_id},
            "approval": dataclasses.asdict(approval) if approval is not None else None,
        }

    def _resolve(self, position: int, step: Mapping[str, Any]) -> None:
        """A person settles the latest call's key, as `Registry.resolve_unknown` lets them."""
        latest = self._latest()
        spec, arguments = latest.spec, latest.call.arguments
        key = spec.idempotency_key if spec is not None else None
        value = arguments.get(key) if key is not None and isinstance(arguments, dict) else None
        if not isinstance(value, str):
            raise self._problem(f"'{self.prefix}/{position}' resolves the key of call {self.next_index - 1}, but "
                                f"tool {latest.call.name!r} takes no idempotency key there")
        happened = step["happened"]
        resolved = self._case_value(f"{position}/output", lambda: self.registry.resolve_unknown(
            spec.name, value, tenant=self.actor.tenant, happened=happened, output=step.get("output")))
        self.faults.append(f"{RESOLVE} happened={str(happened).lower()} ({'resolved' if resolved else 'refused'})")

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
        give_up = time.monotonic() + WAIT_LIMIT_S
        for thread in self.threads:
            thread.join(max(0.0, give_up - time.monotonic()))
        self.threads = [thread for thread in self.threads if thread.is_alive()]
        self._order_pairs()
        self.lab.settle_world(self.world)
        give_up = time.monotonic() + WAIT_LIMIT_S
        for registry in (*self.retired, self.registry):
            registry.wait_settled(max(0.0, give_up - time.monotonic()))
        self.observer.end_all()

    def _order_pairs(self) -> None:
        """The results of each delivery twice at once, in their fixed order (see `_deliver_twice`)."""
        with self.lock:
            for first, views in self.pairs:
                for offset, view in enumerate(sorted(views, key=canonical_json)):
                    self.results[first + offset] = view
            self.pairs = [(first, views) for first, views in self.pairs if len(views) < 2]

    def _restart(self) -> None:
        """Stop the registry as a process restart would, and start a new one on the same receipts."""
        self._settle()
        self._close()
        self.receipts, self.registry = self._open_registry()

    def _close(self) -> None:
        for registry in (*self.retired, self.registry):
            registry.close()
        self.retired = []
        self.receipts.close()

    def finish(self) -> None:
        """Settle, read what the world observed, and close."""
        self._settle()
        self.effects = self.lab.effects_of(self.world)
        self.secrets |= self.lab.secrets_of(self.world)
        self._close()

    def abandon(self) -> None:
        """Close after a failure, calling none of the lab's code again."""
        try:
            self._close()
        except Exception:  # noqa: BLE001 - the failure being raised matters more
            pass

    # -- the record ------------------------------------------------------------------------------

    def surface_run(self) -> SurfaceRun:
        secrets = frozenset(self.secrets)
        calls = tuple(self._call_run(index, secrets) for index in range(self.next_index))
        facts = {}
        for call in calls:
            spec = self.deliveries[call.index].spec
            declared = declaration(spec) if spec is not None else None
            facts[call.index] = CallFacts(tool=call.tool, declared=declared, ran=ran_handler(call.view),
                                          key=call_key(declared, call.arguments) if declared is not None else None)
        return SurfaceRun(
            case_id=self.case.case_id,
            surface=self.surface.name,
            role=self.surface.role,
            calls=calls,
            side_effects=len(self.effects),
            duplicate_side_effects=_duplicates(self.effects),
            secrets=secrets,
            faults=tuple(self.faults),
            effect_findings=effect_findings(self.observer.changes, facts),
        )

    def _call_run(self, index: int, secrets: frozenset[str]) -> CallRun:
        """The record of call `index`. A call still running when the replay stopped waiting keeps its
        place (later calls are not shifted onto its index) and every grade on it fails."""
        delivery = self.deliveries[index]
        answer = self.results.get(index)
        view: Mapping[str, Any] = answer if answer is not None else UNANSWERED_VIEW
        return CallRun(index=index, call_id=delivery.call.call_id or "", tool=delivery.call.name,
                       arguments=delivery.call.arguments, approved=delivery.approval is not None, view=view,
                       leaked_secret=answer is not None and shows_secret(view, secrets), faults=delivery.faults)


def _may_still_run(view: Mapping[str, Any]) -> bool:
    """Whether a delivery that returned may have left its handler running (a timeout does)."""
    return (view.get("error") or {}).get("code") == "tool_timeout"


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
