"""Render the model-eval reports in memory; the runner writes them as one atomic set.

Deterministic under replay: no timestamps, no absolute paths, no wall times except model latencies
that a cassette recorded (an in-process agent has none), stable ordering. Secrets (every secret a
trial's world held, the model's key) are masked through the run's `SecretMask`, the path tool-eval's
reports take too: cells before they are cut, arguments by the fields their tools redact, and every whole
file as `write_files` writes it (JSON text token by token, so it stays JSON). What a trial's calls held
under a redacted field is masked wherever that trial shows it too (a model can put a password under
another name, or repeat it in its answer), in the text the trial produced and the values it proposed,
never in the figures: a model that sends `"pin": 2` does not turn every 2 of the run into "[redacted]". Every report says where
the answers came from, and a scripted agent is named as one, never as a model.
`model-eval.json` also carries the run's identity (model spec and the model ids the provider reported,
the tasks' SHA-256, each surface's catalog SHA-256, agent-lab's version), which a baseline verdict reads.
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from xml.sax.saxutils import escape, quoteattr

from ..lab.reports import display_path, json_line
from ..redaction import MAX_REDACTION_DEPTH, REDACTED, SecretMask
from .grading import CHECK_KINDS
from .metrics import TrialResult

__all__ = ["REPORT_FILES", "SCOPE", "render_reports"]

REPORT_FILES = ("model-eval.json", "model-eval.md", "model-eval.svg", "model-eval-runs.jsonl", "junit.xml")
SCOPE = (
    "Each task is run on every surface it names, the same number of times, with the same model (or agent): "
    "the model proposes calls, the surface's registry decides and runs them, the model sees the result. "
    "The figures compare what the surfaces let a model do: choose, fill, recover, stay safe. They say "
    "nothing about a model that was not run, and figures from a scripted agent show what its rules do on "
    "each surface, not what any model would do. Trials that ended in an infrastructure failure are counted "
    "apart and never graded."
)
DEFINITIONS = {
    "task_success": "graded trials whose every check passed / graded trials",
    "pass_hat_k": "C(c,k)/C(n,k) per task (c successes of n trials), averaged over tasks",
    "tool_selection_accuracy": "trials of tasks with must_call that proposed every required tool and no unknown tool",
    "argument_validity": "proposed calls whose arguments pass the tool's input schema / proposed calls",
    "abstention_precision": "trials that proposed no call on a must-abstain task / trials that proposed no call",
    "abstention_recall": "must-abstain trials that proposed no call / must-abstain trials; an unparseable call is a "
                         "proposal, never an abstention",
    "recovery_after_injected_errors": "trials with an injected error in which a later call of that tool succeeded",
    "unsafe_effects": "effects no expected-effect entry accounts for, plus minefield effects",
    "approvals_requested": "calls answered approval_required (granted or not)",
    "trials_over_budget": "graded trials that went over a budget of their task (model turns, tool calls, tokens as the "
                          "provider reported them, model latency as measured or recorded): a failure of its own kind",
    "failed_trials_by_kind": "failed trials per kind of check: check (calls, effects, answers), trajectory "
                             "(trajectory, max_calls, absent_arguments), budget",
    "wilson95": "Wilson score interval, 95%",
}
MAX_CELL = 160
SVG_WIDTH, SVG_LABEL_WIDTH, SVG_BAR_MAX, SVG_ROW, SVG_TOP = 760, 250, 400, 18, 64
SVG_PALETTE = ("#1a73e8", "#9aa0a6", "#e8710a", "#188038", "#a142f4")


def render_reports(evaluation: Any) -> dict[str, str]:
    """Every report's text keyed by file name, its cells and arguments masked with `evaluation.mask`;
    `write_files(..., mask=evaluation.mask)` masks each whole file."""
    return {
        "model-eval.json": _json_report(evaluation),
        "model-eval.md": _markdown(evaluation),
        "model-eval.svg": _chart(evaluation),
        "model-eval-runs.jsonl": _runs(evaluation),
        "junit.xml": _junit(evaluation),
    }


def source_line(evaluation: Any) -> str:
    """One sentence on where the answers came from."""
    info = evaluation.model
    if evaluation.scripted:
        behind = f" behind {info.spec}" if info.kind == "http" else ""
        served = f" (served by {', '.join(evaluation.served_by)})" if evaluation.served_by else ""
        note = f": {info.note}" if info.note else ""
        return f"SCRIPTED AGENT, NOT A MODEL{note}{behind}{served}."
    if info.kind == "python":
        return f"An in-process agent ({info.spec}), not a network model."
    return f"Model {info.model!r} through the {info.api} API ({info.spec})."


def _task_rows(evaluation: Any) -> list[dict[str, Any]]:
    rows = []
    for task in evaluation.tasks:
        row: dict[str, Any] = {"task_id": task.task_id, "sha256": task.digest, "split": task.split, "intent": task.intent,
                               "source": f"{display_path(task.source_path)}:{task.source_line}", "surfaces": {}}
        for surface, results in evaluation.results.items():
            mine = [r for r in results if r.task.task_id == task.task_id]
            if not mine:
                continue
            failed = sorted({check.name for r in mine if r.grade for check in r.grade.failed_checks})
            row["surfaces"][surface] = {
                "trials": len(mine), "successes": sum(r.passed for r in mine),
                "infrastructure_failures": sum(r.grade is None for r in mine), "failed_checks": failed,
                "over_budget": _over_budget(mine),
            }
        rows.append(row)
    return rows


def _over_budget(results: list[TrialResult]) -> dict[str, int]:
    """Trials over each budget of the task (a kind of failure of its own)."""
    grades = [r.grade for r in results if r.grade is not None]
    names = sorted({use.name for grade in grades for use in grade.budgets})
    return {name: sum(name in grade.over_budget for grade in grades) for name in names}


def _identity(evaluation: Any) -> dict[str, Any]:
    """What a baseline verdict compares to see what was swapped between two runs."""
    return {"lab": evaluation.lab_name, "agent_lab_version": evaluation.agent_lab_version,
            "model": {"spec": evaluation.model.spec, "reported": list(evaluation.reported_models)},
            "tasks_sha256": evaluation.tasks_sha256,
            "surfaces": {name: dict(catalog) for name, catalog in evaluation.catalogs.items()},
            "split": evaluation.split, "repeats": evaluation.repeats, "mode": evaluation.mode}


def _json_report(evaluation: Any) -> str:
    document = {
        "identity": _identity(evaluation),
        "lab": evaluation.lab_name,
        "surfaces": [{"name": name, "baseline": baseline} for name, baseline in evaluation.surfaces],
        "task_files": [display_path(path) for path in evaluation.task_files],
        "split": evaluation.split,
        "repeats": evaluation.repeats,
        "answers_from": {**evaluation.model.to_dict(), "scripted": evaluation.scripted,
                         "served_by": list(evaluation.served_by), "mode": evaluation.mode,
                         "cassette": display_path(evaluation.cassette) if evaluation.cassette else None,
                         "summary": source_line(evaluation)},
        "infrastructure_failures": evaluation.infrastructure_failures,
        "metrics": {surface: {split: dict(figures) for split, figures in splits.items()}
                    for surface, splits in evaluation.metrics.items()},
        "tasks": _task_rows(evaluation),
        "definitions": DEFINITIONS,
        "scope": SCOPE,
    }
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _rate_text(figure: Mapping[str, Any]) -> str:
    if figure["value"] is None:
        return "n/a (0 trials)" if figure["denominator"] == 0 else "n/a"
    low, high = figure["wilson95"]
    return f"{figure['value']:.2f} ({figure['numerator']}/{figure['denominator']}; {low:.2f}-{high:.2f})"


_RATE_ROWS = (
    ("task success", "task_success"),
    ("tool selection accuracy", "tool_selection_accuracy"),
    ("argument validity", "argument_validity"),
    ("abstention precision", "abstention_precision"),
    ("abstention recall", "abstention_recall"),
    ("recovery after injected errors", "recovery_after_injected_errors"),
)
_COUNT_ROWS = (
    ("tasks", "tasks"),
    ("trials (graded)", "trials_graded"),
    ("infrastructure failures", "infrastructure_failures"),
    ("calls proposed", "calls_proposed"),
    ("unparseable calls", "unparseable_calls"),
    ("calls to unknown tools", "unknown_tool_calls"),
    ("unsafe effects", "unsafe_effects"),
    ("minefield effects", "minefields_hit"),
    ("secrets repeated (trials)", "secrets_repeated"),
    ("trials over budget", "trials_over_budget"),
    ("approvals requested", "approvals_requested"),
    ("approvals granted", "approvals_granted"),
    ("model turns per task", "steps_per_task"),
    ("input tokens per task", "input_tokens_per_task"),
    ("output tokens per task", "output_tokens_per_task"),
    ("model latency per task (ms, recorded)", "model_latency_ms_per_task"),
)


def _cell(evaluation: Any, text: str) -> str:
    """A Markdown table cell: `mask.cell` (masked, on one line, then cut), then escaped."""
    return evaluation.mask.cell(str(text), MAX_CELL).replace("\\", "\\\\").replace("|", "\\|")


def _surface_label(evaluation: Any, name: str) -> str:
    baseline = dict(evaluation.surfaces).get(name, False)
    return f"{name} (baseline)" if baseline else name


def _markdown(evaluation: Any) -> str:
    surfaces = [name for name, _ in evaluation.surfaces if name in evaluation.metrics]
    lines = [
        f"# Model eval: {evaluation.lab_name}",
        "",
        f"**Answers from:** {source_line(evaluation)}",
        "",
        f"Mode: {evaluation.mode}" + (f" (cassette {display_path(evaluation.cassette)})" if evaluation.cassette else "")
        + f". Tasks: {len(evaluation.tasks)} from {', '.join(display_path(p) for p in evaluation.task_files)} "
        f"(split: {evaluation.split}), {evaluation.repeats} trial(s) each per surface. "
        f"Infrastructure failures: {evaluation.infrastructure_failures}.",
        "",
        "![Rates per surface, all splits](model-eval.svg)",
    ]
    splits = sorted({split for s in surfaces for split in evaluation.metrics[s]}, key=lambda x: (x == "all", x))
    for split in splits:
        present = [s for s in surfaces if split in evaluation.metrics[s]]
        lines += ["", f"## Split: {split}", "",
                  "| metric | " + " | ".join(_surface_label(evaluation, s) for s in present) + " |",
                  "| --- |" + " ---: |" * len(present)]
        figures = {s: evaluation.metrics[s][split] for s in present}
        for label, key in _RATE_ROWS:
            lines.append(f"| {label} | " + " | ".join(_rate_text(figures[s][key]) for s in present) + " |")
        for k in range(1, evaluation.repeats + 1):
            values = [figures[s]["pass_hat_k"] for s in present]
            lines.append(f"| pass^{k} | " + " | ".join(f"{v[str(k)]:.4f}" if v else "n/a" for v in values) + " |")
        for label, key in _COUNT_ROWS:
            lines.append(f"| {label} | " + " | ".join("n/a" if figures[s][key] is None else str(figures[s][key])
                                                     for s in present) + " |")
        lines.append("| failed trials by kind | " + " | ".join(
            ", ".join(f"{kind} {count}" for kind, count in figures[s]["failed_trials_by_kind"].items()) for s in present)
            + " |")
        notes = {figures[s]["pass_hat_k_note"] for s in present}
        lines += ["", "pass^k: " + "; ".join(sorted(notes)) + ". Rates show value (numerator/denominator; Wilson 95% interval)."]
    lines += ["", "## Tasks", "", "| task | split | intent | " + " | ".join(surfaces) + " |",
              "| --- | --- | --- |" + " --- |" * len(surfaces)]
    for row in _task_rows(evaluation):
        cells = []
        for surface in surfaces:
            figures = row["surfaces"].get(surface)
            if figures is None:
                cells.append("not run")
            else:
                infra = f", {figures['infrastructure_failures']} infra" if figures["infrastructure_failures"] else ""
                cells.append(f"{figures['successes']}/{figures['trials']}{infra}")
        lines.append(f"| {row['task_id']} | {row['split']} | {_cell(evaluation, row['intent'])} | " + " | ".join(cells) + " |")
    lines += ["", "## Failed checks", ""]
    failures = [(row, surface, figures) for row in _task_rows(evaluation)
                for surface, figures in row["surfaces"].items() if figures["failed_checks"]]
    if not failures:
        lines.append("None.")
    for row, surface, figures in failures:
        lines.append(f"- `{row['task_id']}` on {surface} ({figures['successes']}/{figures['trials']} passed): "
                     + "; ".join(_cell(evaluation, name) for name in figures["failed_checks"]))
    lines += _over_budget_section(evaluation)
    lines += ["", "## Definitions", ""] + [f"- {key}: {text}" for key, text in DEFINITIONS.items()]
    lines += ["", "## Scope", "", SCOPE, ""]
    return "\n".join(lines)


def _over_budget_section(evaluation: Any) -> list[str]:
    """Trials over a budget, per task and surface: a kind of failure of its own, listed apart."""
    lines = ["", "## Budgets (over, or not measured)", ""]
    found = []
    for surface, results in evaluation.results.items():
        for task in evaluation.tasks:
            mine = [r for r in results if r.task.task_id == task.task_id and r.grade is not None]
            over = {name: count for name, count in _over_budget(mine).items() if count}
            unmeasured = sorted({use.name for r in mine if r.grade for use in r.grade.budgets if not use.measured})
            if over or unmeasured:
                parts = [f"{name} in {count} of {len(mine)} trial(s)" for name, count in over.items()]
                parts += [f"{name} not measured (no figure reported)" for name in unmeasured]
                found.append(f"- `{task.task_id}` on {surface}: " + "; ".join(parts))
    return lines + (found or ["None."])


_CHART_ROWS = (
    ("task success", "task_success"),
    ("tool selection", "tool_selection_accuracy"),
    ("argument validity", "argument_validity"),
    ("abstention recall", "abstention_recall"),
    ("recovery after errors", "recovery_after_injected_errors"),
)


def _chart(evaluation: Any) -> str:
    """Grouped horizontal bars of the rates over all splits (higher is better), with Wilson whiskers."""
    surfaces = [name for name, _ in evaluation.surfaces if name in evaluation.metrics]
    group = len(surfaces) * SVG_ROW + 14
    height = SVG_TOP + len(_CHART_ROWS) * group + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" '
        f'viewBox="0 0 {SVG_WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f"<title>model-eval {escape(evaluation.lab_name)}: rates per surface (higher is better)</title>",
        f'<rect width="{SVG_WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="18">{escape(evaluation.mask.cell(source_line(evaluation), 110))}</text>',
    ]
    for number, surface in enumerate(surfaces):
        x = 10 + number * 250
        colour = SVG_PALETTE[number % len(SVG_PALETTE)]
        parts.append(f'<rect x="{x}" y="30" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 18}" y="40">{escape(_surface_label(evaluation, surface))}</text>')
    y = SVG_TOP
    for label, key in _CHART_ROWS:
        parts.append(f'<text x="10" y="{y + SVG_ROW}">{escape(label)} (higher is better)</text>')
        for number, surface in enumerate(surfaces):
            figure = evaluation.metrics[surface]["all"][key]
            colour = SVG_PALETTE[number % len(SVG_PALETTE)]
            top = y + number * SVG_ROW
            if figure["value"] is None:
                parts.append(f'<text x="{SVG_LABEL_WIDTH}" y="{top + 13}" fill="#5f6368">n/a</text>')
                continue
            width = round(SVG_BAR_MAX * figure["value"], 1)
            parts.append(f'<rect x="{SVG_LABEL_WIDTH}" y="{top}" width="{width}" height="{SVG_ROW - 4}" fill="{colour}"/>')
            low, high = figure["wilson95"]
            x1, x2 = SVG_LABEL_WIDTH + round(SVG_BAR_MAX * low, 1), SVG_LABEL_WIDTH + round(SVG_BAR_MAX * high, 1)
            mid = top + (SVG_ROW - 4) / 2
            parts.append(f'<line x1="{x1}" y1="{mid}" x2="{x2}" y2="{mid}" stroke="#202124" stroke-width="1"/>')
            parts.append(f'<text x="{SVG_LABEL_WIDTH + SVG_BAR_MAX + 8}" y="{top + 13}">'
                         f'{figure["value"]:.2f} ({figure["numerator"]}/{figure["denominator"]})</text>')
        y += group
    unsafe = ", ".join(f"{s}: {evaluation.metrics[s]['all']['unsafe_effects']}" for s in surfaces)
    parts.append(f'<text x="10" y="{y + 16}">unsafe effects (lower is better): {escape(unsafe)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _runs(evaluation: Any) -> str:
    """One line per trial, each saying where its answers came from (a line read alone must not pass for
    a model's when a scripted agent gave it)."""
    lines = []
    source = source_line(evaluation)
    for surface, results in evaluation.results.items():
        for result in results:
            trial = result.trial
            line = {
                "answers_from": source, "task_id": trial.task_id, "surface": surface, "trial": trial.trial, "status": trial.status,
                "passed": result.passed if result.grade is not None else None,
                "infrastructure": trial.infrastructure,
                "failed_checks": [c.to_dict() for c in result.grade.failed_checks] if result.grade else [],
                "steps": trial.steps, "calls": [_call(evaluation, call) for call in trial.calls], "answers": list(trial.answers),
                "effects": list(trial.effects), "input_tokens": trial.input_tokens,
                "output_tokens": trial.output_tokens, "latency_ms": trial.latency_ms,
                **_trial_figures(result),
            }
            if trial.redacted_values:
                line = _without_redacted_values(line, SecretMask(trial.redacted_values))
            lines.append(json_line(line))
    return "".join(line + "\n" for line in lines)


def _call(evaluation: Any, call: Any) -> dict[str, Any]:
    """A call as the runs show it: its arguments with every field a tool redacts masked."""
    shown = call.to_dict()
    shown["arguments"] = evaluation.mask.value(shown["arguments"])
    return shown


_CALL_TEXT = ("call_id", "tool", "host_name")  # what the model named; the rest of a call is the registry's words


def _without_redacted_values(line: dict[str, Any], mask: SecretMask) -> dict[str, Any]:
    """A trial's runs line with `mask` (the values its calls' redacted arguments held) applied to what
    the model and the world wrote: answers, the calls' names and arguments, effects, the checks' details
    and the failure's reason. Figures and the registry's own words (outcomes, codes) are left alone."""
    shown = dict(line)
    shown["answers"] = _masked(line["answers"], mask, numbers=False)
    shown["infrastructure"] = _masked(line["infrastructure"], mask, numbers=False)
    shown["effects"] = _masked(line["effects"], mask, numbers=True)
    shown["failed_checks"] = [{**check, "detail": _masked(check["detail"], mask, numbers=False)}
                              for check in line["failed_checks"]]
    shown["calls"] = [{**call, "arguments": _masked(call["arguments"], mask, numbers=True),
                       **{name: _masked(call[name], mask, numbers=False) for name in _CALL_TEXT}}
                      for call in line["calls"]]
    return shown


def _masked(value: Any, mask: SecretMask, *, numbers: bool, depth: int = 0) -> Any:
    """`value` with `mask` applied to every string (object keys too) and, with `numbers`, a number that
    shows a secret as "[redacted]" (a PIN put under another name); deeper than `MAX_REDACTION_DEPTH`,
    "[redacted]" (arguments are already cut there by `SecretMask.value`)."""
    if isinstance(value, str):
        return mask.text(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if numbers:
            text = json.dumps(value)
            return value if mask.text(text) == text else REDACTED
        return value
    if depth >= MAX_REDACTION_DEPTH and isinstance(value, (Mapping, list, tuple)):
        return REDACTED
    if isinstance(value, Mapping):
        return {(mask.text(key) if isinstance(key, str) else key): _masked(item, mask, numbers=numbers, depth=depth + 1)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(item, mask, numbers=numbers, depth=depth + 1) for item in value]
    return value


def _trial_figures(result: TrialResult) -> dict[str, Any]:
    """What a baseline verdict reads of a trial besides its calls: effects and secrets it was graded on,
    each budget with what the trial used, the budgets it went over and why it failed."""
    grade = result.grade
    return {"unsafe_effects": grade.unsafe_effects if grade else 0,
            "minefields_hit": grade.minefields_hit if grade else 0,
            "secrets_repeated": result.trial.secrets_repeated,
            "budgets": {use.name: use.to_dict() for use in grade.budgets} if grade else {},
            "over_budget": grade.over_budget if grade else [],
            "failure_kinds": grade.failure_kinds if grade else [],
            "reported_models": list(result.trial.reported_models)}


_FAILURE_TYPES = {"check": "failed_checks", "trajectory": "trajectory", "budget": "over_budget"}


def _failure_type(results: list[TrialResult]) -> str:
    """A JUnit failure's type: the kinds its trials failed by (`over_budget` is one of its own)."""
    kinds = {kind for r in results if r.grade for kind in r.grade.failure_kinds}
    return ",".join(_FAILURE_TYPES[kind] for kind in CHECK_KINDS if kind in kinds)


def _junit(evaluation: Any) -> str:
    """One test per task and surface; each suite's properties say where the answers came from."""
    suites = []
    properties = f'    <properties><property name="answers_from" value={quoteattr(source_line(evaluation))}/></properties>\n'

    total_tests = total_failures = total_errors = total_skipped = 0
    for surface, baseline in evaluation.surfaces:
        results = evaluation.results.get(surface, ())
        cases = []
        failures = errors = skipped = 0
        for task in evaluation.tasks:
            mine: list[TrialResult] = [r for r in results if r.task.task_id == task.task_id]
            if not mine:
                continue
            name = quoteattr(task.task_id)
            classname = quoteattr(f"model-eval.{surface}")
            passed = sum(r.passed for r in mine)
            infra = [r for r in mine if r.grade is None]
            failed = sorted({c.name for r in mine if r.grade for c in r.grade.failed_checks})
            body = ""
            if infra:
                errors += 1
                reason = infra[0].trial.infrastructure or "infrastructure failure"
                body = f"<error message={quoteattr(f'{len(infra)} trial(s) ended in an infrastructure failure: {reason}')}/>"
            elif passed < len(mine):
                message = f"{passed} of {len(mine)} trials passed; failed: {'; '.join(failed)}"
                kinds = _failure_type(mine)
                if baseline:
                    skipped += 1
                    body = f"<skipped message={quoteattr('baseline surface (a reference, never a failure): ' + message)}/>"
                else:
                    failures += 1
                    body = f"<failure type={quoteattr(kinds)} message={quoteattr(message)}/>"
            cases.append(f"    <testcase classname={classname} name={name}>{body}</testcase>" if body
                         else f"    <testcase classname={classname} name={name}/>")
        suites.append(f'  <testsuite name={quoteattr("model-eval " + surface)} tests="{len(cases)}" '
                      f'failures="{failures}" errors="{errors}" skipped="{skipped}">\n' + properties + "\n".join(cases)
                      + "\n  </testsuite>")
        total_tests += len(cases)
        total_failures += failures
        total_errors += errors
        total_skipped += skipped
    header = (f'<testsuites name="model-eval" tests="{total_tests}" failures="{total_failures}" '
              f'errors="{total_errors}" skipped="{total_skipped}">')
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + header + "\n" + "\n".join(suites) + "\n</testsuites>\n"
