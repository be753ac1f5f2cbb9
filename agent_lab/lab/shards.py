"""`tool-eval --shard I/N` and `tool-eval --merge DIR...`: one case set run on N machines, one report.

Which cases a shard runs depends on the case ids alone: the ids are put in the order of their SHA-256
and dealt out in turn, so every shard gets the same number of cases (give or take one), neighbouring
ids (`timeout-1`, `timeout-2`, often alike in cost) land on different shards, and neither the machine,
Python's hash seed nor the order of the case files changes the split.

A shard writes its own reports for its cases and `tool-shard.json` beside them: what the merge needs
to rebuild the run (each case's results on each surface, the surfaces' catalogs) and what it checks
before it trusts the parts: the agent-lab version (and a digest of its source), the case set (a digest
of every case and the ids in file order), the lab and its catalogs, and which shard of how many it is.
The file passes through the same masking as every report: no secret a shard's worlds held is in it.
`merge_shards` refuses, with one line, parts that do not make one run; otherwise the reports it
renders from them are those one unsharded run writes, byte for byte (the figures, the gate, each
case's results), because they are rendered by the same code from the same values.

One limit, by construction: a shard masks with the secrets its own worlds held. A lab whose worlds
share a secret that only another shard's cases reveal (`secrets(world)` after a run) would have that
secret masked in the unsharded run but not in a shard where it shows without being revealed there.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..redaction import redact
from .cases import Case
from .grading import Grade
from .jsonl import NotPlainJSON, read_plain_json
from ..lint.locate import SourceLocation
from ..lint.model import Severity
from .metrics import CaseResult, SurfaceCatalog
from .observed import EffectFinding
from .replay import CallRun, SurfaceRun

__all__ = [
    "SHARD_FILE",
    "SHARD_FORMAT",
    "MergedRun",
    "Shard",
    "ShardError",
    "ShardRun",
    "case_set_digest",
    "read_shards",
    "select_cases",
    "shard_assignment",
    "shard_document",
]

SHARD_FILE = "tool-shard.json"
SHARD_FORMAT = "agent-lab-tool-eval-shard/1"
MAX_SHARD_FILE_BYTES = 1024 * 1024 * 1024  # a bound on one read, far beyond a real case set's results
MAX_SHARD_DEPTH = 512  # JSON nesting a shard file may have: real views are far shallower, and rendering
# a deeper value again could exhaust the interpreter's recursion limit (a traceback, not a refusal)


class ShardError(ValueError):
    """Shards that cannot be merged, or a shard option that makes no sense; `str()` is one line."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based, as a CI matrix numbers its jobs)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        for value in (self.index, self.count):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ShardError(f"a shard is I/N with whole numbers, not {value!r}")
        if not 1 <= self.index <= self.count:
            raise ShardError(f"shard {self.index}/{self.count}: I must be between 1 and N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """"2/4" -> Shard(2, 4); ShardError (one line) for anything else."""
        index, slash, count = text.partition("/")
        if not slash or not (index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
            raise ShardError(f"{text!r} is not a shard I/N (e.g. 2/4: the second of four)")
        if len(index) > 9 or len(count) > 9:
            raise ShardError(f"{text!r}: more shards than any CI runs")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class ShardRun:
    """What a shard's evaluation carries besides its cases: which shard it is, and of what case set."""

    shard: Shard
    case_ids: tuple[str, ...]  # every case of the set, in the order of the case files
    case_set: str  # case_set_digest of every case


def shard_assignment(case_ids: Iterable[str], count: int) -> dict[str, int]:
    """Case id -> the shard (1..count) that runs it: ids ordered by their SHA-256, dealt out in turn."""
    ordered = sorted(case_ids, key=lambda case_id: (hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest(),
                                                    case_id))
    return {case_id: position % count + 1 for position, case_id in enumerate(ordered)}


def select_cases(cases: Sequence[Case], shard: Shard) -> tuple[Case, ...]:
    """The cases `shard` runs, in the order of the case files."""
    assignment = shard_assignment((case.case_id for case in cases), shard.count)
    return tuple(case for case in cases if assignment[case.case_id] == shard.index)


def case_set_digest(cases: Sequence[Case]) -> str:
    """A digest of every case as loaded (content, file and line), in order: equal digests, same set."""
    digest = hashlib.sha256()
    for case in cases:
        digest.update(json.dumps(_case_identity(case), sort_keys=True, ensure_ascii=True,
                                 separators=(",", ":")).encode("ascii"))
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()}"


def _case_identity(case: Case) -> dict[str, Any]:
    from .paths import display_path

    return {"case_id": case.case_id, "intent": case.intent, "actor": case.actor, "calls": case.calls,
            "expected": case.expected, "shared_calls": case.shared_calls, "world": case.world,
            "receipts": case.receipts, "tags": case.tags, "source": f"{display_path(case.source_path)}:{case.source_line}"}


def source_digest() -> str:
    """A digest of agent-lab's own source (line endings normalised): two checkouts at different
    commits share a version number, never this."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = sorted(path for pattern in ("*.py", "*.json") for path in package.rglob(pattern)
                   if "__pycache__" not in path.parts)
    for path in files:
        digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return f"sha256:{digest.hexdigest()}"


def agent_lab_identity() -> dict[str, str]:
    from .. import __version__

    return {"version": __version__, "source": source_digest()}


# -- writing -------------------------------------------------------------------------------------


def shard_document(evaluation: Any) -> str:
    """The text of `tool-shard.json` for a shard's evaluation (unmasked: the report writer masks it
    as it masks every report)."""
    from .paths import display_path

    run: ShardRun = evaluation.shard
    document = {
        "format": SHARD_FORMAT,
        "agent_lab": agent_lab_identity(),
        "shard": str(run.shard),
        "case_set": {"digest": run.case_set, "case_ids": list(run.case_ids),
                     "case_files": [display_path(path) for path in evaluation.case_files]},
        "lab": _lab_block(evaluation.lab, evaluation.surfaces, evaluation.catalogs),
        # The steps too: reports read them (the fault markers a case injects on each surface).
        "cases": [{"case_id": case.case_id, "intent": case.intent, "source_path": display_path(case.source_path),
                   "source_line": case.source_line, "expected": case.expected, "calls": case.calls,
                   "shared_calls": list(case.shared_calls)} for case in evaluation.cases],
        "results": {surface.name: [_result_record(result, evaluation.redact_fields)
                                   for result in evaluation.results[surface.name]] for surface in evaluation.surfaces},
    }
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def _lab_block(name: str, surfaces: Sequence[Any], catalogs: Mapping[str, SurfaceCatalog]) -> dict[str, Any]:
    return {"name": name,
            "surfaces": [{"name": surface.name, "baseline": surface.baseline} for surface in surfaces],
            "catalogs": {surface.name: _catalog_record(catalogs[surface.name]) for surface in surfaces}}


def _catalog_record(catalog: SurfaceCatalog) -> dict[str, Any]:
    """Every field of the catalog the reports read (a field left out here would differ after a merge)."""
    return {"tools": catalog.tools, "catalog_bytes": catalog.catalog_bytes, "catalog_tokens": catalog.catalog_tokens,
            "lint_errors": list(catalog.lint_errors), "without_output_schema": list(catalog.without_output_schema),
            "redact_fields": sorted(catalog.redact_fields), "servers": [dict(server) for server in catalog.servers],
            "output_schema_required": catalog.output_schema_required,
            "observed_rules": {rule: severity.value for rule, severity in sorted(catalog.observed_rules.items())},
            "locations": {tool: {"path": place.path, "line": place.line}
                          for tool, place in sorted(catalog.locations.items())}}


def _result_record(result: CaseResult, redact_fields: frozenset[str]) -> dict[str, Any]:
    run = result.run
    if run is None:
        return {"ran": False}
    return {
        "ran": True,
        "grades": [grade.to_dict() for grade in result.grades],
        "side_effects": run.side_effects,
        "duplicate_side_effects": run.duplicate_side_effects,
        "calls": [{"index": call.index, "call_id": call.call_id, "tool": call.tool,
                   "arguments": redact(call.arguments, redact_fields), "approved": call.approved, "view": call.view,
                   "leaked_secret": call.leaked_secret, "faults": list(call.faults)} for call in run.calls],
        "faults": list(run.faults),
        "effect_findings": [finding.to_dict() for finding in run.effect_findings],
    }


# -- reading and merging -------------------------------------------------------------------------


@dataclass(frozen=True)
class MergedRun:
    """Every shard's part put back together, in the order one run has them."""

    lab: str
    surfaces: tuple[tuple[str, bool], ...]  # (name, baseline), in the lab's order
    catalogs: Mapping[str, SurfaceCatalog]
    case_files: tuple[str, ...]
    cases: tuple[Case, ...]
    results: Mapping[str, tuple[CaseResult, ...]]  # surface -> one result per case, in case order


@dataclass(frozen=True)
class _Part:
    directory: str
    shard: Shard
    document: Mapping[str, Any]


def read_shards(directories: Sequence[str]) -> MergedRun:
    """Read `DIR/tool-shard.json` of every directory, check that they are the N shards of one run,
    and put their cases and results back in the order one run has them. ShardError (one line) for a
    directory without a shard file, a file that is not one, and parts that do not make one run."""
    if not directories:
        raise ShardError("tool-eval --merge: name the output directories of the shards")
    parts = [_read_part(directory) for directory in directories]
    first = parts[0]
    for part in parts[1:]:
        _check_same_run(first, part)
    _check_this_agent_lab(first)
    count = first.shard.count
    by_index: dict[int, _Part] = {}
    for part in parts:
        if part.shard.count != count:
            raise ShardError(f"tool-eval --merge: {first.directory} is shard {first.shard} but {part.directory} "
                             f"is shard {part.shard}: the shards split the cases differently")
        if part.shard.index in by_index:
            raise ShardError(f"tool-eval --merge: shard {part.shard} is given twice "
                             f"({by_index[part.shard.index].directory} and {part.directory})")
        by_index[part.shard.index] = part
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in by_index]
    if missing:
        raise ShardError(f"tool-eval --merge: shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"missing (given: {', '.join(str(by_index[index].shard) for index in sorted(by_index))})")
    return _merged([by_index[index] for index in range(1, count + 1)])


def _read_part(directory: str) -> _Part:
    path = Path(directory) / SHARD_FILE
    where = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SHARD_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ShardError(f"tool-eval --merge: {directory}: no {SHARD_FILE} (not the --out of a "
                         "`tool-eval --shard I/N` run)") from None
    except OSError as error:
        raise ShardError(f"tool-eval --merge: {where}: {error.strerror or type(error).__name__}") from None
    if len(data) > MAX_SHARD_FILE_BYTES:
        raise ShardError(f"{where}: larger than {MAX_SHARD_FILE_BYTES} bytes")
    try:
        document = read_plain_json(data.decode("utf-8"), max_depth=MAX_SHARD_DEPTH, kind="shard files")
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError and NotPlainJSON are ValueErrors
        reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error) if isinstance(
            error, NotPlainJSON) else "not UTF-8"
        raise ShardError(f"{where}: not a tool-eval shard file ({reason})") from None
    if not isinstance(document, dict) or document.get("format") != SHARD_FORMAT:
        raise ShardError(f"{where}: not a tool-eval shard file of format {SHARD_FORMAT}")
    if _deeper_than(document, MAX_SHARD_DEPTH):
        raise ShardError(f"{where}: not a tool-eval shard file (nested deeper than {MAX_SHARD_DEPTH} levels)")
    shard = _checked(where, document, "shard", str)
    try:
        parsed = Shard.parse(shard)
    except ShardError as error:
        raise ShardError(f"{where}: {error}") from None
    return _Part(directory, parsed, document)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels (walked without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def _check_same_run(first: _Part, other: _Part) -> None:
    """The same agent-lab, the same case set and the same lab and catalogs, or ShardError."""
    pair = f"{first.directory} and {other.directory}"
    if first.document.get("agent_lab") != other.document.get("agent_lab"):
        raise ShardError(f"tool-eval --merge: {pair} were written by different agent-lab versions "
                         f"({_version(first)} and {_version(other)}): run every shard with one agent-lab")
    if first.document.get("case_set") != other.document.get("case_set"):
        raise ShardError(f"tool-eval --merge: {pair} ran different case sets "
                         f"({_case_set(first)} and {_case_set(other)}): run every shard on the same case files")
    if first.document.get("lab") != other.document.get("lab"):
        raise ShardError(f"tool-eval --merge: {pair} ran different labs or surface catalogs "
                         f"({_lab_difference(first.document.get('lab'), other.document.get('lab'))})")


def _check_this_agent_lab(part: _Part) -> None:
    """The shards ran on the agent-lab that merges them, or ShardError: the reports are rendered from
    their values by this one's code, and only the same code makes them those one unsharded run writes
    (another version may read a field otherwise, or render it otherwise)."""
    identity = agent_lab_identity()
    if part.document.get("agent_lab") != identity:
        raise ShardError(f"tool-eval --merge: {part.directory} was written by agent-lab {_version(part)}, and this is "
                         f"agent-lab {identity['version']} {identity['source'][:19]}: merge with the agent-lab the "
                         "shards ran")


def _version(part: _Part) -> str:
    identity = part.document.get("agent_lab")
    if not isinstance(identity, dict):
        return "unknown"
    return f"{identity.get('version')} {str(identity.get('source'))[:19]}"


def _case_set(part: _Part) -> str:
    case_set = part.document.get("case_set")
    if not isinstance(case_set, dict) or not isinstance(case_set.get("case_ids"), list):
        return "unknown"
    return f"{len(case_set['case_ids'])} cases {str(case_set.get('digest'))[:19]}"


def _lab_difference(first: Any, other: Any) -> str:
    if not isinstance(first, dict) or not isinstance(other, dict):
        return "one has no lab block"
    if first.get("name") != other.get("name"):
        return f"lab {first.get('name')!r} and lab {other.get('name')!r}"
    if first.get("surfaces") != other.get("surfaces"):
        return "their surfaces differ"
    catalogs, others = first.get("catalogs"), other.get("catalogs")
    if isinstance(catalogs, dict) and isinstance(others, dict):
        differing = sorted(name for name in set(catalogs) | set(others) if catalogs.get(name) != others.get(name))
        if differing:
            return f"the catalog of {', '.join(map(str, differing))} differs"
    return "their catalogs differ"


def _merged(parts: Sequence[_Part]) -> MergedRun:
    first = parts[0]
    where = str(Path(first.directory) / SHARD_FILE)
    case_set = _checked(where, first.document, "case_set", dict)
    case_ids = [_checked_text(where, value) for value in _checked(where, case_set, "case_ids", list)]
    case_files = tuple(_checked_text(where, value) for value in _checked(where, case_set, "case_files", list))
    lab = _checked(where, first.document, "lab", dict)
    surfaces = tuple((_checked(where, surface, "name", str), _checked(where, surface, "baseline", bool))
                     for surface in _checked_list_of(where, lab, "surfaces", dict))
    names = [name for name, _ in surfaces]
    if not names or len(set(names)) != len(names):
        raise ShardError(f"{where}: not a tool-eval shard file (its surfaces are not a list of distinct names)")
    catalogs_block = _checked(where, lab, "catalogs", dict)
    catalogs = {name: _catalog(where, _checked(where, catalogs_block, name, dict)) for name in names}
    if len(set(case_ids)) != len(case_ids):
        raise ShardError(f"{where}: not a tool-eval shard file (a case id is listed twice)")
    assignment = shard_assignment(case_ids, first.shard.count)
    cases: dict[str, Case] = {}
    results: dict[str, dict[str, CaseResult]] = {name: {} for name in names}
    for part in parts:
        part_where = str(Path(part.directory) / SHARD_FILE)
        part_cases = [_case(part_where, record) for record in _checked_list_of(part_where, part.document, "cases", dict)]
        expected_ids = [case_id for case_id in case_ids if assignment[case_id] == part.shard.index]
        if [case.case_id for case in part_cases] != expected_ids:
            raise ShardError(f"tool-eval --merge: {part.directory}: its cases are not those shard {part.shard} "
                             "runs of this case set")
        part_results = _checked(part_where, part.document, "results", dict)
        if sorted(part_results) != sorted(names):
            raise ShardError(f"{part_where}: not a tool-eval shard file (results for other surfaces than its lab's)")
        for name, baseline in surfaces:
            records = _checked_list_of(part_where, part_results, name, dict)
            if len(records) != len(part_cases):
                raise ShardError(f"{part_where}: not a tool-eval shard file (not one result per case on {name})")
            role = "baseline" if baseline else "candidate"
            for case, record in zip(part_cases, records):
                results[name][case.case_id] = _result(part_where, case, name, role, record)
        cases.update((case.case_id, case) for case in part_cases)
    ordered = tuple(cases[case_id] for case_id in case_ids)
    return MergedRun(
        lab=_checked(where, lab, "name", str),
        surfaces=surfaces,
        catalogs=catalogs,
        case_files=case_files,
        cases=ordered,
        results={name: tuple(results[name][case_id] for case_id in case_ids) for name in names},
    )


def _checked(where: str, mapping: Any, key: str, kind: type) -> Any:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ShardError(f"{where}: not a tool-eval shard file ({key!r} is missing or not a {kind.__name__})")
    return value


def _checked_text(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ShardError(f"{where}: not a tool-eval shard file (a case id or file is not a string)")
    return value


def _checked_list_of(where: str, mapping: Any, key: str, kind: type) -> list[Any]:
    values = _checked(where, mapping, key, list)
    if not all(isinstance(value, kind) for value in values):
        raise ShardError(f"{where}: not a tool-eval shard file ({key!r} holds something other than {kind.__name__}s)")
    return values


def _catalog(where: str, record: Mapping[str, Any]) -> SurfaceCatalog:
    return SurfaceCatalog(
        tools=_checked(where, record, "tools", int),
        catalog_bytes=_checked(where, record, "catalog_bytes", int),
        catalog_tokens=_checked(where, record, "catalog_tokens", int),
        lint_errors=tuple(_checked_list_of(where, record, "lint_errors", str)),
        without_output_schema=tuple(_checked_list_of(where, record, "without_output_schema", str)),
        redact_fields=frozenset(_checked_list_of(where, record, "redact_fields", str)),
        servers=tuple(_checked_list_of(where, record, "servers", dict)),
        output_schema_required=_checked(where, record, "output_schema_required", bool),
        observed_rules={rule: _severity(where, value)
                        for rule, value in _checked(where, record, "observed_rules", dict).items()},
        locations={tool: SourceLocation(_checked(where, place, "path", str), _checked(where, place, "line", int))
                   for tool, place in _checked(where, record, "locations", dict).items()},
    )


def _severity(where: str, value: Any) -> Severity:
    try:
        return Severity(value)
    except ValueError:
        raise ShardError(f"{where}: not a tool-eval shard file (a severity that is not one)") from None


def _case(where: str, record: Mapping[str, Any]) -> Case:
    """The case as the reports and figures read it: id, intent, where it is and what it expects."""
    calls = _checked(where, record, "calls", dict)
    steps = {name: tuple(_steps(where, steps)) for name, steps in calls.items()}
    return Case(case_id=_checked(where, record, "case_id", str), intent=_checked(where, record, "intent", str),
                actor={}, calls=steps, expected=_checked(where, record, "expected", dict),
                shared_calls=tuple(_checked_list_of(where, record, "shared_calls", dict)),
                source_path=_checked(where, record, "source_path", str),
                source_line=_checked(where, record, "source_line", int))


def _steps(where: str, steps: Any) -> list[Any]:
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise ShardError(f"{where}: not a tool-eval shard file (a case's steps are not a list of objects)")
    return steps


def _result(where: str, case: Case, surface: str, role: str, record: Mapping[str, Any]) -> CaseResult:
    if not _checked(where, record, "ran", bool):
        return CaseResult(case=case, surface=surface, role=role, run=None)
    grades = tuple(Grade(name=_checked(where, grade, "name", str), expected=grade.get("expected"),
                         actual=grade.get("actual"), passed=_checked(where, grade, "passed", bool))
                   for grade in _checked_list_of(where, record, "grades", dict))
    calls = tuple(CallRun(index=_checked(where, call, "index", int), call_id=_checked(where, call, "call_id", str),
                          tool=_checked(where, call, "tool", str), arguments=call.get("arguments"),
                          approved=_checked(where, call, "approved", bool), view=_checked(where, call, "view", dict),
                          leaked_secret=_checked(where, call, "leaked_secret", bool),
                          faults=tuple(_checked_list_of(where, call, "faults", str)))
                  for call in _checked_list_of(where, record, "calls", dict))
    findings = tuple(EffectFinding(rule=_checked(where, item, "rule", str), tool=_checked(where, item, "tool", str),
                                   message=_checked(where, item, "message", str),
                                   calls=tuple(_checked_list_of(where, item, "calls", int)))
                     for item in _checked_list_of(where, record, "effect_findings", dict))
    try:
        expected_effects = case.expectation(surface, role).get("side_effects")
    except (TypeError, ValueError):  # a surface's block that is not an object
        expected_effects = None
    if isinstance(expected_effects, bool) or not isinstance(expected_effects, int):
        raise ShardError(f"{where}: not a tool-eval shard file (case {case.case_id!r} expects no side effect count)")
    run = SurfaceRun(case_id=case.case_id, surface=surface, role=role, calls=calls,
                     side_effects=_checked(where, record, "side_effects", int),
                     duplicate_side_effects=_checked(where, record, "duplicate_side_effects", int),
                     faults=tuple(_checked_list_of(where, record, "faults", str)), effect_findings=findings)
    return CaseResult(case=case, surface=surface, role=role, run=run, grades=grades)
