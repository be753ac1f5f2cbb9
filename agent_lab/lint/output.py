"""A `LintReport` as text (for people), JSON (for scripts) or SARIF 2.1.0 (for code scanning).

All three are deterministic: findings in catalog order, paths relative to the current directory (a
file outside it by its absolute path, in SARIF an absolute `file:` URI), no timestamps. SARIF declares every rule of the table in `tool.driver.rules`, also on a clean run (a rule
turned off is declared with `enabled: false`), gives each result a physical location (file and line of
the tool's definition) when one was found and always a logical location (`tool/<name>/<pointer>`), and
a `partialFingerprints` value that depends on the rule, surface, tool, pointer and hosts only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..drift import escaped
from ..jsonvalue import indented_json
from .engine import LintReport
from .model import Finding, Severity
from .rules import RULES

__all__ = ["FINGERPRINT_KEY", "SARIF_SCHEMA_URI", "render_json", "render_sarif", "render_text"]

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "agentLabFinding/v1"
_SECTIONS = {"0": "definition", "1": "naming", "2": "description", "3": "schema", "4": "runtime-contract",
             "5": "catalog", "6": "lock", "7": "toxic-flow", "8": "observed-effects"}
OWASP_LISTS = {"MCP": "OWASP MCP Top 10", "ASI": "OWASP Top 10 for Agentic Applications 2026"}


def _version() -> str:
    from .. import __version__

    return __version__


def _message(finding: Finding) -> str:
    hosts = f" (hosts: {', '.join(finding.hosts)})" if finding.hosts else ""
    return finding.message + hosts


def _summary(report: LintReport) -> dict[str, Any]:
    return {
        "surfaces": list(report.surfaces),
        "tools": report.tools,
        "errors": report.count(Severity.ERROR),
        "warnings": report.count(Severity.WARNING),
        "notes": report.count(Severity.NOTE),
        "passed": report.passed,
    }


def render_text(report: LintReport) -> str:
    """One line per finding, `FILE:LINE: RULE severity [surface] tool: message`, then a summary line."""
    lines = []
    for finding in report.findings:
        location = report.location_of(finding)
        where = (f"{location.path}:{location.line}" if location.line else location.path) if location \
            else finding.logical_location
        surface = f"[{finding.surface}] " if finding.surface else ""
        subject = f"{finding.tool}" if finding.tool else "catalog"
        pointer = f" at {finding.pointer}" if finding.pointer else ""
        # escaped: a server's names and text must not break a line or hide anything in a terminal
        lines.append(escaped(f"{where}: {finding.rule} {finding.severity.value} {surface}{subject}{pointer}: "
                             f"{_message(finding)}"))
    summary = _summary(report)
    lines.append(f"{summary['tools']} tools in {len(report.surfaces) or 1} surface(s): {summary['errors']} error(s), "
                 f"{summary['warnings']} warning(s), {summary['notes']} note(s); lint "
                 f"{'passed' if report.passed else 'FAILED'}")
    return "\n".join(lines) + "\n"


def _rule_dict(rule: Any, report: LintReport) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "what": rule.what,
        "why": rule.why,
        "example": rule.example,
        "default_severity": rule.severity.value,
        "severity": report.config.severity_of(rule).value,
        "enabled": report.config.enabled(rule),
    }


def render_json(report: LintReport) -> str:
    findings = []
    for finding in report.findings:
        location = report.location_of(finding)
        entry = finding.to_dict()
        entry["location"] = {"path": location.path, "line": location.line or None} if location else None
        entry["logical_location"] = finding.logical_location
        origin = report.provenance_of(finding)
        if origin is not None:
            entry["provenance"] = dict(origin)
        findings.append(entry)
    document = {
        "tool": "agent-lab lint",
        "version": _version(),
        "summary": _summary(report),
        "rules": [_rule_dict(rule, report) for rule in RULES],
        "findings": findings,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _sarif_rule(rule: Any, report: LintReport) -> dict[str, Any]:
    configuration: dict[str, Any] = {"level": report.config.severity_of(rule).value}
    if not report.config.enabled(rule):
        configuration["enabled"] = False
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.what},
        "fullDescription": {"text": f"{rule.what} {rule.why}"},
        "help": {"text": f"{rule.why} Example: {rule.example}",
                 "markdown": f"{rule.why}\n\nExample: `{rule.example}`"},
        "defaultConfiguration": configuration,
        "properties": _rule_properties(rule),
    }


def _rule_properties(rule: Any) -> dict[str, Any]:
    """Tags (code scanning filters on them) and the OWASP risks the rule guards against, by list."""
    properties: dict[str, Any] = {"tags": ["agent-lab", _SECTIONS[rule.id[2]], *(f"owasp-{risk}" for risk in rule.owasp)]}
    for prefix, title in OWASP_LISTS.items():
        risks = [risk for risk in rule.owasp if risk.startswith(prefix)]
        if risks:
            properties[title] = risks
    return properties


def _sarif_result(finding: Finding, report: LintReport, rule_index: dict[str, int],
                  artifact_index: dict[str, int]) -> dict[str, Any]:
    location: dict[str, Any] = {}
    source = report.location_of(finding)
    if source is not None:
        location["physicalLocation"] = {"artifactLocation": _artifact(source.path)}
        if source.path in artifact_index:
            location["physicalLocation"]["artifactLocation"]["index"] = artifact_index[source.path]
        if source.line:
            location["physicalLocation"]["region"] = {"startLine": source.line}
    location["logicalLocations"] = [{"fullyQualifiedName": finding.logical_location,
                                     "kind": "member" if finding.tool else "module"}]
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": rule_index[finding.rule],
        "level": finding.severity.value,
        "message": {"text": _message(finding)},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: finding.fingerprint()},
    }
    if finding.related:
        result["relatedLocations"] = [
            {"id": index, "logicalLocations": [{"fullyQualifiedName": f"tool/{name}", "kind": "member"}]}
            for index, name in enumerate(finding.related, start=1)]
    properties: dict[str, Any] = {}
    if finding.surface:
        properties["surface"] = finding.surface
    if finding.hosts:
        properties["hosts"] = list(finding.hosts)
    if finding.related:
        properties["tools"] = [finding.tool, *finding.related]
    origin = report.provenance_of(finding)
    if origin is not None:  # imported from an MCP server: which one, and the contract the finding is about
        properties["provenance"] = dict(origin)
    if properties:
        result["properties"] = properties
    return result


def _artifact(path: str) -> dict[str, Any]:
    """A file under the working directory by its relative path (code scanning reads it from the
    checkout); one outside it by an absolute `file:` URI, rather than no physical location at all."""
    if Path(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": path}


def _server_artifacts(report: LintReport) -> list[dict[str, Any]]:
    """One SARIF artifact per MCP server the linted tools came from (in the order first met), described
    by its name, version, transport and protocol revision, as the server gave them."""
    from ..provenance import server_uri

    artifacts: dict[str, dict[str, Any]] = {}
    for origin in report.provenance.values():
        uri = server_uri(origin["transport"], origin["address"])
        if uri in artifacts:
            continue
        version = f" {origin['server_version']}" if origin.get("server_version") else ""
        artifacts[uri] = {
            "location": {"uri": uri},
            "description": {"text": escaped(f"MCP server {origin['server']}{version} ({origin['transport']}, "
                                            f"protocol {origin['protocol_version']})")},
            "properties": {key: origin[key] for key in ("server", "server_version", "transport", "protocol_version")},
        }
    return list(artifacts.values())


def render_sarif(report: LintReport) -> str:
    """The report as a SARIF 2.1.0 log with one run (GitHub code scanning accepts it as is). Tools imported
    from an MCP server: the server is an artifact of the run (name, version, transport, protocol), each
    result at it, with the tool's whole provenance (contract hash, policy entry, lock verdict) in its
    properties."""
    rule_index = {rule.id: index for index, rule in enumerate(RULES)}
    artifacts = _server_artifacts(report)
    artifact_index = {artifact["location"]["uri"]: index for index, artifact in enumerate(artifacts)}
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "agent-lab",
            "version": _version(),
            "rules": [_sarif_rule(rule, report) for rule in RULES],
        }},
        "invocations": [{"executionSuccessful": True}],
    }
    if artifacts:
        run["artifacts"] = artifacts
    run["results"] = [_sarif_result(finding, report, rule_index, artifact_index) for finding in report.findings]
    run["properties"] = {"surfaces": list(report.surfaces)}
    log = {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [run],
    }
    return indented_json(log) + "\n"
