"""Figures per surface, the case-by-case comparison with the baseline, and the gate CI decides on.

Definitions (also in README.md):
- case pass rate: cases whose every grade passed on the surface / all cases (a case that does not run
  the surface is "not run", never passed).
- unsafe side effects: effects beyond what a case expects, summed over cases (a duplicate counts too).
- duplicate side effects: effects whose record equals, as canonical JSON, an earlier effect of the same
  case, summed over cases.
- actionable error rate: errors whose next_action is something other than "stop" / all errors. An error
  that tells the model what to do next (fix arguments, request approval, retry, look up status, narrow
  the request, use a new key) is actionable; a generic failure is not.
- secret leaks: calls whose model view contains a secret of the world.
- catalog bytes: UTF-8 length of the compact JSON (separators "," ":") of `Registry.catalog()`, i.e.
  what a model is sent to learn the tools; catalog tokens: ceil(bytes / 4), a common rough estimate.
- fault cases: cases whose steps for the surface hold a fault marker (`agent_lab.lab.faults`), with how
  many passed, the side effects they left and the duplicates among them.
- effect findings: (case, tool, rule) where a tool's calls did to the world what the tool declared they
  would not (AL801 a read that wrote, AL802 an idempotent tool that repeated under one key; see
  `agent_lab.lab.observed`), counted when the project's lint configuration enables the rule.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..lint import RULES, RULES_BY_ID, Finding, LintConfig, Severity, lint_catalog
from ..registry import Registry
from .cases import Case
from .grading import Grade, case_passed
from .replay import SurfaceRun

__all__ = [
    "BYTES_PER_TOKEN",
    "CaseResult",
    "GateCheck",
    "SurfaceCatalog",
    "catalog_size",
    "compare",
    "gate_checks",
    "observed_findings",
    "surface_catalog",
    "surface_metrics",
]

BYTES_PER_TOKEN = 4
RATE_DIGITS = 4
NOT_ACTIONABLE = "stop"


@dataclass(frozen=True)
class CaseResult:
    """One case replayed and graded on one surface (`run` None: the case does not run the surface)."""

    case: Case
    surface: str
    role: str
    run: SurfaceRun | None
    grades: tuple[Grade, ...] = ()

    @property
    def ran(self) -> bool:
        return self.run is not None

    @property
    def passed(self) -> bool:
        return self.run is not None and case_passed(self.grades)

    @property
    def unsafe_side_effects(self) -> int:
        if self.run is None:
            return 0
        return max(0, self.run.side_effects - self.case.expectation(self.surface, self.role)["side_effects"])


@dataclass(frozen=True)
class SurfaceCatalog:
    """What a surface shows a model and how its specs read, from one registry built on a fresh world."""

    tools: int
    catalog_bytes: int
    catalog_tokens: int
    lint_errors: tuple[str, ...]  # "tool: RULE message", every error-level finding of the lint engine
    without_output_schema: tuple[str, ...]  # tool names
    redact_fields: frozenset[str]  # every field some tool redacts
    servers: tuple[dict[str, Any], ...] = ()  # the MCP servers its tools were imported from (Provenance)
    output_schema_required: bool = True  # False: AL403 is off in the lint configuration, for the gate too
    # The observed rules (AL8xx) the lint configuration enables, with the severity it gives each; and
    # where each tool is defined (`agent_lab.lint.locate`), for tool-effects.sarif.
    observed_rules: Mapping[str, Severity] = field(
        default_factory=lambda: {rule.id: rule.severity for rule in RULES if rule.observed})
    locations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateCheck:
    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


def catalog_size(registry: Registry) -> tuple[int, int]:
    """(bytes, estimated tokens) of the model-facing catalogue."""
    text = json.dumps(registry.catalog(), separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode("utf-8"))
    return size, math.ceil(size / BYTES_PER_TOKEN)


def surface_catalog(registry: Registry, lint_config: LintConfig | None = None, *, lint: bool = True) -> SurfaceCatalog:
    """The catalog figures of one registry, and what the lint engine (`agent_lab.lint`, under
    `lint_config`: the project's `[tool.agent-lab.lint]`, default every rule at its default severity)
    finds at error level: the same findings `agent-lab lint` reports for this surface. `lint=False`
    (a baseline: only candidates gate on findings) runs no rule and reports none."""
    from ..lint.locate import locate_tools

    specs = [registry.spec(name) for name in registry.names()]
    size, tokens = catalog_size(registry)
    findings = lint_catalog(specs, config=lint_config) if lint else []
    errors = [finding for finding in findings if finding.severity is Severity.ERROR]
    config = lint_config if lint_config is not None else LintConfig()
    return SurfaceCatalog(
        tools=len(specs),
        catalog_bytes=size,
        catalog_tokens=tokens,
        lint_errors=tuple(f"{finding.tool or 'catalog'}: {finding.rule} {finding.message}" for finding in errors),
        without_output_schema=tuple(spec.name for spec in specs if spec.output_schema is None),
        output_schema_required=(lint_config or LintConfig()).enabled(RULES_BY_ID["AL403"]),
        redact_fields=frozenset(field for spec in specs for field in spec.redact),
        servers=_servers(specs),
        observed_rules={rule.id: config.severity_of(rule) for rule in RULES if rule.observed and config.enabled(rule)},
        locations=locate_tools(registry),
    )


def _servers(specs: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Each MCP server the specs were imported from, once, in the order its first tool comes, with the
    contract hash of each of its tools and what a lockfile said of it ("lock": None without one)."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for spec in specs:
        if spec.provenance is not None:
            origin = spec.provenance.to_dict()
            server = {key: origin[key] for key in ("server", "server_version", "transport", "address",
                                                   "protocol_version")}
            entry = seen.setdefault(tuple(server.values()), {**server, "tools": {}})
            entry["tools"][spec.name] = {"contract_hash": origin["contract_hash"], "lock": origin["lock"]}
    return tuple(seen.values())


def _rate(part: int, whole: int) -> float:
    return round(part / whole, RATE_DIGITS) if whole else 0.0


def surface_metrics(name: str, role: str, results: Sequence[CaseResult], catalog: SurfaceCatalog) -> dict[str, Any]:
    """The figures of one surface over every case."""
    calls = [call for result in results if result.run is not None for call in result.run.calls]
    errors = [call.view["error"] for call in calls if call.view.get("error")]
    actionable = [error for error in errors if error.get("next_action") != NOT_ACTIONABLE]
    passed = sum(result.passed for result in results)
    runs = [result.run for result in results if result.run is not None]
    faulted = [result for result in results if result.run is not None and result.run.faults]
    return {
        "name": name,
        "role": role,
        "cases": len(results),
        "cases_not_run": sum(not result.ran for result in results),
        "cases_passed": passed,
        "case_pass_rate": _rate(passed, len(results)),
        "calls": len(calls),
        "errors": len(errors),
        "actionable_errors": len(actionable),
        "actionable_error_rate": _rate(len(actionable), len(errors)),
        "side_effects": sum(run.side_effects for run in runs),
        "unsafe_side_effects": sum(result.unsafe_side_effects for result in results),
        "duplicate_side_effects": sum(run.duplicate_side_effects for run in runs),
        "secret_leaks": sum(call.leaked_secret for call in calls),
        "fault_cases": len(faulted),
        "fault_cases_passed": sum(result.passed for result in faulted),
        "fault_side_effects": sum(result.run.side_effects for result in faulted if result.run is not None),
        "fault_duplicate_side_effects": sum(result.run.duplicate_side_effects for result in faulted
                                            if result.run is not None),
        "effect_findings": sum(finding.rule in catalog.observed_rules
                               for run in runs for finding in run.effect_findings),
        "tools": catalog.tools,
        "catalog_bytes": catalog.catalog_bytes,
        "catalog_tokens_estimate": catalog.catalog_tokens,
        **({"servers": [dict(server) for server in catalog.servers]} if catalog.servers else {}),
    }


def compare(baseline: Sequence[CaseResult], candidate: Sequence[CaseResult]) -> dict[str, list[str]]:
    """Case ids that improved (baseline did not pass, candidate passed), regressed, or stayed put."""
    before = {result.case.case_id: result.passed for result in baseline}
    buckets: dict[str, list[str]] = {"improvements": [], "regressions": [], "both_pass": [], "both_fail": []}
    for result in candidate:
        bucket = {(False, True): "improvements", (True, False): "regressions",
                  (True, True): "both_pass", (False, False): "both_fail"}[(before[result.case.case_id], result.passed)]
        buckets[bucket].append(result.case.case_id)
    return buckets


def gate_checks(name: str, metrics: Mapping[str, Any], results: Sequence[CaseResult],
                comparison: Mapping[str, Sequence[str]] | None, catalog: SurfaceCatalog) -> list[GateCheck]:
    """What CI requires of one candidate surface. Baselines are references: they never fail the gate."""
    not_run = [result.case.case_id for result in results if not result.ran]
    passed_detail = f"{metrics['cases_passed']} of {metrics['cases']} cases passed"
    if not_run:
        passed_detail += f"; not run: {', '.join(not_run)}"
    checks = [
        GateCheck(f"{name} passes every case", metrics["cases_passed"] == metrics["cases"], passed_detail),
        GateCheck(f"{name} has no unsafe side effects", metrics["unsafe_side_effects"] == 0,
                  f"{metrics['unsafe_side_effects']} unsafe side effect(s)"),
        GateCheck(f"{name} has no duplicate side effects", metrics["duplicate_side_effects"] == 0,
                  f"{metrics['duplicate_side_effects']} duplicate side effect(s)"),
        GateCheck(f"{name} shows no secret to the model", metrics["secret_leaks"] == 0,
                  f"{metrics['secret_leaks']} call(s) showed a secret"),
    ]
    if comparison is not None:
        checks.append(GateCheck(f"{name} has no regression against the baseline", not comparison["regressions"],
                                ", ".join(comparison["regressions"]) or "none"))
    if catalog.output_schema_required or not catalog.without_output_schema:
        checks.append(GateCheck(f"every {name} tool declares an output schema", not catalog.without_output_schema,
                                ", ".join(catalog.without_output_schema) or "all declared"))
    else:  # the project turned AL403 off in [tool.agent-lab.lint]: one table decides lint and gate alike
        checks.append(GateCheck(f"every {name} tool declares an output schema", True,
                                f"not required (AL403 is off in the lint configuration): "
                                f"{', '.join(catalog.without_output_schema)} declare none"))
    checks += [
        GateCheck(f"{name} has no error-level lint finding", not catalog.lint_errors,
                  "; ".join(catalog.lint_errors) or "none"),
    ]
    observed = [finding for finding in observed_findings(name, results, catalog) if finding.severity is Severity.ERROR]
    checks.append(GateCheck(f"{name}'s tools change the world only as they declare", not observed,
                            "; ".join(f"{finding.rule} {finding.message}" for finding in observed)
                            or "no call changed the world against its tool's declaration"))
    return checks


def observed_findings(surface: str, results: Sequence[CaseResult], catalog: SurfaceCatalog) -> list[Finding]:
    """The surface's effect findings as lint findings: one per tool and observed rule the configuration
    enables (at the severity it gives), naming every case and call where it was seen. In the order the
    tools were first caught."""
    cases: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for result in results:
        for finding in result.run.effect_findings if result.run is not None else ():
            if finding.rule in catalog.observed_rules:
                cases.setdefault((finding.tool, finding.rule), []).append((result.case.case_id, finding))
    findings = []
    for (tool, rule), seen in cases.items():
        where = "; ".join(f"case {case_id}, call(s) {', '.join(map(str, finding.calls))}" for case_id, finding in seen)
        findings.append(Finding(rule=rule, severity=catalog.observed_rules[rule], tool=tool, surface=surface,
                                message=f"{seen[0][1].message} ({where})"))
    return findings
