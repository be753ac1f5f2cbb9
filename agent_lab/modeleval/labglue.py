"""Where model-eval meets a lab (`agent_lab.lab.Lab`): a fresh world, a surface's registry over it with
the lab's fixed clock and cursor secret, the world's effects and secrets. Kept in one module so the
rest of model-eval knows a lab only through these functions.

Every trial gets its own receipt store, created here and closed after the trial. When the store can
hold a fingerprint key it gets a fixed one, so the fingerprints a model is shown (in an
`approval_required` answer) are the same on every run and a recorded conversation replays.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..fingerprint import canonical_json
from ..stores import InMemoryReceiptStore
from ..lab.definition import Lab, LabError
from ..lab.loader import BUILTIN_LAB, load_lab
from ..lab.replay import LAB_CURSOR_SECRET, LAB_NOW
from ..registry import Registry

__all__ = ["DEFAULT_LAB", "EVAL_FINGERPRINT_KEY", "Lab", "LabError", "build_registry", "default_tasks",
           "load_lab_target", "new_receipts", "open_world", "surface_catalog", "surfaces_of", "world_effects",
           "world_secrets"]

DEFAULT_LAB = BUILTIN_LAB
EVAL_FINGERPRINT_KEY = b"agent-lab model-eval fingerprint key (fixed so replays are byte-identical)"


def load_lab_target(target: str) -> Lab:
    """The lab named MODULE:ATTR or path/to/file.py:ATTR (LabError naming it and the cause)."""
    return load_lab(target)


def default_tasks(lab: Lab) -> list[str]:
    """The task files to run when none are named: the shipped ones, which are the built-in ticket lab's
    and nobody else's (run on another lab they would fail, or pass, for reasons of their own). LabError
    for any other lab: it must name its tasks."""
    from ..lab.loader import default_lab
    from .shipped import SHIPPED_TASKS

    if lab is default_lab():
        return [str(SHIPPED_TASKS)]
    raise LabError(f"lab {lab.name!r}: name its tasks with --tasks FILE (the shipped tasks, {SHIPPED_TASKS.name}, "
                   f"are the built-in lab's, {BUILTIN_LAB})")


def surfaces_of(lab: Lab) -> list[Any]:
    return list(lab.surfaces)


def open_world(lab: Lab) -> Any:
    return lab.new_world()


def new_receipts() -> Any:
    """A fresh in-memory receipt store with the fixed fingerprint key, so every run shows the same fingerprints."""
    return InMemoryReceiptStore(fingerprint_key=EVAL_FINGERPRINT_KEY)


def build_registry(lab: Lab, surface: Any, world: Any, receipts: Any) -> Registry:
    """The surface's registry over `world`, on `receipts`, at the lab's fixed clock and cursor secret."""
    registry: Registry = lab.build(surface, world, receipts=receipts, clock=_lab_clock, cursor_secret=LAB_CURSOR_SECRET)
    return registry


def surface_catalog(lab: Lab, surface: Any) -> dict[str, Any]:
    """A surface's catalog as a baseline verdict compares it: the SHA-256 of every tool's model-facing half
    and runtime contract (a changed description, schema or approval policy changes it), and each tool's
    idempotency-key argument as a JSON Pointer (its value is picked fresh per action, so never compared)."""
    world = open_world(lab)
    receipts = new_receipts()
    try:
        registry = build_registry(lab, surface, world, receipts)
        try:
            specs = [registry.spec(name) for name in registry.names()]
        finally:
            registry.close()
    finally:
        receipts.close()
    tools = [{"tool": spec.catalog_entry(), "contract": spec.runtime_contract()} for spec in specs]
    return {
        "catalog_sha256": hashlib.sha256(canonical_json(tools).encode("utf-8")).hexdigest(),
        "idempotency_keys": {spec.name: "/" + spec.idempotency_key.replace("~", "~0").replace("/", "~1")
                             for spec in specs if spec.idempotency_key},
    }


def _lab_clock() -> float:
    return LAB_NOW


def world_effects(lab: Lab, world: Any) -> list[Any]:
    return lab.effects_of(world)


def world_secrets(lab: Lab, world: Any) -> list[str]:
    return sorted(lab.secrets_of(world))
