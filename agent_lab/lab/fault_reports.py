"""The reports' parts about faults and observed effects (kept here so `reports` stays one file a format).

- `fault_section` (tool-comparison.md): every fault case, the faults it injects, and per surface the
  side effects it left, the duplicates among them and its verdict; then each surface's effect findings.
- `effect_failures` (tool-failures.md): a surface's effect findings, the gate failure of their own kind.
- `effects_sarif` (tool-effects.sarif): the effect findings as SARIF 2.1.0 results of the observed lint
  rules (AL801, AL802), with the same rule table, fingerprints and locations as `agent-lab lint`'s SARIF,
  so code scanning shows a lying tool where it is defined.
"""

from __future__ import annotations

from typing import Any, Callable

from .faults import fault_markers
from .metrics import observed_findings

__all__ = ["effect_failures", "effects_sarif", "fault_section"]


def _findings(evaluation: Any, surface: Any) -> list[Any]:
    catalogs = getattr(evaluation, "catalogs", None) or {}
    catalog = catalogs.get(surface.name)
    if catalog is None:
        from .metrics import SurfaceCatalog

        catalog = SurfaceCatalog(tools=0, catalog_bytes=0, catalog_tokens=0, lint_errors=(), without_output_schema=(),
                                 redact_fields=frozenset())
    return observed_findings(surface.name, evaluation.results[surface.name], catalog)


def fault_section(evaluation: Any, markdown: Callable[[str], str]) -> list[str]:
    """The Markdown lines of the fault cases table and the effect findings (nothing without either)."""
    surfaces = evaluation.surfaces
    rows = []
    for number, case in enumerate(evaluation.cases):
        results = [evaluation.results[surface.name][number] for surface in surfaces]
        if not any(result.run is not None and result.run.faults for result in results):
            continue
        steps = next(case.steps_for(surface.name, surface.role) for surface, result in zip(surfaces, results)
                     if result.run is not None and result.run.faults)
        faults = ", ".join(dict.fromkeys(fault_markers(steps or ())))
        cells = [_fault_cell(result) for result in results]
        rows.append(f"| {case.case_id} | {markdown(faults)} | " + " | ".join(cells) + " |")
    lines: list[str] = []
    if rows:
        lines += ["## Fault cases", "",
                  "Cases that inject a fault for real (a worker killed after the effect, receipt writes or "
                  "reservations refused, a lease lapsing, the wall clock stepping, a call delivered twice or again): "
                  "the side effects each left on each surface, the duplicates among them, and the verdict.", "",
                  "| case | faults | " + " | ".join(surface.name for surface in surfaces) + " |",
                  "| --- | --- |" + " --- |" * len(surfaces), *rows, ""]
    found = [(surface, finding) for surface in surfaces for finding in _findings(evaluation, surface)]
    lines += ["## Declared versus observed effects", ""]
    if not found:
        lines += ["No tool's calls changed the world against what the tool declares (AL801 a read that writes, "
                  "AL802 an idempotent tool that repeats under one key).", ""]
    for surface, finding in found:
        lines.append(f"- `{surface.name}` {finding.rule} ({finding.severity.value}): {markdown(finding.message)}")
    return lines + ([""] if found else [])


def _fault_cell(result: Any) -> str:
    run = result.run
    if run is None:
        return "not run"
    verdict = "pass" if result.passed else "fail"
    return f"{run.side_effects} effect(s), {run.duplicate_side_effects} duplicate(s): {verdict}"


def effect_failures(evaluation: Any, surface: Any, markdown: Callable[[str], str]) -> list[str]:
    """The tool-failures.md lines of one surface's effect findings (nothing without any)."""
    findings = _findings(evaluation, surface)
    if not findings:
        return []
    lines = [f"### Declared versus observed effects: {len(findings)} finding(s)", ""]
    lines += [f"- {finding.rule} {finding.severity.value}, tool `{markdown(finding.tool or '')}`: "
              f"{markdown(finding.message)}" for finding in findings]
    return lines + [""]


def effects_sarif(evaluation: Any) -> str:
    """Every surface's effect findings as one SARIF 2.1.0 log (the lint rule table declared, even when
    there is no finding)."""
    from ..lint import LintConfig, render_sarif
    from ..lint.engine import LintReport
    from .paths import display_path

    findings = []
    locations = {}
    for surface in evaluation.surfaces:
        catalog = (getattr(evaluation, "catalogs", None) or {}).get(surface.name)
        for finding in _findings(evaluation, surface):
            findings.append(finding)
            location = catalog.locations.get(finding.tool) if catalog is not None else None
            if location is not None:  # a report never holds an absolute path (a temporary lab's, say)
                path = location.path if location.path.startswith(("mcp+", "http:", "https:")) \
                    else display_path(location.path)
                locations[(surface.name, finding.tool)] = type(location)(path, location.line)
    # The rules are declared at their default levels; each result carries the level the project's
    # configuration gave its finding.
    report = LintReport(findings=tuple(findings), config=LintConfig(),
                        surfaces=tuple(surface.name for surface in evaluation.surfaces), locations=locations)
    return render_sarif(report)
