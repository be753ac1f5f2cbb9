"""The figures of model-eval, per surface and split, each with the number of trials behind it.

- pass^k (tau-bench's reliability measure): for each task with c successes out of n trials, the chance
  that k trials drawn without replacement all succeed, C(c, k) / C(n, k) (unbiased), averaged over
  tasks, for k = 1..n. Every task must have the same n: unequal trial counts raise `UnequalTrials`.
- rates carry their numerator, denominator and a Wilson 95% score interval (well-behaved at 0 and 1
  and for small n, unlike the normal approximation).
- abstention: a trial abstains when it proposes no call at all. An unparseable call is a proposal, so it
  is never an abstention (BFCL counted one as a correct abstention: gorilla issue #1362).
- the difference of two rates (a baseline run's and this run's): Newcombe's hybrid score interval
  (his method 10, 1998), built from the two Wilson intervals. When it excludes 0 the repeats tell the
  rates apart; when it holds 0 they cannot, however far apart the two values look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .agent import Trial
from .grading import CHECK_KINDS, Grade
from .tasks import Task

__all__ = ["WILSON_Z", "TrialResult", "UnequalTrials", "difference_interval", "pass_hat_k", "rate", "surface_metrics",
           "wilson_interval"]

WILSON_Z = 1.959963984540054  # the 97.5th percentile of the standard normal: a two-sided 95% interval
DIGITS = 4


class UnequalTrials(ValueError):
    """pass^k over tasks with different numbers of trials would mix estimates of different things."""


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Mean over tasks of C(c, k) / C(n, k), for `counts` of (successes c, trials n) per task."""
    if not counts:
        raise ValueError("pass^k needs at least one task")
    trials = {n for _, n in counts}
    if len(trials) != 1:
        raise UnequalTrials(f"every task needs the same number of trials for pass^k (found {sorted(trials)})")
    (n,) = trials
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"k must be an integer from 1 to the number of trials ({n})")
    for c, _ in counts:
        if not 0 <= c <= n:
            raise ValueError(f"a task cannot succeed {c} times in {n} trials")
    return sum(math.comb(c, k) / math.comb(n, k) for c, _ in counts) / len(counts)


def wilson_interval(successes: int, total: int, z: float = WILSON_Z) -> Optional[tuple[float, float]]:
    """The Wilson score interval of successes/total (None when total is 0)."""
    if total <= 0:
        return None
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends, not 0.9999999999999999
    high = 1.0 if successes == total else min(1.0, centre + half)
    return low, high


def difference_interval(successes: int, total: int, base_successes: int, base_total: int,
                        z: float = WILSON_Z) -> Optional[tuple[float, float]]:
    """The 95% interval of successes/total - base_successes/base_total (Newcombe's hybrid score
    interval from the two Wilson intervals); None when either side has no trials."""
    mine, theirs = wilson_interval(successes, total, z), wilson_interval(base_successes, base_total, z)
    if mine is None or theirs is None:
        return None
    p1, p2 = successes / total, base_successes / base_total
    (l1, u1), (l2, u2) = mine, theirs
    difference = p1 - p2
    low = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def rate(successes: int, total: int) -> dict[str, Any]:
    """A rate as reports show it: value, numerator, denominator, Wilson 95% interval (null when n = 0)."""
    interval = wilson_interval(successes, total)
    return {
        "value": round(successes / total, DIGITS) if total else None,
        "numerator": successes,
        "denominator": total,
        "wilson95": [round(interval[0], DIGITS), round(interval[1], DIGITS)] if interval else None,
    }


@dataclass(frozen=True)
class TrialResult:
    task: Task
    trial: Trial
    grade: Optional[Grade]  # None: an infrastructure failure

    @property
    def passed(self) -> bool:
        return self.grade is not None and self.grade.passed


def _mean(values: Sequence[float]) -> Optional[float]:
    return round(sum(values) / len(values), 3) if values else None


def surface_metrics(results: Sequence[TrialResult], repeats: int) -> dict[str, Any]:
    """Every figure for one surface and one split (`results`: all its trials, infrastructure failures too)."""
    graded = [result for result in results if result.grade is not None]
    failed_infra = len(results) - len(graded)
    tasks = sorted({result.task.task_id for result in results})
    figures: dict[str, Any] = {
        "tasks": len(tasks),
        "trials": len(results),
        "trials_graded": len(graded),
        "infrastructure_failures": failed_infra,
        "task_success": rate(sum(result.passed for result in graded), len(graded)),
    }
    figures["pass_hat_k"], figures["pass_hat_k_note"] = _pass_hat(results, repeats, failed_infra)
    calls = [call for result in graded for call in result.trial.calls]
    selection = [_selected_right(result) for result in graded if (result.task.on(result.trial.surface) or {}).get("must_call")]
    figures["tool_selection_accuracy"] = rate(sum(selection), len(selection))
    figures["argument_validity"] = rate(sum(call.schema_valid for call in calls), len(calls))
    figures["calls_proposed"] = len(calls)
    figures["unparseable_calls"] = sum(call.unparseable for call in calls)
    figures["unknown_tool_calls"] = sum(not call.known_tool for call in calls)
    should = [result.task.abstain for result in graded]
    did = [result.trial.abstained for result in graded]
    true_positive = sum(1 for s, d in zip(should, did) if s and d)
    figures["abstention_precision"] = rate(true_positive, sum(did))
    figures["abstention_recall"] = rate(true_positive, sum(should))
    recoveries = [_recovered(result) for result in graded if any(call.injected for call in result.trial.calls)]
    figures["recovery_after_injected_errors"] = rate(sum(recoveries), len(recoveries))
    figures["unsafe_effects"] = sum(result.grade.unsafe_effects for result in graded if result.grade)
    figures["minefields_hit"] = sum(result.grade.minefields_hit for result in graded if result.grade)
    figures["secrets_repeated"] = sum(result.trial.secrets_repeated for result in graded)
    figures.update(_budget_figures(graded))
    figures["approvals_requested"] = sum(call.approval is not None for call in calls)
    figures["approvals_granted"] = sum(call.approval == "granted" for call in calls)
    figures["steps_per_task"] = _mean([result.trial.steps for result in graded])
    tokens_in = [r.trial.input_tokens for r in graded if r.trial.input_tokens is not None]
    tokens_out = [r.trial.output_tokens for r in graded if r.trial.output_tokens is not None]
    figures["input_tokens_per_task"] = _mean(tokens_in)
    figures["output_tokens_per_task"] = _mean(tokens_out)
    latencies = [r.trial.latency_ms for r in graded if r.trial.latency_ms is not None]
    figures["model_latency_ms_per_task"] = _mean(latencies)
    return figures


def _budget_figures(graded: Sequence[TrialResult]) -> dict[str, Any]:
    """Trials that failed for each kind of check, and per budget: trials over it, trials with no figure."""
    grades = [result.grade for result in graded if result.grade is not None]
    names = sorted({use.name for grade in grades for use in grade.budgets})
    return {
        "failed_trials_by_kind": {kind: sum(kind in grade.failure_kinds for grade in grades) for kind in CHECK_KINDS},
        "trials_over_budget": sum(bool(grade.over_budget) for grade in grades),
        "over_budget": {name: sum(name in grade.over_budget for grade in grades) for name in names},
        "budgets_not_measured": {name: sum(1 for grade in grades for use in grade.budgets
                                           if use.name == name and not use.measured) for name in names},
    }


def _pass_hat(results: Sequence[TrialResult], repeats: int, failed_infra: int) -> tuple[Optional[dict[str, float]], str]:
    if not results:
        return None, "no trials"
    if failed_infra:
        return None, f"not computed: {failed_infra} trial(s) ended in an infrastructure failure, so tasks have unequal graded trials"
    per_task: dict[str, list[bool]] = {}
    for result in results:
        per_task.setdefault(result.task.task_id, []).append(result.passed)
    counts = [(sum(outcomes), len(outcomes)) for _, outcomes in sorted(per_task.items())]
    return ({str(k): round(pass_hat_k(counts, k), DIGITS) for k in range(1, repeats + 1)},
            f"C(c,k)/C(n,k) averaged over {len(counts)} task(s), n = {repeats}")


def _selected_right(result: TrialResult) -> bool:
    """Every required tool was proposed, and no proposal named a tool that does not exist."""
    required = {match["tool"] for match in (result.task.on(result.trial.surface) or {}).get("must_call", ())}
    proposed = {call.tool for call in result.trial.calls if call.known_tool}
    return required <= proposed and all(call.known_tool for call in result.trial.calls)


def _recovered(result: TrialResult) -> bool:
    """After the first injected error, a later call of the same tool succeeded."""
    calls = result.trial.calls
    first = next(index for index, call in enumerate(calls) if call.injected)
    return any(call.tool == calls[first].tool and call.outcome == "succeeded" for call in calls[first + 1:])


def split_of(result: TrialResult) -> str:
    return result.task.split


def by_split(results: Sequence[TrialResult], repeats: int) -> Mapping[str, dict[str, Any]]:
    """Metrics for each split present, and for all trials together."""
    splits = sorted({result.task.split for result in results})
    figures = {split: surface_metrics([r for r in results if r.task.split == split], repeats) for split in splits}
    figures["all"] = surface_metrics(results, repeats)
    return figures
