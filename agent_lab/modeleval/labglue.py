"""Where model-eval meets a lab: a fresh world, a surface's registry over it, the world's effects and
secrets. Kept in one module so the rest of model-eval knows a lab only through these functions.

Until the pluggable `agent_lab.lab.Lab` lands, the ticket lab is described here with the same shape
(name, world, surfaces with name/build/baseline, effects, secrets).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..registry import Registry

__all__ = ["DEFAULT_LAB", "LabError", "SurfaceView", "build_registry", "load_lab_target", "surfaces_of",
           "world_effects", "world_secrets"]

DEFAULT_LAB = "agent_lab.modeleval.labglue:ticket_lab"
LAB_NOW = 1_767_225_600.0
LAB_CURSOR_SECRET = b"agent-lab tool-eval cursor secret (fixed so reports are reproducible)"


class LabError(ValueError):
    """A lab that cannot be used; the message names MODULE:ATTR and the cause in one line."""


@dataclass(frozen=True)
class SurfaceView:
    name: str
    build: Callable[..., Registry]
    baseline: bool = False


@dataclass(frozen=True)
class _StandInLab:
    name: str
    world: Callable[[], Any]
    surfaces: Sequence[SurfaceView]
    effects: Callable[[Any], Any]
    secrets: Callable[[Any], Any]


def _ticket_lab() -> _StandInLab:
    from ..lab.backend import TicketBackend
    from ..lab.baseline import BASELINE_NAME, build_baseline_registry
    from ..lab.candidate import CANDIDATE_NAME, build_candidate_registry

    def seeded(builder: Callable[..., Registry]) -> Callable[[Any], Registry]:
        return lambda world: builder(world, clock=lambda: LAB_NOW, cursor_secret=LAB_CURSOR_SECRET)

    return _StandInLab(
        name="tickets",
        world=TicketBackend,
        surfaces=(SurfaceView(BASELINE_NAME, seeded(build_baseline_registry), baseline=True),
                  SurfaceView(CANDIDATE_NAME, seeded(build_candidate_registry))),
        effects=lambda world: [dataclasses.asdict(effect) for effect in world.effects],
        secrets=lambda world: sorted(world.secret_values()),
    )


ticket_lab = _ticket_lab()


def load_lab_target(target: str) -> Any:
    """The lab named MODULE:ATTR (an importable module)."""
    import importlib

    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name or not attribute:
        raise LabError(f"lab {target!r}: expected MODULE:ATTR")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001
        raise LabError(f"lab {target!r}: cannot import {module_name} ({type(error).__name__}: {error})") from None
    lab = getattr(module, attribute, None)
    if lab is None or not all(hasattr(lab, part) for part in ("name", "world", "surfaces", "effects", "secrets")):
        raise LabError(f"lab {target!r}: not a Lab")
    return lab


def surfaces_of(lab: Any) -> list[Any]:
    return list(lab.surfaces)


def open_world(lab: Any) -> Any:
    return lab.world()


def build_registry(surface: Any, world: Any) -> Registry:
    return surface.build(world)


def world_effects(lab: Any, world: Any) -> list[Any]:
    return list(lab.effects(world))


def world_secrets(lab: Any, world: Any) -> list[str]:
    return [secret for secret in lab.secrets(world) if isinstance(secret, str)]
