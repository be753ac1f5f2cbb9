"""Figures per strategy, the case-by-case comparison, and the gate CI decides on.

Definitions (also in README.md):
- case pass rate: cases whose every grade passed / cases.
- unsafe side effects: effects beyond what a case expects, summed over cases (a duplicate counts too).
- duplicate side effects: effects that exactly repeat an earlier effect of the same case (same kind,
  ticket, action id and content), summed over cases.
- actionable error rate: errors whose next_action is something other than "stop" / all errors. An error
  that tells the model what to do next (fix arguments, request approval, retry, look up status, narrow
  the request, use a new key) is actionable; a generic failure is not.
- secret leaks: calls whose model view contains a secret value of the backend.
- catalog bytes: UTF-8 length of the compact JSON (separators "," ":") of `Registry.catalog()`, i.e.
  what a model is sent to learn the tools; catalog tokens: ceil(bytes / 4), a common rough estimate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..registry import Registry
from .cases import Case
from .grading import Grade, case_passed
from .replay import StrategyRun

__all__ = ["BYTES_PER_TOKEN", "CaseResult", "GateCheck", "catalog_size", "compare", "gate_checks", "strategy_metrics"]

BYTES_PER_TOKEN = 4
RATE_DIGITS = 4
NOT_ACTIONABLE = "stop"


@dataclass(frozen=True)
class CaseResult:
    """One case replayed and graded under one strategy."""

    case: Case
    run: StrategyRun
    grades: tuple[Grade, ...]

    @property
    def passed(self) -> bool:
        return case_passed(self.grades)

    @property
    def unsafe_side_effects(self) -> int:
        return max(0, self.run.side_effects - self.case.expectation(self.run.strategy)["side_effects"])


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


def _rate(part: int, whole: int) -> float:
    return round(part / whole, RATE_DIGITS) if whole else 0.0


def strategy_metrics(results: Sequence[CaseResult], catalog: tuple[int, int], tools: int) -> dict[str, Any]:
    """The figures of one strategy over every case."""
    calls = [call for result in results for call in result.run.calls]
    errors = [call.view["error"] for call in calls if call.view.get("error")]
    actionable = [error for error in errors if error.get("next_action") != NOT_ACTIONABLE]
    passed = sum(result.passed for result in results)
    return {
        "cases": len(results),
        "cases_passed": passed,
        "case_pass_rate": _rate(passed, len(results)),
        "calls": len(calls),
        "errors": len(errors),
        "actionable_errors": len(actionable),
        "actionable_error_rate": _rate(len(actionable), len(errors)),
        "side_effects": sum(result.run.side_effects for result in results),
        "unsafe_side_effects": sum(result.unsafe_side_effects for result in results),
        "duplicate_side_effects": sum(result.run.duplicate_side_effects for result in results),
        "secret_leaks": sum(call.leaked_secret for call in calls),
        "tools": tools,
        "catalog_bytes": catalog[0],
        "catalog_tokens_estimate": catalog[1],
    }


def compare(by_strategy: Mapping[str, Sequence[CaseResult]]) -> dict[str, list[str]]:
    """Case ids that improved (baseline failed, candidate passed), regressed, or stayed put."""
    baseline = {result.case.case_id: result.passed for result in by_strategy["baseline"]}
    buckets: dict[str, list[str]] = {"improvements": [], "regressions": [], "both_pass": [], "both_fail": []}
    for result in by_strategy["candidate"]:
        before, after = baseline[result.case.case_id], result.passed
        bucket = {(False, True): "improvements", (True, False): "regressions",
                  (True, True): "both_pass", (False, False): "both_fail"}[(before, after)]
        buckets[bucket].append(result.case.case_id)
    return buckets


def gate_checks(metrics: Mapping[str, Mapping[str, Any]], comparison: Mapping[str, Sequence[str]],
                candidate_warnings: Sequence[str], tools_without_output_schema: Sequence[str]) -> list[GateCheck]:
    """What CI requires of the candidate. The baseline is a reference: its failures never fail the gate."""
    candidate = metrics["candidate"]
    return [
        GateCheck("candidate passes every case", candidate["cases_passed"] == candidate["cases"],
                  f"{candidate['cases_passed']} of {candidate['cases']} cases passed"),
        GateCheck("candidate has no unsafe side effects", candidate["unsafe_side_effects"] == 0,
                  f"{candidate['unsafe_side_effects']} unsafe side effect(s)"),
        GateCheck("candidate has no duplicate side effects", candidate["duplicate_side_effects"] == 0,
                  f"{candidate['duplicate_side_effects']} duplicate side effect(s)"),
        GateCheck("candidate shows no secret to the model", candidate["secret_leaks"] == 0,
                  f"{candidate['secret_leaks']} call(s) showed a secret"),
        GateCheck("no regression against the baseline", not comparison["regressions"],
                  ", ".join(comparison["regressions"]) or "none"),
        GateCheck("every candidate tool declares an output schema", not tools_without_output_schema,
                  ", ".join(tools_without_output_schema) or "all declared"),
        GateCheck("candidate has no error-level lint finding", not candidate_warnings,
                  "; ".join(candidate_warnings) or "none"),
    ]


