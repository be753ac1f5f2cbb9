"""What `lint` and `catalog-cost` look at: the surfaces of a lab, or one registry.

A target is `MODULE:ATTR` (MODULE importable from the current directory, or a path to a `.py` file):
with `--lab`, a lab value (its `surfaces`, each with `name`, `build(world)` and `baseline`, and its
`world` factory); with `--registry`, a Registry or a zero-argument callable returning one. Without
either, the built-in ticket lab. Baseline surfaces are linted only when named with `--surface`: a
baseline is a reference, and never fails a gate.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

__all__ = ["LintTargetError", "Surface", "builtin_surfaces", "open_surfaces", "resolve_surfaces"]


class LintTargetError(ValueError):
    """A lab or registry that cannot be loaded or built; the message names it and the cause."""


@dataclass(frozen=True)
class Surface:
    name: str
    build: Callable[[], Any]  # -> Registry
    baseline: bool = False


def builtin_surfaces() -> list[Surface]:
    """The built-in ticket lab: the wide baseline and the typed candidate."""
    from ..lab.backend import TicketBackend
    from ..lab.baseline import BASELINE_NAME, build_baseline_registry
    from ..lab.candidate import CANDIDATE_NAME, build_candidate_registry

    return [Surface(BASELINE_NAME, lambda: build_baseline_registry(TicketBackend()), baseline=True),
            Surface(CANDIDATE_NAME, lambda: build_candidate_registry(TicketBackend()))]


def _import_attr(target: str, flag: str) -> Any:
    module_name, _, attribute = target.rpartition(":")
    if not module_name or not attribute:
        raise LintTargetError(f"{flag} {target}: expected MODULE:ATTR (a module or a .py file, then a name)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise LintTargetError(f"{flag} {target}: no such file {module_name}")
            spec = importlib.util.spec_from_file_location(f"_agent_lab_target_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise LintTargetError(f"{flag} {target}: cannot load {module_name}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except LintTargetError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's module: its failure is bad input, one line
        raise LintTargetError(f"{flag} {target}: cannot import {module_name}: "
                              f"{type(error).__name__}: {error}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise LintTargetError(f"{flag} {target}: {module_name} has no attribute {attribute!r}") from None


def _lab_surfaces(lab: Any, target: str) -> list[Surface]:
    surfaces = getattr(lab, "surfaces", None)
    world = getattr(lab, "world", None)
    if not surfaces or not callable(world):
        raise LintTargetError(f"--lab {target}: not a lab (it needs a world factory and at least one surface)")
    found = []
    for surface in surfaces:
        name, build = getattr(surface, "name", None), getattr(surface, "build", None)
        if not isinstance(name, str) or not callable(build):
            raise LintTargetError(f"--lab {target}: a surface needs a name and a build(world) function")
        found.append(Surface(name, _builder(build, world), baseline=bool(getattr(surface, "baseline", False))))
    return found


def _builder(build: Callable[[Any], Any], world: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: build(world())


def _registry_surface(target: str) -> Surface:
    value = _import_attr(target, "--registry")

    def build() -> Any:
        registry = value() if callable(value) and not hasattr(value, "names") else value
        if not (hasattr(registry, "names") and hasattr(registry, "spec")):
            raise LintTargetError(f"--registry {target}: not a Registry (nor a function returning one)")
        return registry

    return Surface(target.rpartition(":")[2], build)


def resolve_surfaces(*, lab: Optional[str] = None, registry: Optional[str] = None,
                     surface: Optional[Sequence[str]] = None) -> list[Surface]:
    """The surfaces to lint: all non-baseline surfaces of the lab (default: the built-in one), or the
    ones named in `surface` (a baseline too), or the one registry."""
    if lab and registry:
        raise LintTargetError("give --lab or --registry, not both")
    if registry:
        return [_registry_surface(registry)]
    surfaces = _lab_surfaces(_import_attr(lab, "--lab"), lab) if lab else builtin_surfaces()
    if not surface:
        chosen = [candidate for candidate in surfaces if not candidate.baseline]
        return chosen or surfaces
    by_name = {candidate.name: candidate for candidate in surfaces}
    unknown = [name for name in surface if name not in by_name]
    if unknown:
        raise LintTargetError(f"--surface {unknown[0]}: no such surface (surfaces: {', '.join(by_name)})")
    return [by_name[name] for name in dict.fromkeys(surface)]


@contextlib.contextmanager
def open_surfaces(surfaces: Sequence[Surface]) -> Iterator[list[tuple[str, Any]]]:
    """Build each surface's registry; close them all afterwards. A builder that raises is bad input."""
    built: list[tuple[str, Any]] = []
    try:
        for surface in surfaces:
            try:
                registry = surface.build()
            except LintTargetError:
                raise
            except Exception as error:  # noqa: BLE001 - the user's builder: one line, no traceback
                raise LintTargetError(f"surface {surface.name}: building its registry failed: "
                                      f"{type(error).__name__}: {error}") from None
            built.append((surface.name, registry))
        yield built
    finally:
        for _, registry in built:
            close = getattr(registry, "close", None)
            if callable(close):
                close()
