"""Tool-surface lint: one offline linter over both halves of every tool's contract.

`lint_catalog(specs)` and `lint_surfaces([(name, registry), ...])` run the rules of one table
(`RULES`: AL1xx naming, AL2xx descriptions, AL3xx schemas, AL4xx runtime contract, AL5xx catalog)
under a `LintConfig`, and `render_text`, `render_json` and `render_sarif` turn a `LintReport` into
text, JSON or SARIF 2.1.0. `agent-lab lint` is the command line; the tool-eval gate uses the same
engine and fails on any error-level finding.
"""

from __future__ import annotations

from .config import DEFAULT_OPTIONS, LintConfig, LintConfigError
from .engine import LintReport, lint_catalog, lint_surfaces, spec_warnings
from .model import Finding, Rule, Scope, Severity
from .output import render_json, render_sarif, render_text
from .rules import RETIRED_RULES, RULES, RULES_BY_ID, rules_markdown

__all__ = [
    "DEFAULT_OPTIONS",
    "RETIRED_RULES",
    "RULES",
    "RULES_BY_ID",
    "Finding",
    "LintConfig",
    "LintConfigError",
    "LintReport",
    "Rule",
    "Scope",
    "Severity",
    "lint_catalog",
    "lint_surfaces",
    "render_json",
    "render_sarif",
    "render_text",
    "rules_markdown",
    "spec_warnings",
]
