"""Lint configuration: which rules run, at which severity, for which hosts, with which budgets.

Given as a plain mapping (the `[tool.agent-lab.lint]` table of pyproject.toml, read by the labs
settings reader `agent_lab.lab.settings.lint_config`, or built in code); every key is checked, and
anything unknown or ill-typed is a `LintConfigError` naming the key, so a typo never silently turns
a rule off:

    [tool.agent-lab.lint]
    select = ["AL"]                    # rule ids or prefixes to run (default: all)
    ignore = ["AL102", "AL2"]          # ids or prefixes to skip
    hosts = ["openai", "anthropic"]    # hosts the per-host rules check (default: all four)
    severity = { AL204 = "warning", AL309 = "error", AL501 = "off" }
    max-tools = { openai = 15 }        # per-host tool budget (AL501), or one number for every host
    max-catalog-tokens = 8000          # AL504

`agent-lab lint` and the tool-eval gate read the same table, so one configuration decides both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Optional

from ..adapters import EXPORT_FORMATS
from .model import Rule, Severity
from .rules import RETIRED_RULES, RULES

__all__ = ["DEFAULT_OPTIONS", "TABLE_KINDS", "LintConfig", "LintConfigError"]

DEFAULT_OPTIONS: Mapping[str, Any] = MappingProxyType({
    "min_description_chars": 40,
    "min_description_words": 6,
    "max_description_chars": 1024,
    "max_schema_depth": 5,
    "near_duplicate_similarity": 0.85,
    "max_tools": MappingProxyType({"openai": 20, "openai-chat": 20, "anthropic": 30, "mcp": 40}),
    "tool_limits": MappingProxyType({"openai": 128, "openai-chat": 128}),
    "max_catalog_tokens": 10_000,
    "labels": (),  # ((tool-name glob, ("private-data", "-external-sink", ...)), ...): see lint.flows
})
"""Budgets and thresholds. Tool budgets: OpenAI's function-calling guide suggests fewer than 20
functions; Anthropic reports selection degrading past 30-50 tools; MCP sets none, 40 is our choice.
The hard limit of 128 tools per request is OpenAI's."""

_OFF = "off"
_OPTION_KEYS = {
    "min-description-chars": "min_description_chars",
    "min-description-words": "min_description_words",
    "max-description-chars": "max_description_chars",
    "max-schema-depth": "max_schema_depth",
    "max-catalog-tokens": "max_catalog_tokens",
}


TABLE_KINDS: Mapping[str, str] = MappingProxyType({
    "select": "strings",
    "ignore": "strings",
    "hosts": "strings",
    "severity": "string-table",
    "labels": "string-table",
    "max-tools": "integer-or-table",
    **{key: "integer" for key in _OPTION_KEYS},
})
"""The keys of `[tool.agent-lab.lint]` and what each holds, as `agent_lab.lab.pyproject.TableKind` values:
what Python 3.10's small TOML reader accepts there (every other key or kind is refused with FILE:LINE)."""


class LintConfigError(ValueError):
    """The lint configuration (or a --select/--ignore value) is not usable; the message says which key."""


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = ("AL",)
    ignore: tuple[str, ...] = ()
    hosts: tuple[str, ...] = EXPORT_FORMATS
    severity: Mapping[str, str] = field(default_factory=dict)  # rule id -> error|warning|note|off
    options: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_OPTIONS)

    def __post_init__(self) -> None:
        for key, patterns in (("select", self.select), ("ignore", self.ignore)):
            for pattern in patterns:
                _check_selector(pattern, key)
        for host in self.hosts:
            if host not in EXPORT_FORMATS:
                raise LintConfigError(f"hosts: unknown host {host!r}; choose from {', '.join(EXPORT_FORMATS)}")
        for rule_id, level in self.severity.items():
            if rule_id in RETIRED_RULES:
                raise LintConfigError(f"severity: {rule_id} is retired ({RETIRED_RULES[rule_id]})")
            if rule_id not in {rule.id for rule in RULES}:
                raise LintConfigError(f"severity: no rule {rule_id!r}")
            if level not in (_OFF, *(member.value for member in Severity)):
                raise LintConfigError(f"severity.{rule_id}: {level!r} is not one of error, warning, note, off")

    # -- reading -------------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, where: str = "[tool.agent-lab.lint]") -> LintConfig:
        """A config from a `[tool.agent-lab.lint]`-shaped mapping (kebab-case keys, as in TOML)."""
        if not isinstance(table, Mapping):
            raise LintConfigError(f"{where} must be a table")
        known = set(TABLE_KINDS)
        unknown = sorted(set(table) - known)
        if unknown:
            raise LintConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        try:
            options = dict(DEFAULT_OPTIONS)
            for key, option in _OPTION_KEYS.items():
                if key in table:
                    options[option] = _positive_int(table[key], f"{where} {key}")
            if "max-tools" in table:
                options["max_tools"] = _tool_budgets(table["max-tools"], f"{where} max-tools")
            if "labels" in table:
                options["labels"] = flow_labels(table["labels"], f"{where} labels")
            severity = table.get("severity", {})
            if not isinstance(severity, Mapping) or not all(isinstance(v, str) for v in severity.values()):
                raise LintConfigError(f"{where} severity must be a table of rule id = \"error\"|\"warning\"|"
                                      f"\"note\"|\"off\"")
            return cls(
                select=_strings(table.get("select", ["AL"]), f"{where} select"),
                ignore=_strings(table.get("ignore", []), f"{where} ignore"),
                hosts=_strings(table.get("hosts", list(EXPORT_FORMATS)), f"{where} hosts"),
                severity=dict(severity),
                options=MappingProxyType(options),
            )
        except LintConfigError as error:
            message = str(error)
            raise LintConfigError(message if message.startswith(where) else f"{where} {message}") from None

    def with_overrides(self, *, select: Optional[Iterable[str]] = None, ignore: Optional[Iterable[str]] = None,
                       hosts: Optional[Iterable[str]] = None) -> LintConfig:
        """Command-line flags beat the table: each given value replaces the table's (LintConfigError
        naming the flag for a value that selects no rule)."""
        changes: dict[str, Any] = {}
        if select is not None:
            changes["select"] = tuple(select)
        if ignore is not None:
            changes["ignore"] = tuple(ignore)
        if hosts is not None:
            changes["hosts"] = tuple(hosts)
        try:
            return replace(self, **changes)
        except LintConfigError as error:
            raise LintConfigError(f"--{error}") from None

    # -- deciding ------------------------------------------------------------------------------

    def enabled(self, rule: Rule) -> bool:
        if self.severity.get(rule.id) == _OFF:
            return False
        return _matches(rule.id, self.select) and not _matches(rule.id, self.ignore)

    def severity_of(self, rule: Rule) -> Severity:
        level = self.severity.get(rule.id)
        return Severity(level) if level and level != _OFF else rule.severity


def _matches(rule_id: str, patterns: Iterable[str]) -> bool:
    return any(rule_id.startswith(pattern) for pattern in patterns)


def _check_selector(pattern: Any, key: str) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise LintConfigError(f"{key}: {pattern!r} is not a rule id or prefix")
    if pattern in RETIRED_RULES:
        raise LintConfigError(f"{key}: {pattern} is retired ({RETIRED_RULES[pattern]})")
    if not any(rule.id.startswith(pattern) for rule in RULES):
        raise LintConfigError(f"{key}: {pattern!r} matches no rule (rules are {RULES[0].id}..{RULES[-1].id})")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise LintConfigError(f"{where} must be a list of strings")
    return tuple(value)


def flow_labels(value: Any, where: str = "labels") -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The `labels` table: tool-name glob = "label label -label" (FLOW_LABELS; a leading - removes one)."""
    from .flows import FLOW_LABELS

    if not isinstance(value, Mapping):
        raise LintConfigError(f"{where} must be a table of tool-name glob = \"label ...\"")
    table = []
    for pattern, given in value.items():
        if not isinstance(given, str):
            raise LintConfigError(f"{where}.{pattern} must be a string of labels")
        labels = tuple(given.replace(",", " ").split())
        for label in labels:
            if label.lstrip("+-") not in FLOW_LABELS:
                raise LintConfigError(f"{where}.{pattern}: unknown label {label!r} (labels: {', '.join(FLOW_LABELS)}; "
                                      f"a leading - removes one)")
        table.append((str(pattern), labels))
    return tuple(table)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LintConfigError(f"{where} must be a positive integer")
    return value


def _tool_budgets(value: Any, where: str) -> Mapping[str, int]:
    budgets = dict(DEFAULT_OPTIONS["max_tools"])
    if isinstance(value, Mapping):
        for host, budget in value.items():
            if host not in EXPORT_FORMATS:
                raise LintConfigError(f"{where}: unknown host {host!r}")
            budgets[host] = _positive_int(budget, f"{where}.{host}")
    else:
        number = _positive_int(value, where)
        budgets = {host: number for host in EXPORT_FORMATS}
    return MappingProxyType(budgets)
