"""The contract lockfile: what a person reviewed, so that any later change is seen, and refused.

`agent-lab lock` writes one (`Lockfile.from_surfaces(...).write(path)`): for each surface (a lab's
surface, a registry, a server) and each of its tools, the SHA-256 of the tool's whole model-facing
contract and the contract itself (`agent_lab.contract`), so a later run can say *what* changed, not
only *that* it did. `lint --lock FILE` reports drift as findings (AL6xx), and at run time a registry
that imports tools from a server checks each one against the lock before it may be called:

    lock = Lockfile.load("agent-lab.lock.json")        # LockfileError: one line, FILE: what is wrong
    verdict = lock.verdict(tool, surface="time")      # an MCP tool (wire form), a ToolDefinition or a ToolSpec
    if not verdict.matches:                           # DRIFTED (verdict.changes) or UNLOCKED
        error = verdict.refusal()                     # ToolError "tool_contract_changed" for the model

The file is JSON, written deterministically (surfaces in the order given, tools sorted by name,
contract keys in `CONTRACT_KEYS` order) so that a re-lock's diff in review is the drift itself. On
load every entry's hash is checked against its contract: a lock edited by hand into an inconsistent
state is refused, never half-trusted. The refusal the model sees names the tool, the kinds of change
and their JSON Pointers, never the changed text itself (it came from the server and may be an attack).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence

from .atomicfile import write_text
from .contract import ANNOTATION_DEFAULTS, CONTRACT_KEYS, contract_hash, contract_of
from .drift import Change, ChangeKind, compare_contracts, escaped
from .errors import ToolError
from .spec import TOOL_NAME_PATTERN

__all__ = ["LOCKFILE_FORMAT", "MAX_LOCKFILE_BYTES", "LockedTool", "Lockfile", "LockfileError", "Verdict",
           "VerdictStatus", "model_safe_changes"]

LOCKFILE_FORMAT = "agent-lab-lock/1"
MAX_LOCKFILE_BYTES = 32 * 1024 * 1024
"""A larger file is refused before it is parsed (a lock of 1,000 large tools is a few MiB)."""


class LockfileError(ValueError):
    """The lockfile cannot be used: the message is one line, `FILE: what is wrong`."""


@dataclass(frozen=True)
class LockedTool:
    """One reviewed tool: its contract hash and its contract (canonical form)."""

    name: str
    hash: str
    contract: Mapping[str, Any]


class VerdictStatus(str, enum.Enum):
    MATCH = "match"  # the contract is the one locked
    DRIFTED = "drifted"  # the tool is locked, but its contract changed since
    UNLOCKED = "unlocked"  # no tool of that name is in the lock for this surface

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Verdict:
    """What the lock says about one tool as it is now."""

    tool: str
    surface: str
    status: VerdictStatus
    changes: tuple[Change, ...] = ()
    locked_hash: Optional[str] = None
    current_hash: Optional[str] = None

    @property
    def matches(self) -> bool:
        return self.status is VerdictStatus.MATCH

    def diff(self) -> str:
        """For people (a log, a report): one line per change, `POINTER: what changed`; the changed text
        is shown (escaped) since a reviewer needs to read it."""
        if self.status is VerdictStatus.UNLOCKED:
            return f"{escaped(self.tool)}: not in the lock for surface {escaped(self.surface)}"
        return "\n".join(f"{escaped(self.tool)}{change}" for change in self.changes)

    def refusal(self) -> Optional[ToolError]:
        """The catalogue error a call of a drifted or unlocked tool answers (None when it matches):
        code `tool_contract_changed`, next action `stop`. The details name the kinds and places of the
        changes, never the new text (it came from the server)."""
        if self.matches:
            return None
        shown = repr(self.tool) if TOOL_NAME_PATTERN.fullmatch(self.tool) else "this tool"  # a server's name
        if self.status is VerdictStatus.UNLOCKED:
            message = (f"The tool {shown} is not in the reviewed lockfile, so it may not run. Tell the user it "
                       f"must be reviewed and locked (agent-lab lock) before it can be used.")
            details: dict[str, Any] = {"status": self.status.value}
        else:
            places = model_safe_changes(self.changes)
            kinds = sorted({place["kind"] for place in places})
            message = (f"The definition of {shown} changed since it was reviewed ({', '.join(kinds)}), so it "
                       f"will not run until someone reviews the change and locks it again. Do not retry; use "
                       f"another tool or tell the user.")
            details = {"status": self.status.value, "changes": places}
        return ToolError.from_code("tool_contract_changed", message, details=details)


def model_safe_changes(changes: Iterable[Change]) -> list[dict[str, str]]:
    """The changes as a model may see them: `{"where": ..., "kind": ...}`, sorted and each once, where
    `where` is the contract key (and a known hint's name), never a property name or anything else a
    server chose, and `kind` a ChangeKind value."""
    places = sorted({(_coarse(change.pointer), change.kind.value) for change in changes})
    return [{"where": where, "kind": kind} for where, kind in places]


def _coarse(pointer: str) -> str:
    """The part of a change's pointer the model may see: the contract key (and a known hint's name),
    never a property name or anything else a server chose."""
    parts = pointer.split("/")
    if len(parts) > 2 and parts[1] == "annotations" and parts[2] in ANNOTATION_DEFAULTS:
        return "/".join(parts[:3])
    return "/".join(parts[:2]) if len(parts) > 1 and parts[1] in CONTRACT_KEYS else "/"


def _entry(subject: Any) -> LockedTool:
    contract = contract_of(subject)
    return LockedTool(name=str(contract["name"]), hash=contract_hash(contract),
                      contract=MappingProxyType({key: contract[key] for key in CONTRACT_KEYS}))


class Lockfile:
    """Reviewed contracts per surface (see the module docstring). Immutable once built."""

    def __init__(self, surfaces: Mapping[str, Mapping[str, LockedTool]]) -> None:
        self._surfaces = MappingProxyType({name: MappingProxyType(dict(tools)) for name, tools in surfaces.items()})

    # -- building and writing ----------------------------------------------------------------------

    @classmethod
    def from_surfaces(cls, surfaces: Iterable[tuple[str, Iterable[Any]]]) -> Lockfile:
        """A lock of each (surface name, tools): ToolSpecs, ToolDefinitions or MCP tools in wire form.
        ValueError for a surface named twice or a tool named twice in one surface."""
        locked: dict[str, dict[str, LockedTool]] = {}
        for name, tools in surfaces:
            if name in locked:
                raise ValueError(f"surface {name!r} is given twice")
            entries: dict[str, LockedTool] = {}
            for tool in tools:
                entry = _entry(tool)
                if entry.name in entries:
                    raise ValueError(f"surface {name!r} lists the tool {entry.name!r} twice")
                entries[entry.name] = entry
            locked[name] = entries
        return cls(locked)

    @property
    def surfaces(self) -> Mapping[str, Mapping[str, LockedTool]]:
        return self._surfaces

    def dumps(self) -> str:
        document = {
            "format": LOCKFILE_FORMAT,
            "surfaces": {
                surface: {"tools": {name: {"hash": tools[name].hash, "contract": dict(tools[name].contract)}
                                    for name in sorted(tools)}}
                for surface, tools in self._surfaces.items()
            },
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a temporary file beside `path`, then a rename): a reader sees the old lock
        or the new one, never half of one. OSError when it cannot be written."""
        write_text(path, self.dumps())

    # -- reading -----------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Lockfile:
        where = str(path)
        try:
            with open(path, "rb") as stream:
                data = stream.read(MAX_LOCKFILE_BYTES + 1)
        except OSError as error:
            raise LockfileError(f"{where}: cannot read it: {error.strerror or error}") from None
        if len(data) > MAX_LOCKFILE_BYTES:
            raise LockfileError(f"{where}: larger than {MAX_LOCKFILE_BYTES} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LockfileError(f"{where}: not UTF-8 text") from None
        return cls.parse(text, where=where)

    @classmethod
    def parse(cls, text: str, *, where: str = "<lockfile>") -> Lockfile:
        try:
            document = json.loads(text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant)
        except _DuplicateKey as error:
            raise LockfileError(f"{where}: the key {error.key!r} appears twice in one object") from None
        except _NotJSONConstant as error:
            raise LockfileError(f"{where}: {error.args[0]} is not JSON (a number must be finite)") from None
        except (ValueError, RecursionError) as error:
            position = f" (line {error.lineno}, column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
            raise LockfileError(f"{where}: not JSON{position}") from None
        try:  # a "\ud800" escape reads as a lone surrogate, which is no Unicode text (nothing could print it)
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise LockfileError(f"{where}: a string holds a lone surrogate (\\ud800-\\udfff), which is not "
                                "Unicode text") from None
        if not isinstance(document, dict) or document.get("format") != LOCKFILE_FORMAT:
            raise LockfileError(f"{where}: not an agent-lab lockfile (\"format\": \"{LOCKFILE_FORMAT}\" is missing)")
        surfaces = document.get("surfaces")
        if not isinstance(surfaces, dict):
            raise LockfileError(f"{where}: \"surfaces\" must be an object")
        locked: dict[str, dict[str, LockedTool]] = {}
        for surface, body in surfaces.items():
            tools = body.get("tools") if isinstance(body, dict) else None
            if not isinstance(tools, dict):
                raise LockfileError(f"{where}: surface {surface!r}: \"tools\" must be an object")
            locked[surface] = {name: _locked_tool(where, surface, name, entry) for name, entry in tools.items()}
        return cls(locked)

    # -- judging -----------------------------------------------------------------------------------

    def surface_for(self, *names: Optional[str]) -> Optional[str]:
        """The surface a set of tools is checked against: the first of `names` the lock holds; else the
        lock's only surface; else None (no surface of the lock is theirs: every tool is unlocked)."""
        for name in names:
            if name is not None and name in self._surfaces:
                return name
        return next(iter(self._surfaces)) if len(self._surfaces) == 1 else None

    def surface_of(self, label: Optional[str], *, alone: bool) -> Optional[str]:
        """The lock's surface the tools of a surface labelled `label` are compared with, when several
        surfaces (servers one agent uses) are opened or linted together: the surface of that label; else,
        for a surface checked alone, the lock's only surface; else None (every tool unlocked). One rule
        for lint's drift findings and the call-time check of the same servers, so the two agree."""
        if label is not None and label in self._surfaces:
            return label
        return next(iter(self._surfaces)) if alone and len(self._surfaces) == 1 else None

    def narrowed(self, surface: Optional[str]) -> Lockfile:
        """A lock holding only `surface` (nothing for None): for tools that must be checked against
        exactly that surface (`surface_of`), whatever their server calls itself."""
        return Lockfile({surface: self._surfaces[surface]} if surface is not None else {})

    def tools_of(self, surface: Optional[str] = None) -> Optional[Mapping[str, LockedTool]]:
        """The locked tools of `surface` (None: the lock's only surface); None when it is not locked."""
        if surface is None:
            if len(self._surfaces) != 1:
                raise ValueError(f"the lock has {len(self._surfaces)} surfaces "
                                 f"({', '.join(map(repr, self._surfaces))}); say which one (surface=...)")
            return next(iter(self._surfaces.values()))
        return self._surfaces.get(surface)

    def verdict(self, subject: Any, *, surface: Optional[str] = None) -> Verdict:
        """Whether `subject` (an MCP tool in wire form, a ToolDefinition or a ToolSpec) is the contract
        locked for `surface` (None: the lock's only surface). Never raises for what a server sent."""
        contract = contract_of(subject)
        name = str(contract["name"])
        label = surface if surface is not None else next(iter(self._surfaces), "")
        current = contract_hash(contract)
        locked = (self.tools_of(surface) or {}).get(name)
        if locked is None:
            return Verdict(name, label, VerdictStatus.UNLOCKED, current_hash=current)
        if locked.hash == current:
            return Verdict(name, label, VerdictStatus.MATCH, locked_hash=locked.hash, current_hash=current)
        changes = compare_contracts(locked.contract, contract) or (
            Change("", ChangeKind.LOOSENED, "the contract hash changed"),)
        return Verdict(name, label, VerdictStatus.DRIFTED, changes, locked.hash, current)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NotJSONConstant(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJSONConstant(name)


def _refuse_duplicate_keys(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def _locked_tool(where: str, surface: str, name: str, entry: Any) -> LockedTool:
    here = f"{where}: surface {surface!r}, tool {name!r}"
    if not isinstance(entry, dict) or not isinstance(entry.get("hash"), str) or not isinstance(entry.get("contract"), dict):
        raise LockfileError(f"{here}: needs \"hash\" (a string) and \"contract\" (an object)")
    contract = entry["contract"]
    missing = [key for key in CONTRACT_KEYS if key not in contract]
    if missing or set(contract) - set(CONTRACT_KEYS):
        raise LockfileError(f"{here}: the contract must have exactly the keys {', '.join(CONTRACT_KEYS)}")
    if contract["name"] != name:
        raise LockfileError(f"{here}: the contract's name is {contract['name']!r}")
    if contract_hash(contract) != entry["hash"]:
        raise LockfileError(f"{here}: the hash does not match the contract (edited by hand?); lock again")
    return LockedTool(name=name, hash=entry["hash"], contract=MappingProxyType(dict(contract)))
