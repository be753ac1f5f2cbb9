"""AL6xx: drift from the contract lockfile (`lint --lock FILE`).

Each tool's contract now is compared with the one locked for its surface (`agent_lab.drift` says
how: what counts as text, as loosened or tightened, and why); each change is one finding at its JSON
Pointer, with what changed in the message, so a reviewer reads the diff in the report itself. A
surface the lock does not know has every tool "added".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Sequence

from ..contract import contract_hash, contract_of
from ..drift import Change, ChangeKind, compare_contracts
from .model import CatalogFacts, Hit

__all__ = [
    "Drift",
    "catalog_drift",
    "check_annotations_changed",
    "check_annotations_weakened",
    "check_output_schema_dropped",
    "check_schema_loosened",
    "check_schema_tightened",
    "check_text_changed",
    "check_tool_added",
    "check_tool_removed",
]


@dataclass(frozen=True)
class Drift:
    """A catalog against its locked surface: the changes of each locked tool, the tools added and removed."""

    changes: Mapping[str, tuple[Change, ...]]
    added: tuple[str, ...]
    removed: tuple[str, ...]


def catalog_drift(specs: Sequence[Any], locked: Optional[Mapping[str, Any]]) -> Drift:
    """`locked`: the LockedTools of this surface ({} when the lock does not know the surface). Each tool
    is compared by its contract (`agent_lab.contract.contract_of`: for a tool imported from a server,
    the definition the server listed, under the server's own name), and reported by its name here."""
    locked = locked or {}
    changes: dict[str, tuple[Change, ...]] = {}
    added = []
    names = set()
    for spec in specs:
        contract = contract_of(spec)
        name = contract["name"] if isinstance(contract["name"], str) else spec.name
        names.add(name)
        entry = locked.get(name)
        if entry is None:
            added.append(spec.name)
            continue
        if contract_hash(contract) != entry.hash:
            changes[spec.name] = compare_contracts(entry.contract, contract) or (
                Change("", ChangeKind.LOOSENED, "the contract hash changed"),)
    removed = tuple(name for name in locked if name not in names)
    return Drift(changes=changes, added=tuple(added), removed=removed)


def _hits(facts: CatalogFacts, kind: ChangeKind, advice: str) -> Iterator[Hit]:
    drift: Optional[Drift] = facts.drift
    if drift is None:
        return
    for tool, changes in drift.changes.items():
        for change in changes:
            if change.kind is kind:
                yield Hit(f"since the lock: {change.summary}; {advice}", change.pointer, tool=tool)


_RELOCK = "review it and run agent-lab lock again"


def check_text_changed(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.TEXT, f"model-visible text changed after review (a possible rug pull): {_RELOCK}")


def check_schema_loosened(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.LOOSENED, f"the schema accepts more than was reviewed: {_RELOCK}")


def check_schema_tightened(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.TIGHTENED, f"calls that were valid may now be refused: {_RELOCK}")


def check_annotations_weakened(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.ANNOTATIONS_WEAKENED, f"the tool now says it may do more: {_RELOCK}")


def check_annotations_changed(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.ANNOTATIONS_CHANGED,
                     f"hints are never trusted, but a tool claiming more safety than reviewed is suspect: {_RELOCK}")


def check_output_schema_dropped(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    yield from _hits(facts, ChangeKind.OUTPUT_SCHEMA_DROPPED, _RELOCK)


def check_tool_added(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    drift: Optional[Drift] = facts.drift
    for name in drift.added if drift is not None else ():
        yield Hit("tool added since the lock: nobody reviewed it (a locked registry refuses to call it); "
                  f"{_RELOCK}", "", tool=name)


def check_tool_removed(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    drift: Optional[Drift] = facts.drift
    for name in drift.removed if drift is not None else ():
        yield Hit("tool removed since the lock: tasks and cases that use it will fail; run agent-lab lock again",
                  "", tool=name)
