"""What a lab is: a world factory, the tool surfaces built over it, and how to read its effects and secrets.

`Lab` and `Surface` are plain values a team builds in its own code; the engine (cases, replay,
grading, metrics, reports) only ever talks to a world through them, so it knows no domain. Both are
checked when they are built, so a mistake shows as one clear `TypeError` or `ValueError` at import
time instead of a confusing failure in the middle of a run.

The lab's own code (world factory, builders, effect and secret readers, hooks) is called through the
methods below, which turn anything it raises or returns wrongly into one `LabError` naming the part
and the cause: a broken lab is bad input (exit 2), never a traceback and never a failed gate. Anything
means anything: `sys.exit(0)`, a KeyboardInterrupt the lab raises itself, GeneratorExit, an exception
whose message cannot be read. Only the caller's own Ctrl-C stops the run (`agent_lab.interrupts`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..execution import type_name
from ..interrupts import raise_stop_request
from ..policy import Actor

__all__ = [
    "BASELINE",
    "CANDIDATE",
    "REGISTRY_OPTIONS",
    "SURFACE_NAME_PATTERN",
    "Lab",
    "LabError",
    "Surface",
]

BASELINE = "baseline"
CANDIDATE = "candidate"
SURFACE_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # ids in call ids, JUnit and test names
LAB_NAME_PATTERN = SURFACE_NAME_PATTERN
# Keyword arguments the engine passes to `Surface.build`, to be handed on to `Registry(**options)`: the
# receipt store (so `sqlite` receipts survive a `restart`), the fixed clock and the cursor secret.
REGISTRY_OPTIONS = ("receipts", "clock", "cursor_secret")
# Keys of a case's `expected` block; a surface named like one could not be given its own block.
EXPECTATION_KEYS = frozenset({
    "outcome", "error_code", "retryable", "next_action", "replayed", "checks", "side_effects", "steps",
    "same_output", "same_error", "secrets_masked",
})
MIN_SECRET_CHARACTERS = 2
"""A world secret is at least this long (and not white space only). A short one (a CVV `737`, a PIN `42`) is
masked and graded as a whole token (`agent_lab.redaction.MIN_SECRET_LENGTH`); a single character cannot be
told apart from the text around it: every report line with that digit or letter standing alone would be
masked, and nearly every answer graded as a leak."""


class LabError(Exception):
    """A lab that cannot be loaded or run: its message is one line naming the part and the cause."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def describe_exception(error: BaseException) -> str:
    """`TypeName: message` on one line, for messages about the lab's own code. Never raises for what the
    exception does: a message that cannot be read (its `__str__` raises, sys.exit too, or returns no
    text) is said to be unreadable, and the class's name is read without running its code."""
    name = type_name(error)
    try:
        text = str(error)
        message = _one_line(str.__str__(text)) if isinstance(text, str) else "[message unreadable]"
    except BaseException as problem:  # noqa: BLE001 - the lab's own code, run by str()
        raise_stop_request(problem)
        message = "[message unreadable]"
    return f"{name}: {message}" if message else name


def _hook_error(where: str, error: BaseException, mask: Callable[[str], str] = str) -> LabError:
    """The LabError for a lab hook that raised `error` (anything but the caller's own Ctrl-C, which is
    raised instead): `where` plus what was raised, on one line, passed through `mask`."""
    raise_stop_request(error)
    return LabError(f"{where} raised {mask(describe_exception(error))}")


def _check_name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    if not SURFACE_NAME_PATTERN.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit")
    return value


def _check_callable(value: Any, what: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise TypeError(f"{what} must be callable, not {type(value).__name__}")


@dataclass(frozen=True)
class Surface:
    """One tool surface of a lab: `build(world, **options)` returns a `Registry` over `world`.

    `options` are keyword arguments for `Registry(**options)` (the receipt store, the lab's fixed clock
    and cursor secret): pass them on, so receipts survive a `restart` step and reports are reproducible.
    A baseline is a reference that is measured but never gates; every other surface is a candidate.
    """

    name: str
    build: Callable[..., Any]
    _: KW_ONLY
    baseline: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name, "Surface.name")
        _check_callable(self.build, f"Surface {self.name!r}: build")
        if not isinstance(self.baseline, bool):
            raise TypeError(f"Surface {self.name!r}: baseline must be True or False, not {type(self.baseline).__name__}")
        if self.name == (CANDIDATE if self.baseline else BASELINE):
            raise ValueError(f"Surface {self.name!r}: a {self.role} cannot be named {self.name!r}")
        if self.name in EXPECTATION_KEYS:
            raise ValueError(f"Surface {self.name!r}: the name is an expectation key of case files; choose another")
        _check_build_signature(self)

    @classmethod
    def from_mcp(cls, name: str, server: Any, *, baseline: bool = False, policy: Any = None, lock: Any = None,
                 timeout_s: float | None = None, pass_env: Sequence[str] = (), cwd: str | None = None) -> Surface:
        """A surface whose tools are an MCP server's, imported under `policy` (a ToolPolicy, or a TOML or
        JSON file; None: the strictest defaults) and optionally checked against `lock` (a contract lockfile
        or its path: a tool that drifted from it, or that it does not hold, is refused at every call; the
        lock's surface named `name` is checked first, see `agent_lab.mcp_client.importing`). `server` is a
        command line or an http(s):// URL, or a list of them: one agent's tools from several servers, in
        one registry (each server checked against the lock's surface of its own name, as `lock --mcp`
        writes it); `{world}` in a command stands for the case's world directory (a world with
        `__fspath__`, such as `agent_lab.mcp_client.surfaces.McpWorld`). Every case gets fresh server
        processes over a fresh world. See `agent_lab.mcp_client.surfaces`."""
        from ..mcp_client.surface_build import ServerSurfaceBuild  # it builds on no lab module: no circle
        from ..mcp_client.wire import DEFAULT_TIMEOUT_S

        build = ServerSurfaceBuild(server, policy=policy, lock=lock, surface=name, pass_env=pass_env, cwd=cwd,
                                   timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
        return cls(name, build, baseline=baseline)

    @property
    def role(self) -> str:
        """"baseline" or "candidate"."""
        return BASELINE if self.baseline else CANDIDATE

    @property
    def label(self) -> str:
        """How reports name it: "candidate (typed-v2)"."""
        return f"{self.role} ({self.name})"


def _check_build_signature(surface: Surface) -> None:
    try:
        signature = inspect.signature(surface.build)
    except (TypeError, ValueError):  # a builtin or an extension type: it will be checked when called
        return
    try:
        signature.bind(object(), **{option: None for option in REGISTRY_OPTIONS})
    except TypeError:
        raise TypeError(
            f"Surface {surface.name!r}: build must accept (world, **options) and pass the options to "
            "Registry(**options)"
        ) from None


def _no_hook(world: Any) -> None:
    return None


def _is_registry(value: Any) -> bool:
    """A Registry subclass's instance, told by its class alone (isinstance would ask the object's own
    `__class__`, which a builder's object may make raise)."""
    from ..registry import Registry

    return issubclass(type(value), Registry)


@dataclass(frozen=True, kw_only=True)
class Lab:
    """A world, the tool surfaces over it, and what the lab observes about it.

    - `world(**options)`: a fresh world for every case and surface (options: the case's `world` block,
      checked against the JSON Schema `world_options`; none when it is None). A factory that also takes
      `directory=` keeps the world's state in files there, which is what a crash case needs (the replay
      passes one for those cases only; see `agent_lab.lab.crash` and `agent_lab.lab.journal`).
    - `surfaces`: at least one candidate; at most one baseline.
    - `effects(world)`: one JSON record per side effect, in order (duplicates: records equal as
      canonical JSON). Read at every step boundary too (which calls changed the world: see
      `agent_lab.lab.observed`), possibly while background calls run: it must only read.
      `secrets(world)`: strings that must never reach the model (None: the lab has none).
    - `settle(world)`: release operations the world holds and wait until none runs (the `settle` and
      `restart` steps). `writes_started(world)`: how many writes have begun (the `await_write_started` step).
    - `actor`: who `serve-mcp` runs calls as; `cases`: the case files used when none are named.
    """

    name: str
    world: Callable[..., Any]
    surfaces: Sequence[Surface]  # any iterable; kept as a tuple
    effects: Callable[[Any], Iterable[Any]]
    secrets: Callable[[Any], Iterable[str]] | None = None
    world_options: Mapping[str, Any] | None = None
    settle: Callable[[Any], Any] | None = None
    writes_started: Callable[[Any], int] | None = None
    actor: Actor | None = None
    cases: Sequence[str] = ()  # kept as a tuple of strings
    world_options_validator: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        _check_name(self.name, "Lab.name")
        _check_callable(self.world, f"Lab {self.name!r}: world")
        _check_callable(self.effects, f"Lab {self.name!r}: effects")
        for hook in ("secrets", "settle", "writes_started"):
            _check_callable(getattr(self, hook), f"Lab {self.name!r}: {hook}", optional=True)
        object.__setattr__(self, "surfaces", self._checked_surfaces())
        if self.actor is not None and not isinstance(self.actor, Actor):
            raise TypeError(f"Lab {self.name!r}: actor must be an agent_lab.Actor, not {type(self.actor).__name__}")
        object.__setattr__(self, "cases", self._checked_cases())
        if self.world_options is not None:
            object.__setattr__(self, "world_options_validator", self._compiled_world_options())

    def _checked_surfaces(self) -> tuple[Surface, ...]:
        if isinstance(self.surfaces, (str, bytes, Mapping)) or not isinstance(self.surfaces, Iterable):
            raise TypeError(f"Lab {self.name!r}: surfaces must be a list of Surface values")
        surfaces = tuple(self.surfaces)
        for surface in surfaces:
            if not isinstance(surface, Surface):
                raise TypeError(f"Lab {self.name!r}: every surface must be a Surface, not {type(surface).__name__}")
        names = [surface.name for surface in surfaces]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"Lab {self.name!r}: two surfaces are named {repeated[0]!r}")
        if sum(surface.baseline for surface in surfaces) > 1:
            raise ValueError(f"Lab {self.name!r}: at most one surface may be the baseline")
        if not any(not surface.baseline for surface in surfaces):
            raise ValueError(f"Lab {self.name!r}: needs at least one candidate surface (baseline=False) to gate")
        return surfaces

    def _checked_cases(self) -> tuple[str, ...]:
        if isinstance(self.cases, (str, Path)):
            raise TypeError(f"Lab {self.name!r}: cases must be a list of paths, not one path")
        cases = tuple(self.cases)
        for path in cases:
            if not isinstance(path, (str, Path)) or not str(path):
                raise TypeError(f"Lab {self.name!r}: every case file must be a non-empty path")
        return tuple(str(path) for path in cases)

    def _compiled_world_options(self) -> Any:
        from ..schema import SchemaError, Validator

        if not isinstance(self.world_options, Mapping):
            raise TypeError(f"Lab {self.name!r}: world_options must be a JSON Schema object")
        try:
            return Validator(dict(self.world_options))
        except SchemaError as error:
            raise ValueError(f"Lab {self.name!r}: world_options is not a valid JSON Schema: {error}") from None

    # -- looking surfaces up -------------------------------------------------------------------------

    @property
    def baseline(self) -> Surface | None:
        return next((surface for surface in self.surfaces if surface.baseline), None)

    @property
    def candidates(self) -> tuple[Surface, ...]:
        return tuple(surface for surface in self.surfaces if not surface.baseline)

    def surface(self, name: str) -> Surface:
        """The surface called `name`, or the one surface of role `name` ("baseline" / "candidate").

        Raises KeyError (with the names it knows) when there is none, or when a role names several.
        """
        for surface in self.surfaces:
            if surface.name == name:
                return surface
        holders = [surface for surface in self.surfaces if surface.role == name]
        if len(holders) == 1:
            return holders[0]
        known = ", ".join(surface.name for surface in self.surfaces)
        if holders:
            names = ", ".join(surface.name for surface in holders)
            raise KeyError(f"lab {self.name!r} has {len(holders)} {name} surfaces ({names}): name one")
        raise KeyError(f"lab {self.name!r} has no surface {name!r} (surfaces: {known})")

    # -- calling the lab's own code --------------------------------------------------------------------

    def new_world(self, options: Mapping[str, Any] | None = None, *, directory: str | None = None) -> Any:
        """A fresh world (LabError when the factory raises); with `directory`, one that keeps its state in
        files there (`world(directory=..., **options)`: what a crash case needs, see `agent_lab.lab.crash`)."""
        arguments = dict(options or {})
        if directory is not None:
            arguments["directory"] = directory
        try:
            return self.world(**arguments)
        except BaseException as error:  # noqa: BLE001 - the lab's own code: any failure (sys.exit too) is a broken lab
            raise _hook_error("world()", error) from None

    def build(self, surface: Surface, world: Any, **options: Any) -> Any:
        """`surface.build(world, **options)`, checked: a Registry that uses the receipt store it was given."""
        from ..registry import Registry

        try:
            registry = surface.build(world, **options)
        except BaseException as error:  # noqa: BLE001
            raise _hook_error(f"surface {surface.name!r}: build(world)", error,
                              lambda text: self._masked(world, text)) from None
        if type(registry) is not Registry and not _is_registry(registry):
            raise LabError(f"surface {surface.name!r}: build(world) returned {type_name(registry)}, not a Registry")
        if "receipts" in options and registry.receipts is not options["receipts"]:
            registry.close()
            raise LabError(f"surface {surface.name!r}: build(world, **options) must pass the options on to "
                           "Registry(**options) (its registry ignores the lab's receipt store)")
        return registry

    def effects_of(self, world: Any) -> list[Any]:
        """The world's side effects as a list of JSON records (LabError otherwise)."""
        from ..fingerprint import canonical_json

        try:
            returned = self.effects(world)
            records = None if isinstance(returned, (str, bytes, Mapping)) else list(returned)
        except BaseException as error:  # noqa: BLE001
            raise _hook_error("effects(world)", error, lambda text: self._masked(world, text)) from None
        if records is None:  # its characters or keys would each count as a side effect
            raise LabError(f"effects(world) must return a list of records, not a {type_name(returned)}")
        for index, record in enumerate(records):
            try:
                canonical_json(record)
            except ValueError as error:
                raise LabError(f"effects(world) record {index} is not JSON ({_one_line(str(error))})") from None
            except BaseException as error:  # noqa: BLE001 - a record's own code ran (a dict subclass, say)
                raise _hook_error(f"reading effects(world) record {index}", error,
                                  lambda text: self._masked(world, text)) from None
        return records

    def secrets_of(self, world: Any) -> frozenset[str]:
        """The world's secret values (LabError for anything but strings of at least MIN_SECRET_CHARACTERS,
        not white space only). A short one (a CVV `737`) is masked and graded as a whole token: never
        inside `17375`."""
        if self.secrets is None:
            return frozenset()
        try:
            values = self.secrets(world)
            found = list(values) if not isinstance(values, (str, Mapping)) else None
        except BaseException as error:  # noqa: BLE001 - never masked: the secrets could not be read
            raise _hook_error("secrets(world)", error) from None
        if found is None:  # a mapping's keys would be masked, and its values (the secrets, likely) shown
            kind = "one string" if isinstance(values, str) else f"a {type_name(values)} (its keys, not its values)"
            raise LabError(f"secrets(world) must return a collection of strings, not {kind}")
        texts = []
        for value in found:
            if type(value) is not str and not issubclass(type(value), str):
                raise LabError(f"secrets(world) returned a {type_name(value)}; secrets are strings")
            text = str.__str__(value)  # a str subclass's own methods are never asked again
            if len(text) < MIN_SECRET_CHARACTERS or not text.strip():
                raise LabError(f"secrets(world) returned a value shorter than {MIN_SECRET_CHARACTERS} characters or of "
                               "white space only, which reports could not mask without masking ordinary text")
            texts.append(text)
        return frozenset(texts)

    def _masked(self, world: Any, message: str) -> str:
        """A message about the lab's code with the world's secrets masked: the error line goes to
        stderr, a CI log, and a hook's exception may well name a secret (a KeyError on a token, say).
        Best effort: a world whose secrets cannot be read leaves the message as it is."""
        from ..redaction import SecretMask

        try:
            secrets = self.secrets_of(world)
        except LabError:
            return message
        return SecretMask(secrets).text(message)

    def settle_world(self, world: Any) -> None:
        """Release the world's held operations and wait until none runs (no-op without a `settle` hook)."""
        try:
            (self.settle or _no_hook)(world)
        except BaseException as error:  # noqa: BLE001
            raise _hook_error("settle(world)", error, lambda text: self._masked(world, text)) from None

    def writes_started_in(self, world: Any) -> int:
        """How many writes the world has begun (LabError without the hook or for a non-integer)."""
        if self.writes_started is None:
            raise LabError("the lab has no writes_started hook")
        try:
            count = self.writes_started(world)
        except BaseException as error:  # noqa: BLE001
            raise _hook_error("writes_started(world)", error, lambda text: self._masked(world, text)) from None
        if type(count) is bool or not issubclass(type(count), int):
            raise LabError(f"writes_started(world) returned {type_name(count)}, not an integer")
        return int.__int__(count)
