"""`{"do": "crash_after_effect"}`: a call's process killed between its effect and its receipt, for real.

The replay hands the call to a child process (`python -m agent_lab.lab.crash`, the job as JSON on its
stdin). The child imports the lab, opens the case's world on the replay's directory and the case's
durable receipt store (the same SQLite file or PostgreSQL schema), builds the surface's registry over
them and invokes the call. Its store is wrapped so that `complete` SIGKILLs the process before the
receipt is written: the handler has run and its effect is in the world, and nothing after it happens.
A call without an idempotency key writes no receipt; the child is then killed as soon as `invoke`
returns with the world changed, before its answer leaves the process. A call that changes nothing (one
refused before it runs) is answered normally.

So the parent's world must show what the child did: a lab with crash cases gives its world factory a
`directory` keyword and keeps what `effects` reads in files there (`agent_lab.lab.journal.Journal`);
and the child must import the lab the way the parent did: the lab is a module-level value (found by
identity among the loaded modules, then imported by the child as `MODULE:ATTR`, or `FILE.py:ATTR` for
a lab loaded from a file path).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .definition import Lab, LabError

__all__ = ["CHILD_WAIT_S", "CRASHED_VIEW", "ChildAnswer", "crash_lab_problem", "deliver_in_child", "lab_reference",
           "main"]

CHILD_WAIT_S = 30.0  # a child that neither answers nor dies by then is killed and its call is unanswered
CHILD_SETTLE_S = 5.0  # how long the child waits for a late receipt (a write that overran its deadline)
LAB_ERROR_EXIT = 3
CRASHED_VIEW = {"crashed": "the process running this call was killed (SIGKILL) after its handler ran, before its "
                           "receipt or its answer could be written"}
USER_MODULE_PREFIX = "_agent_lab_user_"  # how agent_lab.lab.loader names a module loaded from a file path


@dataclass(frozen=True)
class ChildAnswer:
    """What became of a call handed to a crash child: `view` when it was answered (it changed nothing,
    so nothing was killed), else `crashed` (killed after the effect) or neither (it hung: killed).
    `world_changed`: whether the child saw its world change before it died."""

    view: Optional[Mapping[str, Any]] = None
    crashed: bool = False
    world_changed: bool = False


def lab_reference(lab: Lab) -> Optional[str]:
    """How a child process imports `lab`: `MODULE:ATTR`, or `FILE.py:ATTR` for a module the loader ran
    from a path; None when no loaded module holds it at its top level."""
    for name, module in list(sys.modules.items()):
        if module is None or name == "__main__" or (name.startswith("_") and not name.startswith(USER_MODULE_PREFIX)):
            continue
        try:
            members = list(vars(module).items())
        except TypeError:
            continue
        for attribute, value in members:
            if value is lab and attribute.isidentifier():
                if name.startswith(USER_MODULE_PREFIX):
                    path = getattr(module, "__file__", None)
                    return f"{path}:{attribute}" if isinstance(path, str) else None
                return f"{name}:{attribute}"
    return None


def crash_lab_problem(lab: Lab) -> Optional[str]:
    """What keeps `lab` from running a crash case (None: nothing), as the end of a sentence."""
    if getattr(signal, "SIGKILL", None) is None:
        return "this platform has no SIGKILL"
    if not _takes_directory(lab.world):
        return (f"lab {lab.name!r}'s world cannot outlive a process: give its world factory a `directory` keyword "
                "and keep what `effects` reads in files there (agent_lab.lab.journal.Journal)")
    if lab_reference(lab) is None:
        return (f"lab {lab.name!r} is not a module-level value a child process can import (define it at the top "
                "level of a module, as MODULE:ATTR)")
    return None


def _takes_directory(world: Any) -> bool:
    try:
        parameters = inspect.signature(world).parameters.values()
    except (TypeError, ValueError):
        return False
    return any((parameter.name == "directory" and parameter.kind is not parameter.POSITIONAL_ONLY)
               or parameter.kind is parameter.VAR_KEYWORD for parameter in parameters)


def deliver_in_child(job: Mapping[str, Any]) -> ChildAnswer:
    """Run `job` (see `main`) in a child process; LabError when the child fails for another reason."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(job["path"])
    child = subprocess.Popen([sys.executable, "-m", "agent_lab.lab.crash"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
    try:
        out, err = child.communicate(json.dumps(job).encode("utf-8"), timeout=CHILD_WAIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return ChildAnswer()
    except BaseException:  # Ctrl-C while it runs: the child never outlives the replay that started it
        child.kill()
        child.wait()
        raise
    answer = _last_json_line(out)
    if child.returncode == -signal.SIGKILL:
        return ChildAnswer(crashed=True, world_changed=answer.get("dying") == {"world_changed": True})
    if child.returncode == 0 and isinstance(answer.get("view"), dict):
        return ChildAnswer(view=answer["view"])
    if child.returncode == LAB_ERROR_EXIT and isinstance(answer.get("lab_error"), str):
        raise LabError(answer["lab_error"])
    last = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
    raise LabError(f"the crash child of lab {job['lab']!r} exited with status {child.returncode} ({last[:300]})")


def _last_json_line(out: bytes) -> dict[str, Any]:
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def main() -> None:
    """The child: read the job, deliver its call (dying at the receipt), print the view if it lives."""
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    sys.path[:] = list(job["path"])
    try:
        view = _deliver(job)
    except LabError as error:
        _answer({"lab_error": str(error)})
        os._exit(LAB_ERROR_EXIT)
    _answer({"view": view})
    os._exit(0)  # no atexit, no waiting for the registry's threads: the answer is out


def _answer(value: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def _deliver(job: Mapping[str, Any]) -> Mapping[str, Any]:
    from ..calls import ToolCall
    from ..policy import Actor, Approval
    from .clocks import LabClocks
    from .fault_store import FaultInjectingStore, FaultPlan, die
    from .loader import load_lab
    from .receipt_places import ReceiptPlace

    lab = load_lab(job["lab"])
    surface = lab.surface(job["surface"])
    world = lab.new_world(job["world_options"], directory=job["world_directory"])
    clocks = LabClocks(wall=job["wall"], monotonic=job["monotonic"])
    plan = FaultPlan()
    store = FaultInjectingStore(ReceiptPlace.described(job["receipts"]).open(clocks), plan)
    registry = lab.build(surface, world, receipts=store, clock=clocks.wall,
                         cursor_secret=bytes.fromhex(job["cursor_secret"]))
    before = lab.effects_of(world)

    def last_words() -> None:  # so the replay can tell a world that kept the effect from one that lost it
        _answer({"dying": {"world_changed": lab.effects_of(world) != before}})

    plan.crash_on_complete = last_words
    actor = job["actor"]
    call = job["call"]
    approval = Approval(**job["approval"]) if job.get("approval") is not None else None
    result = registry.invoke(ToolCall(call["name"], call["arguments"], call["call_id"]),
                             actor=Actor(id=actor["id"], tenant=actor["tenant"],
                                         permissions=frozenset(actor["permissions"])),
                             approval=approval)
    registry.wait_settled(CHILD_SETTLE_S)  # a receipt written late is written here: and dies here
    if lab.effects_of(world) != before:  # no receipt to die at (a call without a key): die before answering
        _answer({"dying": {"world_changed": True}})
        die()
    return result.to_model()


if __name__ == "__main__":
    main()
