"""Render the tool-eval reports in memory, then write them atomically.

Reports are deterministic: no timestamps, no durations, no absolute paths, stable ordering, fixed
call and approval ids. Every rendered file passes through `redact_text` with the backend's secret values
as a last line of defence, so a strategy that leaks a secret to the model never leaks it into a report.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

from ..redaction import redact, redact_text
from .backend import SECRET_FIELDS, TicketBackend
from .cases import STRATEGIES
from .metrics import BYTES_PER_TOKEN, CaseResult

__all__ = ["REPORT_FILES", "SCOPE", "ReportWriteError", "check_report_targets", "display_path", "render_reports",
           "write_files"]

REPORT_FILES = ("tool-comparison.json", "tool-comparison.md", "tool-comparison.svg", "tool-failures.md",
                "tool-runs.jsonl", "junit.xml")
SCOPE = (
    "Every case replays fixed, hand-written proposals, so these figures test the runtime and the "
    "tool surface (what each strategy does with a given call), not a model's choice of tools or arguments. "
    "A model that never proposes a bad call would not show these differences; one that does is protected "
    "only by the runtime. Timing-dependent cases use real, short deadlines."
)
MAX_CELL = 160
NOT_XML_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # XML 1.0 "Char"
SVG_WIDTH, SVG_LABEL_WIDTH, SVG_BAR_MAX, SVG_ROW, SVG_TOP = 720, 230, 380, 22, 56
SVG_COLOURS = {"baseline": "#9aa0a6", "candidate": "#1a73e8"}


def display_path(path: str) -> str:
    """A path fit for a report: relative as given, or just the file name (never absolute)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    try:
        return candidate.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return candidate.name


def render_reports(evaluation: Any) -> dict[str, str]:
    """Every report file's text, keyed by file name (junit.xml included)."""
    secrets = TicketBackend().secret_values()
    rendered = {
        "tool-comparison.json": _comparison_json(evaluation),
        "tool-comparison.md": _comparison_md(evaluation),
        "tool-comparison.svg": _chart_svg(evaluation),
        "tool-failures.md": _failures_md(evaluation),
        "tool-runs.jsonl": _runs_jsonl(evaluation),
        "junit.xml": _junit_xml(evaluation),
    }
    return {name: redact_text(text, secrets) for name, text in rendered.items()}


class ReportWriteError(Exception):
    """A report could not be written, and no report was replaced. `str()` is "PATH: what is wrong"."""


def check_report_targets(paths: Iterable[Path], *, keep: Iterable[str | Path] = ()) -> None:
    """Refuse targets that cannot become report files, before any slow work: a directory, a path
    under a file, two reports aimed at one file, or a file in `keep` (the run's case files, which a
    mistyped --junit would otherwise overwrite). Raises ReportWriteError."""
    kept = {Path(path).resolve() for path in keep}
    seen: set[Path] = set()
    for path in paths:
        if path.resolve() in kept:
            raise ReportWriteError(f"{path}: a case file of this run")
        if path.is_dir():
            raise ReportWriteError(f"{path}: a directory, not a file")
        blocking_file = next((parent for parent in path.parents if parent.exists() and not parent.is_dir()), None)
        if blocking_file is not None:
            raise ReportWriteError(f"{blocking_file}: a file, not a directory")
        resolved = path.resolve()
        if resolved in seen:
            raise ReportWriteError(f"{path}: two reports would be written to this file")
        seen.add(resolved)


def write_files(files: Mapping[Path, str]) -> None:
    """Replace every file of `files`, or none of them (raises ReportWriteError).

    A set of reports is only meaningful whole, so this writes every text in full to a temporary name
    beside its file first, and renames them into place only once all are written. Each rename is atomic;
    should one still fail, the files already renamed get their previous content back. Temporary files
    never outlive the call. Text is UTF-8 (a lone surrogate is written as its backslash escape).
    """
    check_report_targets(files)
    temporaries = {path: path.with_name(f".{path.name}.{os.getpid()}.tmp") for path in files}
    try:
        for path, text in files.items():
            _write_whole(path, temporaries[path], text.encode("utf-8", "backslashreplace"))
        _rename_all_or_none(temporaries)
    finally:
        for temporary in temporaries.values():
            _remove(temporary)


def _write_whole(path: Path, temporary: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(data)
    except OSError as error:
        raise ReportWriteError(f"{path}: {_reason(error)}") from None


def _rename_all_or_none(temporaries: Mapping[Path, Path]) -> None:
    previous = {path: _content_or_none(path) for path in temporaries}
    renamed: list[Path] = []
    for path, temporary in temporaries.items():
        try:
            os.replace(temporary, path)
        except OSError as error:
            for done in renamed:
                _put_back(done, previous[done])
            raise ReportWriteError(f"{path}: {_reason(error)}") from None
        renamed.append(path)


def _content_or_none(path: Path) -> bytes | None:
    """What `path` holds now, so a failed set can be put back (None: there is no such file)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ReportWriteError(f"{path}: {_reason(error)}") from None


def _put_back(path: Path, content: bytes | None) -> None:
    """Best effort: restore what `path` held before this run (remove it if it did not exist)."""
    if content is None:
        _remove(path)
        return
    try:
        with open(path, "wb") as handle:
            handle.write(content)
    except OSError:
        pass


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


# -- shared pieces -----------------------------------------------------------------------------------


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _inline(text: str) -> str:
    """Text from a case file on one Markdown line: a line break in it could start a heading or a list."""
    return " ".join(text.split())


def _cell(value: Any) -> str:
    text = _inline(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True))
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _strategy_label(evaluation: Any, strategy: str) -> str:
    return f"{strategy} ({evaluation.metrics[strategy]['name']})"


def _case_files(evaluation: Any) -> list[str]:
    return [display_path(path) for path in evaluation.case_files]


def _failed(result: CaseResult) -> list[Any]:
    return [grade for grade in result.grades if not grade.passed]


# -- tool-comparison.json ------------------------------------------------------------------------


def _comparison_json(evaluation: Any) -> str:
    baseline = {result.case.case_id: result for result in evaluation.results["baseline"]}
    document = {
        "case_files": _case_files(evaluation),
        "strategies": {strategy: dict(evaluation.metrics[strategy]) for strategy in STRATEGIES},
        "comparison": {key: list(value) for key, value in evaluation.comparison.items()},
        "gate": {"passed": evaluation.gate_passed, "checks": [check.to_dict() for check in evaluation.gate]},
        "cases": [
            {
                "case_id": result.case.case_id,
                "intent": result.case.intent,
                "source": f"{display_path(result.case.source_path)}:{result.case.source_line}",
                "baseline": _verdict(baseline[result.case.case_id]),
                "candidate": _verdict(result),
            }
            for result in evaluation.results["candidate"]
        ],
        "definitions": {
            "catalog_tokens_estimate": f"ceil(catalog_bytes / {BYTES_PER_TOKEN})",
            "actionable_error_rate": "errors whose next_action is not 'stop' / all errors",
            "unsafe_side_effects": "effects beyond each case's expected count, summed",
            "duplicate_side_effects": "effects that exactly repeat an earlier effect of the same case",
        },
        "scope": SCOPE,
    }
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _verdict(result: CaseResult) -> dict[str, Any]:
    return {
        "passed": result.passed,
        "failed_grades": [grade.name for grade in _failed(result)],
        "side_effects": result.run.side_effects,
        "duplicate_side_effects": result.run.duplicate_side_effects,
    }


# -- tool-comparison.md --------------------------------------------------------------------------

_METRIC_ROWS = (
    ("cases passed", "cases_passed"),
    ("case pass rate", "case_pass_rate"),
    ("calls replayed", "calls"),
    ("errors", "errors"),
    ("actionable error rate", "actionable_error_rate"),
    ("side effects", "side_effects"),
    ("unsafe side effects", "unsafe_side_effects"),
    ("duplicate side effects", "duplicate_side_effects"),
    ("secret leaks (calls)", "secret_leaks"),
    ("tools in catalog", "tools"),
    ("catalog bytes", "catalog_bytes"),
    ("catalog tokens (est.)", "catalog_tokens_estimate"),
)


def _comparison_md(evaluation: Any) -> str:
    metrics = evaluation.metrics
    passed = sum(check.passed for check in evaluation.gate)
    lines = [
        f"# Tool comparison: {metrics['baseline']['name']} vs {metrics['candidate']['name']}",
        "",
        f"Gate: **{'PASSED' if evaluation.gate_passed else 'FAILED'}** ({passed} of {len(evaluation.gate)} checks). "
        f"Cases: {len(evaluation.cases)} from {', '.join(_case_files(evaluation))}.",
        "",
        "![Baseline and candidate side by side](tool-comparison.svg)",
        "",
        "## Metrics",
        "",
        f"| metric | {_strategy_label(evaluation, 'baseline')} | {_strategy_label(evaluation, 'candidate')} |",
        "| --- | ---: | ---: |",
    ]
    for label, key in _METRIC_ROWS:
        lines.append(f"| {label} | {metrics['baseline'][key]} | {metrics['candidate'][key]} |")
    lines += [
        "",
        "Actionable error rate: errors whose `next_action` is not `stop`, over all errors. Unsafe side effects: "
        "effects beyond what a case expects (a duplicate counts too). Catalog tokens: "
        f"ceil(UTF-8 bytes of the compact catalog JSON / {BYTES_PER_TOKEN}).",
        "",
        "## Gate checklist",
        "",
    ]
    lines += [f"- [{'x' if check.passed else ' '}] {check.name}: {check.detail}" for check in evaluation.gate]
    lines += ["", "## Changed cases", ""] + _changed_cases(evaluation)
    lines += ["", "## Every case", "", "| case | intent | baseline | candidate |", "| --- | --- | --- | --- |"]
    baseline = {result.case.case_id: result for result in evaluation.results["baseline"]}
    for result in evaluation.results["candidate"]:
        before = baseline[result.case.case_id]
        lines.append(f"| {result.case.case_id} | {_cell(result.case.intent)} | {_mark(before)} | {_mark(result)} |")
    lines += ["", "## Scope", "", SCOPE, ""]
    return "\n".join(lines)


def _mark(result: CaseResult) -> str:
    return "pass" if result.passed else f"fail ({len(_failed(result))})"


def _changed_cases(evaluation: Any) -> list[str]:
    comparison = evaluation.comparison
    intents = {case.case_id: _inline(case.intent) for case in evaluation.cases}
    lines = [f"Improvements (baseline fails, candidate passes): {len(comparison['improvements'])}.", ""]
    lines += [f"- `{case_id}`: {intents[case_id]}" for case_id in comparison["improvements"]]
    lines += ["", f"Regressions (baseline passes, candidate fails): {len(comparison['regressions'])}."]
    if comparison["regressions"]:
        lines += [""] + [f"- `{case_id}`: {intents[case_id]}" for case_id in comparison["regressions"]]
    lines += ["", "Unchanged: both pass: " + (", ".join(f"`{c}`" for c in comparison["both_pass"]) or "none")
              + "; both fail: " + (", ".join(f"`{c}`" for c in comparison["both_fail"]) or "none") + "."]
    return lines


# -- tool-comparison.svg -------------------------------------------------------------------------

_CHART_ROWS = (
    ("cases passed", "cases_passed", "cases"),
    ("actionable errors (%)", "actionable_error_rate", None),
    ("unsafe side effects", "unsafe_side_effects", None),
    ("duplicate side effects", "duplicate_side_effects", None),
    ("secret leaks", "secret_leaks", None),
    ("catalog tokens (est.)", "catalog_tokens_estimate", None),
)


def _chart_svg(evaluation: Any) -> str:
    """A horizontal grouped bar chart; each group is scaled to its own maximum and labelled with values."""
    metrics = evaluation.metrics
    height = SVG_TOP + len(_CHART_ROWS) * (2 * SVG_ROW + 14) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" '
        f'viewBox="0 0 {SVG_WIDTH} {height}" font-family="sans-serif" font-size="13">',
        f'<title>{escape(metrics["baseline"]["name"])} vs {escape(metrics["candidate"]["name"])}</title>',
        f'<rect width="{SVG_WIDTH}" height="{height}" fill="#ffffff"/>',
    ]
    for number, strategy in enumerate(STRATEGIES):
        x = SVG_LABEL_WIDTH + number * 260
        parts.append(f'<rect x="{x}" y="14" width="14" height="14" fill="{SVG_COLOURS[strategy]}"/>')
        parts.append(f'<text x="{x + 20}" y="26">{escape(_strategy_label(evaluation, strategy))}</text>')
    y = SVG_TOP
    for label, key, total_key in _CHART_ROWS:
        values = {strategy: metrics[strategy][key] for strategy in STRATEGIES}
        if key.endswith("_rate"):
            values = {strategy: round(value * 100, 1) for strategy, value in values.items()}
        scale = max([1] + [metrics[s][total_key] for s in STRATEGIES if total_key] + list(values.values()))
        parts.append(f'<text x="10" y="{y + SVG_ROW + 4}">{escape(label)}</text>')
        for strategy in STRATEGIES:
            width = round(SVG_BAR_MAX * values[strategy] / scale, 1) if scale else 0
            suffix = f" / {metrics[strategy][total_key]}" if total_key else ""
            parts.append(f'<rect x="{SVG_LABEL_WIDTH}" y="{y}" width="{width}" height="{SVG_ROW - 4}" '
                         f'fill="{SVG_COLOURS[strategy]}"/>')
            parts.append(f'<text x="{SVG_LABEL_WIDTH + width + 6}" y="{y + SVG_ROW - 8}">'
                         f'{values[strategy]}{suffix}</text>')
            y += SVG_ROW
        y += 14
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# -- tool-failures.md ----------------------------------------------------------------------------


def _failures_md(evaluation: Any) -> str:
    lines = ["# Tool failures", "",
             "Each failing case per strategy, with every grade that differed (expected vs actual). Candidate "
             "failures fail the gate; baseline failures are the expected weaknesses of the wide tool and do not.",
             ""]
    for strategy in ("candidate", "baseline"):
        failing = [result for result in evaluation.results[strategy] if not result.passed]
        lines += [f"## {_strategy_label(evaluation, strategy)}: {len(failing)} failing case(s)", ""]
        if not failing:
            lines += ["None.", ""]
        for result in failing:
            lines += _failure_block(result)
    return "\n".join(lines)


def _failure_block(result: CaseResult) -> list[str]:
    case = result.case
    lines = [f"### {case.case_id}", "", f"{_inline(case.intent)} ({display_path(case.source_path)}:{case.source_line})", "",
             "| grade | expected | actual |", "| --- | --- | --- |"]
    lines += [f"| {_cell(grade.name)} | {_cell(grade.expected)} | {_cell(grade.actual)} |" for grade in _failed(result)]
    return lines + [""]


# -- tool-runs.jsonl -----------------------------------------------------------------------------


def _runs_jsonl(evaluation: Any) -> str:
    lines: list[str] = []
    for strategy in STRATEGIES:
        for result in evaluation.results[strategy]:
            lines.extend(_run_lines(result))
    return "".join(line + "\n" for line in lines)


def _run_lines(result: CaseResult) -> Iterable[str]:
    run = result.run
    for call in run.calls:
        yield _json_line({
            "kind": "call",
            "case_id": run.case_id,
            "strategy": run.strategy,
            "call_id": call.call_id,
            "tool": call.tool,
            "arguments": redact(call.arguments, SECRET_FIELDS),
            "approved": call.approved,
            "result": call.view,
        })
    yield _json_line({
        "kind": "case",
        "case_id": run.case_id,
        "strategy": run.strategy,
        "passed": result.passed,
        "grades": [grade.to_dict() for grade in result.grades],
        "side_effects": run.side_effects,
        "duplicate_side_effects": run.duplicate_side_effects,
        "unsafe_side_effects": result.unsafe_side_effects,
    })


# -- junit.xml -----------------------------------------------------------------------------------


def _junit_xml(evaluation: Any) -> str:
    """One testcase per case and strategy, plus one per gate check.

    Candidate failures are <failure>s. Baseline failures are <skipped> ("expected baseline failure"),
    so a CI system shows them without failing the build; only the candidate and the gate can fail it.
    """
    suites = [_suite(f"tool-eval.{strategy}", _strategy_label(evaluation, strategy),
                     [_case_xml(result, strategy) for result in evaluation.results[strategy]])
              for strategy in ("candidate", "baseline")]
    gate_cases = [(check.name, None if check.passed else check.detail, None) for check in evaluation.gate]
    suites.append(_suite("tool-eval.gate", "gate", gate_cases))
    tests = sum(suite[1] for suite in suites)
    failures = sum(suite[2] for suite in suites)
    skipped = sum(suite[3] for suite in suites)
    body = "".join(suite[0] for suite in suites)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites name="tool-eval" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}">\n'
            f"{body}</testsuites>\n")


def _case_xml(result: CaseResult, strategy: str) -> tuple[str, str | None, str | None]:
    failed = _failed(result)
    if not failed:
        return result.case.case_id, None, None
    detail = "\n".join(f"{grade.name}: expected {_cell(grade.expected)}, actual {_cell(grade.actual)}"
                       for grade in failed)
    if strategy == "baseline":
        return result.case.case_id, None, f"expected baseline failure ({len(failed)} grade(s) differ):\n{detail}"
    return result.case.case_id, detail, None


def _suite(classname: str, name: str, cases: Sequence[tuple[str, str | None, str | None]]) -> tuple[str, int, int, int]:
    failures = sum(failure is not None for _, failure, _ in cases)
    skipped = sum(skip is not None for _, _, skip in cases)
    lines = [f'  <testsuite name={_xml_attribute(name)} tests="{len(cases)}" failures="{failures}" errors="0" '
             f'skipped="{skipped}" time="0">']
    for case_name, failure, skip in cases:
        opening = f'    <testcase classname={_xml_attribute(classname)} name={_xml_attribute(case_name)} time="0"'
        if failure is not None:
            lines.append(f'{opening}><failure message="failed" type="tool-eval">{_xml_text(failure)}</failure>'
                         "</testcase>")
        elif skip is not None:
            lines.append(f"{opening}><skipped message={_xml_attribute(skip.splitlines()[0])}>{_xml_text(skip)}</skipped>"
                         "</testcase>")
        else:
            lines.append(f"{opening}/>")
    lines.append("  </testsuite>")
    return "\n".join(lines) + "\n", len(cases), failures, skipped


def _xml_text(text: str) -> str:
    """Character data for XML 1.0: escaped, and characters XML cannot hold spelled as \\uXXXX escapes."""
    return escape(_xml_characters(text))


def _xml_attribute(text: str) -> str:
    return quoteattr(_xml_characters(text))


def _xml_characters(text: str) -> str:
    """Control characters (other than tab and newlines), lone surrogates, U+FFFE/U+FFFF would make the
    file malformed, and a CI parser would reject the whole report; they come from case files and tool
    output, so they are shown as escapes instead."""
    return NOT_XML_CHARACTER.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
