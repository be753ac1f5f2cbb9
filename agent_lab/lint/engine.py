"""The lint engine: run the enabled rules of the table over a catalog, per host where a rule asks.

`lint_catalog` lints a list of ToolSpecs (or ToolDefinitions a server listed); `lint_surfaces` lints one
or more named surfaces (registries, or a server's definitions), optionally against a contract lockfile
and optionally as one agent's tools together (toxic flows across servers), and finds where each tool is
defined, for reports that point at a file and line. Findings that a
per-host rule makes identically for several hosts are merged into one finding naming those hosts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Optional

from ..adapters import NameMap
from ..contract import ToolDefinition
from ..errors import CATALOGUE
from .config import DEFAULT_OPTIONS, LintConfig
from .drift import catalog_drift
from .locate import SourceLocation, locate_tools
from .model import CatalogFacts, Finding, Hit, Rule, Scope, Severity
from .rules import RULES, RULES_BY_ID
from .walk import schema_nodes

__all__ = ["FLOW_RULES", "MALFORMED_RULE", "SPEC_WARNING_RULES", "LintReport", "lint_catalog", "lint_surfaces",
           "spec_warnings"]

FLOW_RULES = ("AL701", "AL702")
"""The toxic-flow rules: over each surface alone, or over several surfaces linted together."""

MALFORMED_RULE = "AL001"

SPEC_WARNING_RULES = ("AL401", "AL402", "AL310")
"""The rules behind `ToolSpec.warnings`: the checks the spec has always made (a write without an
idempotency key, a destructive tool that never asks for approval, an input pattern a backtracking engine
can make slow), now made by the engine. (A pattern with no linear-time guarantee, AL308, is refused when
a spec is built; the rule finds one only in a definition read from a server.)"""


@dataclass(frozen=True)
class LintReport:
    """Everything one lint run found, with what is needed to render it in any format."""

    findings: tuple[Finding, ...]
    config: LintConfig
    surfaces: tuple[str, ...] = ()
    tools: int = 0
    locations: Mapping[tuple[Optional[str], str], SourceLocation] = field(default_factory=dict)
    provenance: Mapping[tuple[Optional[str], str], Mapping[str, Any]] = field(default_factory=dict)
    """(surface, tool): `Provenance.to_dict()` of each tool imported from an MCP server."""

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity is severity)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.severity is Severity.ERROR)

    @property
    def passed(self) -> bool:
        """True when no finding is at error level (what `lint` and the tool-eval gate require)."""
        return not self.errors

    def provenance_of(self, finding: Finding) -> Optional[Mapping[str, Any]]:
        """Where the finding's tool was imported from (server, version, transport, contract hash, ...)."""
        return self.provenance.get((finding.surface, finding.tool)) if finding.tool is not None else None

    def location_of(self, finding: Finding) -> Optional[SourceLocation]:
        """Where the finding's tool is defined; for a catalog finding, where the surface's first tool is."""
        if finding.tool is not None:
            return self.locations.get((finding.surface, finding.tool))
        firsts = [location for (surface, _), location in self.locations.items() if surface == finding.surface]
        return firsts[0] if firsts else None


def _known_identifiers(specs: Sequence[Any]) -> frozenset[str]:
    known: set[str] = set(CATALOGUE)
    for spec in specs:
        for schema in (spec.input_schema, spec.output_schema):
            for pointer, node, via in schema_nodes(schema, "") if schema is not None else ():
                if via == "properties":
                    known.add(pointer.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~"))
                if isinstance(node, Mapping):
                    values: list[Any] = node["enum"] if isinstance(node.get("enum"), list) else []
                    known.update(value for value in values if isinstance(value, str))
                    if isinstance(node.get("const"), str):
                        known.add(node["const"])
    return frozenset(known)


def _host_names(specs: Sequence[Any]) -> Mapping[str, str]:
    try:
        return dict(NameMap.from_specs(specs).items())
    except ValueError:  # two names whose mapped forms collide even with a hash: AL101/AL104 say so
        return {}


def catalog_facts(specs: Sequence[Any], config: LintConfig, *, drift: Any = None,
                  surface_of: Sequence[Optional[str]] = ()) -> CatalogFacts:
    return CatalogFacts(
        names=frozenset(spec.name for spec in specs),
        hosts=config.hosts,
        options=config.options,
        host_names=_host_names(specs),
        known_identifiers=_known_identifiers(specs),
        drift=drift,
        surface_of=tuple(surface_of),
    )


def _has_runtime_half(spec: Any) -> bool:
    """Whether the runtime rules (AL4xx) judge `spec`: a ToolSpec's runtime half is what its author
    wrote. A bare definition (a server's tool, `agent_lab.contract.ToolDefinition`) has none: its runtime
    half comes from the import policy. A tool imported with no policy entry has the strictest defaults
    (`agent_lab.mcp_client.STRICTEST_DEFAULTS`: destructive, approval always and single-use, a permission
    nobody holds by default), which nobody wrote and no rule could strengthen, so they are not judged
    either; once a policy entry names the tool, what the entry says is."""
    if isinstance(spec, ToolDefinition):
        return False
    provenance = getattr(spec, "provenance", None)
    return provenance is None or provenance.policy is not None


def _checked(rule: Rule, subject: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[tuple[str, Hit]]:
    """(rule id, hit) for the rule's hits on one tool. A check that fails on a definition a server sent
    (a shape no ToolSpec can have) is reported as AL001 at that definition instead of stopping the run;
    on a ToolSpec a failing check is a bug and raises."""
    if not isinstance(subject, ToolDefinition):
        for hit in rule.check(subject, facts, host):
            yield rule.id, hit
        return
    try:
        hits = list(rule.check(subject, facts, host))
    except Exception as error:  # noqa: BLE001 - hostile input must never stop the linter
        yield MALFORMED_RULE, Hit(f"malformed definition: {rule.id} could not check it ({type(error).__name__})")
        return
    for hit in hits:
        yield rule.id, hit


def _run(rule: Rule, specs: Sequence[Any], facts: CatalogFacts,
         host: Optional[str]) -> Iterator[tuple[str, Optional[str], Hit]]:
    if rule.scope is Scope.TOOL:
        for spec in specs:
            if rule.runtime and not _has_runtime_half(spec):
                continue
            for rule_id, hit in _checked(rule, spec, facts, host):
                yield rule_id, hit.tool or spec.name, hit
    else:
        subjects = [spec for spec in specs if _has_runtime_half(spec)] if rule.runtime else specs
        if not any(isinstance(spec, ToolDefinition) for spec in subjects):
            for hit in rule.check(subjects, facts, host):
                yield rule.id, hit.tool, hit
            return
        # A server's definitions: one whose schema is no JSON Schema is AL001 already, and is left out of
        # the catalog's figures (exporting it could not work); a check that still fails is AL001 for the
        # catalog, never a crash of the run.
        subjects = [spec for spec in subjects if not _broken_schema(spec)]
        try:
            hits = list(rule.check(subjects, facts, host))
        except Exception as error:  # noqa: BLE001 - hostile input must never stop the linter
            yield MALFORMED_RULE, None, Hit(f"malformed definitions: {rule.id} could not check the catalog "
                                            f"({type(error).__name__})")
            return
        for hit in hits:
            yield rule.id, hit.tool, hit


def _broken_schema(spec: Any) -> bool:
    return isinstance(spec, ToolDefinition) and any(pointer.startswith(("/input_schema", "/output_schema"))
                                                    for pointer, _ in spec.problems)


def _locked_tools(lock: Any, surface: Optional[str], alone: bool) -> Optional[Mapping[str, Any]]:
    """The tools `lock` holds for `surface`: by name; a surface linted alone against a lock of one
    surface is compared with it whatever the names (a registry locked and linted under two labels).
    The rule is the lock's (`Lockfile.surface_of`), which the call-time check of servers follows too."""
    if lock is None:
        return None
    locked = lock.surface_of(surface, alone=alone)
    return lock.surfaces[locked] if locked is not None else {}


def lint_catalog(specs: Sequence[Any], *, config: Optional[LintConfig] = None, surface: Optional[str] = None,
                 lock: Any = None, flows: bool = True) -> list[Finding]:
    """Every finding of the enabled rules over `specs` (ToolSpecs, or ToolDefinitions read from a server),
    in catalog order, then rule id. With `lock` (a `Lockfile`), the AL6xx rules report drift from the
    tools it locked for `surface` (or, linted alone, its only surface). `flows=False` leaves the
    toxic-flow rules to a run over several surfaces together (`lint_surfaces(..., together=True)`)."""
    config = config if config is not None else LintConfig()
    specs = list(specs)
    locked = _locked_tools(lock, surface, alone=True)
    facts = catalog_facts(specs, config, drift=catalog_drift(specs, locked) if locked is not None else None)
    rules = [rule for rule in RULES if flows or rule.id not in FLOW_RULES]
    return _findings(rules, specs, facts, config, surface)


def _findings(rules: Sequence[Rule], specs: Sequence[Any], facts: CatalogFacts, config: LintConfig,
              surface: Optional[str]) -> list[Finding]:
    """The rules' findings, per-host findings merged, in catalog order then rule id, numbered."""
    merged: dict[tuple[str, Optional[str], str, str, Optional[str], tuple[str, ...]], list[str]] = {}
    for rule in rules:
        if not config.enabled(rule) or rule.observed:  # observed rules: tool-eval finds them, not a reading
            continue
        hosts: Sequence[Optional[str]] = [h for h in config.hosts if rule.applies_to(h)] if rule.per_host else [None]
        for host in hosts:
            for rule_id, tool, hit in _run(rule, specs, facts, host):
                key = (rule_id, tool, hit.pointer, hit.message, hit.surface or surface, hit.related)
                hosts_seen = merged.setdefault(key, [])
                if host is not None and host not in hosts_seen:
                    hosts_seen.append(host)
    surface_of = facts.surface_of or (surface,) * len(specs)
    order = {(surface_of[index], spec.name): index for index, spec in enumerate(specs)}
    findings = [
        Finding(rule=rule_id, severity=config.severity_of(RULES_BY_ID[rule_id]), message=message, tool=tool,
                pointer=pointer, hosts=tuple(hosts), surface=where, related=related)
        for (rule_id, tool, pointer, message, where, related), hosts in merged.items()
    ]
    findings.sort(key=lambda f: (-1 if f.tool is None else order.get((f.surface, f.tool), len(order)), f.rule,
                                 f.pointer, f.hosts, f.message))
    return _numbered(findings)


def _numbered(findings: list[Finding]) -> list[Finding]:
    """Give repeated findings of one rule at one place an occurrence number, so fingerprints stay unique."""
    seen: dict[tuple[str, Optional[str], str, tuple[str, ...]], int] = {}
    numbered = []
    for finding in findings:
        key = (finding.rule, finding.surface, finding.logical_location, finding.hosts)
        count = seen.get(key, 0)
        seen[key] = count + 1
        numbered.append(replace(finding, occurrence=count) if count else finding)
    return numbered


def _tools_of(source: Any) -> list[Any]:
    """A surface's tools: a Registry's ToolSpecs, or a sequence of ToolSpecs / ToolDefinitions. A registry
    of a server's tools (`agent_lab.mcp_client.ServerRegistry`) adds, as definitions, the tools its import
    left out (a name MCP forbids, a schema that cannot be compiled, ...): never callable, but a reviewer
    sees what was wrong with them."""
    if hasattr(source, "names") and hasattr(source, "spec"):
        specs: list[Any] = [source.spec(tool) for tool in source.names()]
        skipped = [tool.definition for tool in getattr(source, "skipped", ()) if tool.definition is not None]
        return specs + [ToolDefinition.from_mcp(tool, position=len(specs) + index)
                        for index, tool in enumerate(skipped)]
    return list(source)


def lint_surfaces(surfaces: Sequence[tuple[str, Any]], *, config: Optional[LintConfig] = None,
                  base: Optional[str] = None, lock: Any = None, together: bool = False) -> LintReport:
    """Lint each (surface name, Registry or sequence of ToolSpecs/ToolDefinitions) and find where each
    registered tool is defined (relative to `base`, default the current directory; absolute outside it).

    With `lock` (a `Lockfile`), drift from it is reported (AL6xx). With `together`, the surfaces are
    what one agent uses at once (several servers): the toxic-flow rules run over all of them and name
    each tool's surface; otherwise over each surface alone (a lab's surfaces are alternatives)."""
    config = config if config is not None else LintConfig()
    findings: list[Finding] = []
    locations: dict[tuple[Optional[str], str], SourceLocation] = {}
    provenance: dict[tuple[Optional[str], str], Mapping[str, Any]] = {}
    union: list[Any] = []
    union_surfaces: list[Optional[str]] = []
    for name, source in surfaces:
        specs = _tools_of(source)
        for spec in specs:
            if getattr(spec, "provenance", None) is not None:
                provenance[(name, spec.name)] = spec.provenance.to_dict()
        union.extend(specs)
        union_surfaces.extend([name] * len(specs))
        locked = _locked_tools(lock, name, alone=len(surfaces) == 1)
        facts = catalog_facts(specs, config, drift=catalog_drift(specs, locked) if locked is not None else None)
        rules = [rule for rule in RULES if not together or rule.id not in FLOW_RULES]
        findings.extend(_findings(rules, specs, facts, config, name))
        if hasattr(source, "names") and hasattr(source, "spec"):
            for tool, location in locate_tools(source, base=base).items():
                locations[(name, tool)] = location
            server = getattr(source, "artifact_uri", None)  # a server's registry: left-out tools are there too
            for spec in specs:
                if isinstance(spec, ToolDefinition) and server:
                    locations.setdefault((name, spec.name), SourceLocation(server, 0))
    if together:
        facts = catalog_facts(union, config, surface_of=union_surfaces)
        findings.extend(_findings([rule for rule in RULES if rule.id in FLOW_RULES], union, facts, config, None))
    return LintReport(findings=tuple(findings), config=config, surfaces=tuple(name for name, _ in surfaces),
                      tools=len(union), locations=locations, provenance=provenance)


def spec_warnings(spec: Any) -> tuple[str, ...]:
    """`ToolSpec.warnings`: the messages of the SPEC_WARNING_RULES findings for this one spec."""
    facts = CatalogFacts(names=frozenset({spec.name}), hosts=(), options=DEFAULT_OPTIONS, host_names={},
                         known_identifiers=frozenset())
    return tuple(hit.message for rule_id in SPEC_WARNING_RULES for hit in RULES_BY_ID[rule_id].check(spec, facts, None))
