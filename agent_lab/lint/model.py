"""The values the linter deals in: severities, rules, what a check reports, and findings.

A check is a plain function that yields `Hit`s; the engine turns each hit into a `Finding` by adding
the rule id, the configured severity and the hosts it holds for. Checks know nothing of configuration,
output formats or locations.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

__all__ = ["CatalogFacts", "Finding", "Hit", "Rule", "Scope", "Severity"]


class Severity(str, enum.Enum):
    """How much a finding matters. Only `error` fails `lint` and the tool-eval gate."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "note": 2}[self.value]


class Scope(str, enum.Enum):
    """What a rule looks at: one tool at a time, or the catalog as a whole."""

    TOOL = "tool"
    CATALOG = "catalog"


@dataclass(frozen=True)
class Hit:
    """What a check found: a sentence, where in the tool it is (a JSON Pointer into the tool's
    model-facing definition, "" for the tool itself), and for catalog rules which tool it concerns."""

    message: str
    pointer: str = ""
    tool: Optional[str] = None
    surface: Optional[str] = None  # for a finding over several surfaces linted together: the tool's surface
    related: tuple[str, ...] = ()  # other tools the finding concerns (a toxic flow's), as surface/tool or tool


@dataclass(frozen=True)
class CatalogFacts:
    """What tool-level checks may need to know about the rest of the catalog (computed once)."""

    names: frozenset[str]  # every tool name of the catalog
    hosts: tuple[str, ...]  # the hosts selected for this run
    options: Mapping[str, Any]  # budgets and thresholds (see config.DEFAULT_OPTIONS)
    host_names: Mapping[str, str]  # catalog name -> the name OpenAI and Anthropic exports use
    known_identifiers: frozenset[str]  # property names, enum strings and error codes: not tool names
    drift: Any = None  # with a lock: the lint.drift.Drift of this catalog against its locked surface
    surface_of: tuple[Optional[str], ...] = ()  # for surfaces linted together: each spec's surface, in order


ToolCheck = Callable[[Any, CatalogFacts, Optional[str]], Iterable[Hit]]
CatalogCheck = Callable[[Sequence[Any], CatalogFacts, Optional[str]], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    """One row of the rules table (`agent_lab.lint.rules.RULES`).

    `check(subject, facts, host)` gets a ToolSpec (scope tool) or the list of specs (scope catalog);
    a rule with `per_host` runs once per selected host and gets the host's name, otherwise None.
    """

    id: str
    name: str
    what: str
    why: str
    example: str
    severity: Severity
    scope: Scope
    check: Callable[..., Iterable[Hit]]
    per_host: bool = False
    hosts: tuple[str, ...] = ()  # for per-host rules: the hosts it applies to (empty: every host)
    runtime: bool = False  # judges the runtime half: skipped for a bare definition (a server's tool)
    owasp: tuple[str, ...] = ()  # the OWASP MCP Top 10 (MCPnn) and Agentic Top 10 (ASInn) risks it guards
    # Found by tool-eval from what a lab's world recorded during the cases (AL8xx), never by reading a
    # definition: `lint` declares it (SARIF, the rules table) but does not run it; tool-eval reports it.
    observed: bool = False

    def applies_to(self, host: str) -> bool:
        return not self.hosts or host in self.hosts


@dataclass(frozen=True)
class Finding:
    """One problem in one place: the rule, its effective severity, the tool (None for the catalog as
    a whole), a JSON Pointer into the tool's definition, the hosts it holds for, and a sentence."""

    rule: str
    severity: Severity
    message: str
    tool: Optional[str] = None
    pointer: str = ""
    hosts: tuple[str, ...] = ()
    surface: Optional[str] = None
    occurrence: int = 0  # > 0 for a second, third... finding of one rule at one place (say, two phrases)
    related: tuple[str, ...] = ()  # the other tools it concerns (a toxic flow's sources and sinks)

    @property
    def logical_location(self) -> str:
        """`tool/<name><pointer>` for a tool, `catalog` (with the surface) for the catalog as a whole."""
        if self.tool is None:
            return f"catalog/{self.surface}" if self.surface else "catalog"
        return f"tool/{self.tool}{self.pointer}"

    def fingerprint(self) -> str:
        """Stable across runs and wording changes: the rule, the surface, the logical location and the
        hosts; never the message, a line number or a path (those move when unrelated code moves)."""
        parts = (self.rule, self.surface or "", self.logical_location, ",".join(self.hosts), str(self.occurrence))
        # (surrogatepass: a name a server listed may hold a lone surrogate, which the findings report)
        return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "surface": self.surface,
            "tool": self.tool,
            "pointer": self.pointer,
            "hosts": list(self.hosts),
            "message": self.message,
            "related": list(self.related),
            "fingerprint": self.fingerprint(),
        }
