"""The lint engine: run the enabled rules of the table over a catalog, per host where a rule asks.

`lint_catalog` lints a list of ToolSpecs; `lint_surfaces` lints one or more named surfaces (registries)
and finds where each tool is defined, for reports that point at a file and line. Findings that a
per-host rule makes identically for several hosts are merged into one finding naming those hosts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..adapters import NameMap
from ..errors import CATALOGUE
from .config import DEFAULT_OPTIONS, LintConfig
from .locate import SourceLocation, locate_tools
from .model import CatalogFacts, Finding, Rule, Scope, Severity
from .rules import RULES, RULES_BY_ID
from .walk import schema_nodes

__all__ = ["SPEC_WARNING_RULES", "LintReport", "lint_catalog", "lint_surfaces", "spec_warnings"]

SPEC_WARNING_RULES = ("AL401", "AL402", "AL310")
"""The rules behind `ToolSpec.warnings`: the checks the spec has always made (a write without an
idempotency key, a destructive tool that never asks for approval, an input pattern a backtracking engine
can make slow), now made by the engine. (An output pattern with no linear-time guarantee was AL308; the
spec now refuses one when it is built.)"""


@dataclass(frozen=True)
class LintReport:
    """Everything one lint run found, with what is needed to render it in any format."""

    findings: tuple[Finding, ...]
    config: LintConfig
    surfaces: tuple[str, ...] = ()
    tools: int = 0
    locations: Mapping[tuple[Optional[str], str], SourceLocation] = field(default_factory=dict)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity is severity)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.severity is Severity.ERROR)

    @property
    def passed(self) -> bool:
        """True when no finding is at error level (what `lint` and the tool-eval gate require)."""
        return not self.errors

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


def catalog_facts(specs: Sequence[Any], config: LintConfig) -> CatalogFacts:
    return CatalogFacts(
        names=frozenset(spec.name for spec in specs),
        hosts=config.hosts,
        options=config.options,
        host_names=_host_names(specs),
        known_identifiers=_known_identifiers(specs),
    )


def _run(rule: Rule, specs: Sequence[Any], facts: CatalogFacts,
         host: Optional[str]) -> Iterable[tuple[Optional[str], Any]]:
    if rule.scope is Scope.TOOL:
        for spec in specs:
            for hit in rule.check(spec, facts, host):
                yield hit.tool or spec.name, hit
    else:
        for hit in rule.check(specs, facts, host):
            yield hit.tool, hit


def lint_catalog(specs: Sequence[Any], *, config: Optional[LintConfig] = None,
                 surface: Optional[str] = None) -> list[Finding]:
    """Every finding of the enabled rules over `specs` (ToolSpecs), in catalog order, then rule id."""
    config = config if config is not None else LintConfig()
    specs = list(specs)
    facts = catalog_facts(specs, config)
    merged: dict[tuple[str, Optional[str], str, str], list[str]] = {}
    for rule in RULES:
        if not config.enabled(rule):
            continue
        hosts: Sequence[Optional[str]] = [h for h in config.hosts if rule.applies_to(h)] if rule.per_host else [None]
        for host in hosts:
            for tool, hit in _run(rule, specs, facts, host):
                hosts_seen = merged.setdefault((rule.id, tool, hit.pointer, hit.message), [])
                if host is not None and host not in hosts_seen:
                    hosts_seen.append(host)
    order = {spec.name: index for index, spec in enumerate(specs)}
    findings = [
        Finding(rule=rule_id, severity=config.severity_of(RULES_BY_ID[rule_id]), message=message, tool=tool,
                pointer=pointer, hosts=tuple(hosts), surface=surface)
        for (rule_id, tool, pointer, message), hosts in merged.items()
    ]
    findings.sort(key=lambda f: (-1 if f.tool is None else order.get(f.tool, len(order)), f.rule, f.pointer,
                                 f.hosts, f.message))
    return _numbered(findings)


def _numbered(findings: list[Finding]) -> list[Finding]:
    """Give repeated findings of one rule at one place an occurrence number, so fingerprints stay unique."""
    seen: dict[tuple[str, str, tuple[str, ...]], int] = {}
    numbered = []
    for finding in findings:
        key = (finding.rule, finding.logical_location, finding.hosts)
        count = seen.get(key, 0)
        seen[key] = count + 1
        numbered.append(replace(finding, occurrence=count) if count else finding)
    return numbered


def lint_surfaces(surfaces: Sequence[tuple[str, Any]], *, config: Optional[LintConfig] = None,
                  base: Optional[str] = None) -> LintReport:
    """Lint each (surface name, Registry) and find where each tool is defined (paths relative to `base`,
    default the current directory)."""
    config = config if config is not None else LintConfig()
    findings: list[Finding] = []
    locations: dict[tuple[Optional[str], str], SourceLocation] = {}
    tools = 0
    for name, registry in surfaces:
        specs = [registry.spec(tool) for tool in registry.names()]
        tools += len(specs)
        findings.extend(lint_catalog(specs, config=config, surface=name))
        for tool, location in locate_tools(registry, base=base).items():
            locations[(name, tool)] = location
    return LintReport(findings=tuple(findings), config=config, surfaces=tuple(name for name, _ in surfaces),
                      tools=tools, locations=locations)


def spec_warnings(spec: Any) -> tuple[str, ...]:
    """`ToolSpec.warnings`: the messages of the SPEC_WARNING_RULES findings for this one spec."""
    facts = CatalogFacts(names=frozenset({spec.name}), hosts=(), options=DEFAULT_OPTIONS, host_names={},
                         known_identifiers=frozenset())
    return tuple(hit.message for rule_id in SPEC_WARNING_RULES for hit in RULES_BY_ID[rule_id].check(spec, facts, None))
