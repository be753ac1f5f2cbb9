"""Render the tool-eval reports in memory, then write them atomically.

Reports are deterministic: no timestamps, no durations, no absolute paths, stable ordering, fixed
call and approval ids. They name the lab and its surfaces and cover every surface, however many. Secret
values (every secret any world of the run held) are masked through the run's `SecretMask`, the one
masking path every writer shares: in every text cell before it is cut to length (so no part of a secret
survives a cut), and in every whole file as `write_files` writes it (JSON text token by token, so it
stays JSON): a surface that leaks a secret to the model never leaks it into a report.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..jsonvalue import indented_json
from ..redaction import SecretMask
from .paths import display_path  # noqa: F401 - importable from here, as before
from .fault_reports import effect_failures, effects_sarif, fault_section
from .metrics import BYTES_PER_TOKEN, CaseResult

__all__ = ["REPORT_FILES", "SCOPE", "ReportWriteError", "check_report_targets", "display_path", "json_line",
           "render_reports", "write_files"]

REPORT_FILES = ("tool-comparison.json", "tool-comparison.md", "tool-comparison.svg", "tool-failures.md",
                "tool-runs.jsonl", "tool-effects.sarif", "junit.xml")
SCOPE = (
    "Every case replays fixed, hand-written proposals, so these figures test the runtime and the "
    "tool surface (what each strategy does with a given call), not a model's choice of tools or arguments. "
    "A model that never proposes a bad call would not show these differences; one that does is protected "
    "only by the runtime. Timing-dependent cases use real, short deadlines."
)
MAX_CELL = 160
NOT_RUN = "not run"
NOT_RUN_REASON = "not run: the case has no steps for this surface"
# Not an XML 1.0 "Char", written as the complement of its ranges: the negated class costs 7 ms to compile.
NOT_XML_CHARACTER = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
SVG_WIDTH, SVG_LABEL_WIDTH, SVG_BAR_MAX, SVG_ROW, SVG_TOP, SVG_LEGEND_ENTRY = 720, 230, 380, 22, 56, 260
SVG_LEGEND_PER_LINE = 2
SVG_CHARACTER_WIDTH = 7  # a generous estimate at font-size 13, so a long surface name widens the chart
SVG_BASELINE_COLOUR = "#9aa0a6"
SVG_CANDIDATE_COLOURS = ("#1a73e8", "#e8710a", "#188038", "#a142f4", "#d01884", "#12b5cb")


def render_reports(evaluation: Any) -> dict[str, str]:
    """Every report file's text, keyed by file name (junit.xml included; a shard's `tool-shard.json` too),
    its cells masked with the run's `evaluation.mask`; `write_files(..., mask=evaluation.mask)` masks each
    whole file."""
    rendered = {
        "tool-comparison.json": _comparison_json(evaluation),
        "tool-comparison.md": _comparison_md(evaluation),
        "tool-comparison.svg": _chart_svg(evaluation),
        "tool-failures.md": _failures_md(evaluation),
        "tool-runs.jsonl": _runs_jsonl(evaluation),
        "tool-effects.sarif": effects_sarif(evaluation),
        "junit.xml": _junit_xml(evaluation),
    }
    if getattr(evaluation, "shard", None) is not None:  # one shard of a case set: what the merge needs
        from .shards import SHARD_FILE, shard_document

        rendered[SHARD_FILE] = shard_document(evaluation)
    return rendered


class ReportWriteError(Exception):
    """A report could not be written, and no report was replaced. `str()` is "PATH: what is wrong"."""


def check_report_targets(paths: Iterable[Path], *, keep: Iterable[str | Path] | Mapping[str | Path, str] = ()) -> None:
    """Refuse targets that cannot become report files, before any slow work: a directory, a path
    under a file, two reports aimed at one file, or a file in `keep`: the run's inputs, which a mistyped
    --junit would otherwise overwrite (`inputs.run_inputs`: path -> what it is; a plain list of paths is
    taken as case files), however a target spells one of them. Raises ReportWriteError."""
    from .inputs import input_overwritten

    kept = {_as_path(path): what for path, what in keep.items()} if isinstance(keep, Mapping) else \
        {_as_path(path): "a case file of this run" for path in keep}
    paths = list(paths)
    overwritten = input_overwritten(paths, kept)
    if overwritten is not None:
        raise ReportWriteError(f"{overwritten[0]}: {overwritten[1]}")
    directories = {parent for path in paths for parent in _leads_to(path).parents}  # of the reports
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            raise ReportWriteError(f"{path}: a directory, not a file")
        if path.exists() and not path.is_file():  # a device or a pipe: a rename would replace it (as root, /dev/null)
            raise _not_a_file(path)
        if _leads_to(path) in directories:  # --junit DIR with --out DIR: not there yet, so not a directory yet
            raise ReportWriteError(f"{path}: the directory of another report, not a file")
        blocking_file = next((parent for parent in path.parents if parent.exists() and not parent.is_dir()), None)
        if blocking_file is not None:
            raise ReportWriteError(f"{blocking_file}: a file, not a directory")
        resolved = _leads_to(path)
        if resolved in seen:
            raise ReportWriteError(f"{path}: two reports would be written to this file")
        seen.add(resolved)


def _not_a_file(path: Path) -> ReportWriteError:
    """The refusal of a target that is a device or a pipe: when the targets are checked, and again when
    one is found so just before the renames."""
    return ReportWriteError(f"{path}: not a regular file (a device or a pipe); a report set is files")


def _leads_to(path: Path) -> Path:
    """Where a report target leads; ReportWriteError for a symbolic link loop on the way (which
    `Path.resolve()` raises as RuntimeError before Python 3.13: a traceback, not a refusal)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        raise ReportWriteError(f"{path}: {os.strerror(errno.ELOOP)}") from None


def _as_path(path: str | Path) -> Path:
    return path if isinstance(path, Path) else Path(path)  # run_inputs gives hundreds of Paths already


def write_files(files: Mapping[Path, str], *, mask: SecretMask) -> None:
    """Replace every file of `files`, or none of them (raises ReportWriteError), each masked by `mask`
    as its kind needs (`SecretMask.file`: JSON stays JSON). `mask` has no default: whoever writes a
    file says which secrets it must not show (`NO_SECRETS` for a file that holds none by design).

    A set of reports is only meaningful whole, so this writes every text in full to a temporary name
    beside its file first, and renames them into place only once all are written. Each rename is atomic;
    should one still fail, the files already renamed get their previous content back. Temporary files
    never outlive the call. Text is UTF-8 (a lone surrogate is written as its backslash escape).

    A temporary name is random and always a new file (`_temporary_beside`): with a name anyone could
    predict (the pid) and an open that followed links, whoever may write in the report directory (a
    shared /tmp/reports) planted a link there and the report was written through it, over any file the
    run's user may write.
    """
    check_report_targets(files)
    temporaries = {path: _temporary_beside(path) for path in files}
    created: list[Path] = []  # the temporaries this call made: only these are removed
    try:
        for path, text in files.items():
            _write_whole(path, temporaries[path], mask.file(path.name, text).encode("utf-8", "backslashreplace"),
                         created)
        _rename_all_or_none(temporaries)
    finally:
        for temporary in created:
            _remove(temporary)


def _temporary_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _write_whole(path: Path, temporary: Path, data: bytes, created: list[Path]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        created.append(temporary)  # before it exists: a Ctrl-C just after the open still has it removed
        try:
            handle = open(temporary, "xb")  # O_EXCL: a new file, never a link or file left at this name
        except FileExistsError:
            created.remove(temporary)  # not ours: neither written through nor removed
            raise
        with handle:
            handle.write(data)
    except OSError as error:
        raise ReportWriteError(f"{path}: {_reason(error)}") from None


def _rename_all_or_none(temporaries: Mapping[Path, Path]) -> None:
    previous = {path: _content_or_none(path) for path in temporaries}
    renamed: list[Path] = []
    for path, temporary in temporaries.items():
        try:
            os.replace(temporary, path)
        except BaseException as error:  # an OSError, or Ctrl-C between two renames: half a set is no set
            for done in renamed:
                _put_back(done, previous[done])
            if isinstance(error, OSError):
                raise ReportWriteError(f"{path}: {_reason(error)}") from None
            raise
        renamed.append(path)


def _content_or_none(path: Path) -> bytes | str | None:
    """What `path` holds now, so a failed set can be put back: its bytes, or for a symbolic link where
    it points (str; the link is put back, not what it points at copied in), None when there is none.

    The targets were checked before the reports were written, but whoever may write in the directory
    can put a named pipe there meanwhile: reading it would wait for a writer for ever (a CI job hung
    until its own time limit). So it is opened without waiting and without following a link, and read
    only when it is a regular file; anything else is ReportWriteError, before any report is renamed."""
    try:
        if path.is_symlink():
            return os.readlink(path)
        descriptor = os.open(path, os.O_RDONLY | _NO_WAIT | _NO_LINK)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ReportWriteError(f"{path}: {_reason(error)}") from None
    with open(descriptor, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise _not_a_file(path)
            return handle.read()
        except OSError as error:
            raise ReportWriteError(f"{path}: {_reason(error)}") from None


_NO_WAIT = getattr(os, "O_NONBLOCK", 0)  # a named pipe opens at once, writer or not (POSIX; none on Windows)
_NO_LINK = getattr(os, "O_NOFOLLOW", 0)  # a link put there since `is_symlink` is refused, not followed


def _put_back(path: Path, content: bytes | str | None) -> None:
    """Best effort: restore what `path` held before this run (remove it if it did not exist), by a new
    file (or link) renamed over it, so nothing is written through a link planted there meanwhile."""
    if content is None:
        _remove(path)
        return
    temporary = _temporary_beside(path)
    try:
        if isinstance(content, str):
            os.symlink(content, temporary)
        else:
            with open(temporary, "xb") as handle:
                handle.write(content)
        os.replace(temporary, path)
    except OSError:
        _remove(temporary)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


# -- shared pieces -----------------------------------------------------------------------------------


_LINE_BREAKS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_line(value: Any) -> str:
    """One JSON Lines record. JSON may hold U+0085, U+2028 and U+2029 raw inside a string, but
    `str.splitlines()` and many editors break a line there: they are written as escapes, so a record is
    one line for every reader."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for character, escaped in _LINE_BREAKS_JSON_KEEPS.items():
        text = text.replace(character, escaped)
    return text


def _inline(text: str) -> str:
    """Text from a case file on one Markdown line: a line break in it could start a heading or a list."""
    return " ".join(text.split())


NOT_SHOWN_IN_MARKDOWN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # controls, lone surrogates


def _markdown(text: str) -> str:
    """Text from a case file or a tool as Markdown shows it, not as HTML it would start: `<!--` at the
    start of a line hides every line after it, `<details>` or `<script>` swallow what follows. Control
    characters are written as `\\uXXXX` escapes, as junit.xml writes them: an ESC or CSI sequence from a
    tool's output would otherwise drive the terminal of whoever prints the report in a CI log."""
    return NOT_SHOWN_IN_MARKDOWN.sub(lambda found: f"\\u{ord(found.group()):04x}", escape(text))


_BLOCK_START = re.compile(r"(?:#{1,6}|[-+*]|[0-9]{1,9}[.)])(?=\s|$)|`{3}|~{3}")  # CommonMark block starts


def _paragraph(text: str) -> str:
    """`_markdown` text that starts a line and stays a paragraph: an intent "## candidate (v2): 0
    failing case(s)" would otherwise be a heading (or a list, a quote, a rule) forged into the report."""
    text = _markdown(text)
    found = _BLOCK_START.match(text)
    return text if found is None else text[:found.end() - 1] + "\\" + text[found.end() - 1:]


def _cell(value: Any, mask: SecretMask) -> str:
    """One Markdown table cell or message fragment: `mask.cell` (on one line, masked, then cut to
    `MAX_CELL`: masked first, so no part of a secret crossing the cut is left behind), then escaped."""
    return mask.cell(value, MAX_CELL).replace("\\", "\\\\").replace("|", "\\|")


def _case_files(evaluation: Any) -> list[str]:
    return [display_path(path) for path in evaluation.case_files]


def _failed(result: CaseResult) -> list[Any]:
    return [grade for grade in result.grades if not grade.passed]


def _gating_order(evaluation: Any) -> list[Any]:
    """Candidates first (they gate), in the lab's order, then the baseline."""
    return list(evaluation.candidates) + ([evaluation.baseline] if evaluation.baseline is not None else [])


# -- tool-comparison.json ------------------------------------------------------------------------


def _comparison_json(evaluation: Any) -> str:
    results = {surface.name: {result.case.case_id: result for result in evaluation.results[surface.name]}
               for surface in evaluation.surfaces}
    baseline = evaluation.baseline
    document = {
        "lab": evaluation.lab,
        "case_files": _case_files(evaluation),
        "surfaces": {surface.name: dict(evaluation.metrics[surface.name]) for surface in evaluation.surfaces},
        "baseline": baseline.name if baseline is not None else None,
        "comparison": {candidate: {key: list(value) for key, value in buckets.items()}
                       for candidate, buckets in evaluation.comparison.items()},
        "gate": {"passed": evaluation.gate_passed, "checks": [check.to_dict() for check in evaluation.gate]},
        "cases": [
            {
                "case_id": case.case_id,
                "intent": case.intent,
                "source": f"{display_path(case.source_path)}:{case.source_line}",
                "surfaces": {name: _verdict(by_case[case.case_id]) for name, by_case in results.items()},
            }
            for case in evaluation.cases
        ],
        "definitions": {
            "catalog_tokens_estimate": f"ceil(catalog_bytes / {BYTES_PER_TOKEN})",
            "actionable_error_rate": "errors whose next_action is not 'stop' / all errors",
            "unsafe_side_effects": "effects beyond each case's expected count, summed",
            "duplicate_side_effects": "effects that exactly repeat an earlier effect of the same case",
            "cases_not_run": "cases without steps for the surface: never counted as passed",
            "fault_cases": "cases whose steps for the surface inject a fault (a fault marker)",
            "fault_duplicate_side_effects": "duplicate side effects of the fault cases",
            "effect_findings": "(case, tool, rule) where a tool's calls changed the world against its declaration "
                               "(AL801, AL802)",
        },
        "scope": SCOPE,
    }
    return indented_json(document, sort_keys=True) + "\n"


def _verdict(result: CaseResult) -> dict[str, Any]:
    run = result.run
    return {
        "ran": run is not None,
        "passed": result.passed,
        "failed_grades": [grade.name for grade in _failed(result)],
        "side_effects": run.side_effects if run is not None else None,
        "duplicate_side_effects": run.duplicate_side_effects if run is not None else None,
        **({"faults": list(run.faults)} if run is not None and run.faults else {}),
        **({"effect_findings": [finding.to_dict() for finding in run.effect_findings]}
           if run is not None and run.effect_findings else {}),
    }


# -- tool-comparison.md --------------------------------------------------------------------------

_METRIC_ROWS = (
    ("cases passed", "cases_passed"),
    ("cases not run", "cases_not_run"),
    ("case pass rate", "case_pass_rate"),
    ("calls replayed", "calls"),
    ("errors", "errors"),
    ("actionable error rate", "actionable_error_rate"),
    ("side effects", "side_effects"),
    ("unsafe side effects", "unsafe_side_effects"),
    ("duplicate side effects", "duplicate_side_effects"),
    ("secret leaks (calls)", "secret_leaks"),
    ("fault cases run", "fault_cases"),
    ("fault cases passed", "fault_cases_passed"),
    ("side effects of fault cases", "fault_side_effects"),
    ("duplicate side effects of fault cases", "fault_duplicate_side_effects"),
    ("effect findings (AL801, AL802)", "effect_findings"),
    ("tools in catalog", "tools"),
    ("catalog bytes", "catalog_bytes"),
    ("catalog tokens (est.)", "catalog_tokens_estimate"),
)


def _title(evaluation: Any) -> str:
    names = [surface.name for surface in evaluation.surfaces]
    return f"Tool comparison: {' vs '.join(names)}" if len(names) > 1 else f"Tool contracts: {names[0]}"


def _comparison_md(evaluation: Any) -> str:
    metrics = evaluation.metrics
    surfaces = evaluation.surfaces
    passed = sum(check.passed for check in evaluation.gate)
    listed = ", ".join(f"`{surface.name}` ({surface.role})" for surface in surfaces)
    lines = [
        f"# {_title(evaluation)}",
        "",
        f"Lab: `{evaluation.lab}`. Surfaces: {listed}.",
        "",
        *_server_lines(evaluation),
        f"Gate: **{'PASSED' if evaluation.gate_passed else 'FAILED'}** ({passed} of {len(evaluation.gate)} checks). "
        f"Cases: {len(evaluation.cases)} from {_markdown(', '.join(_case_files(evaluation)))}.",
        "",
        "![Every surface side by side](tool-comparison.svg)",
        "",
        "## Metrics",
        "",
        "| metric | " + " | ".join(surface.label for surface in surfaces) + " |",
        "| --- |" + " ---: |" * len(surfaces),
    ]
    some_not_run = any(metrics[surface.name]["cases_not_run"] for surface in surfaces)
    for label, key in _METRIC_ROWS:
        if key != "cases_not_run" or some_not_run:
            lines.append(f"| {label} | " + " | ".join(str(metrics[surface.name][key]) for surface in surfaces) + " |")
    lines += [
        "",
        "Actionable error rate: errors whose `next_action` is not `stop`, over all errors. Unsafe side effects: "
        "effects beyond what a case expects (a duplicate counts too). Catalog tokens: "
        f"ceil(UTF-8 bytes of the compact catalog JSON / {BYTES_PER_TOKEN}).",
        "",
        "## Gate checklist",
        "",
    ]
    lines += [f"- [{'x' if check.passed else ' '}] {check.name}: {_markdown(check.detail)}" for check in evaluation.gate]
    lines += ["", *fault_section(evaluation, lambda text: _markdown(_inline(text)))]
    lines += ["## Changed cases", ""] + _changed_cases(evaluation)
    lines += ["", "## Every case", "",
              "| case | intent | " + " | ".join(surface.name for surface in surfaces) + " |",
              "| --- | --- |" + " --- |" * len(surfaces)]
    by_surface = [evaluation.results[surface.name] for surface in surfaces]
    for number, case in enumerate(evaluation.cases):
        marks = " | ".join(_mark(results[number]) for results in by_surface)
        lines.append(f"| {case.case_id} | {_markdown(_cell(case.intent, evaluation.mask))} | {marks} |")
    lines += ["", "## Scope", "", SCOPE, ""]
    return "\n".join(lines)


def _server_lines(evaluation: Any) -> list[str]:
    """Where the tools of surfaces imported from MCP servers came from (nothing for local surfaces)."""
    lines = []
    for surface in evaluation.surfaces:
        for server in evaluation.metrics[surface.name].get("servers", ()):
            version = f" {server['server_version']}" if server.get("server_version") else ""
            lines.append(f"Surface `{surface.name}` calls the MCP server "
                         f"{_markdown(_cell(server['server'] + version, evaluation.mask))} "
                         f"({server['transport']}, protocol {server['protocol_version']}); its tools' contracts:")
            for tool, contract in server.get("tools", {}).items():
                lock = f" (lock: {contract['lock']})" if contract.get("lock") else ""
                lines.append(f"- {_markdown(_cell(tool, evaluation.mask))} {contract['contract_hash']}{lock}")
            lines.append("")
    return lines


def _mark(result: CaseResult) -> str:
    if not result.ran:
        return NOT_RUN
    return "pass" if result.passed else f"fail ({len(_failed(result))})"


def _changed_cases(evaluation: Any) -> list[str]:
    if evaluation.baseline is None:
        return ["No baseline surface: there is nothing to compare against."]
    intents = {case.case_id: _markdown(_inline(case.intent)) for case in evaluation.cases}
    lines: list[str] = []
    for candidate, comparison in evaluation.comparison.items():
        if len(evaluation.comparison) > 1:
            lines += [f"### {candidate} against {evaluation.baseline.name}", ""]
        lines += [f"Improvements (baseline fails, candidate passes): {len(comparison['improvements'])}.", ""]
        lines += [f"- `{case_id}`: {intents[case_id]}" for case_id in comparison["improvements"]]
        lines += ["", f"Regressions (baseline passes, candidate fails): {len(comparison['regressions'])}."]
        if comparison["regressions"]:
            lines += [""] + [f"- `{case_id}`: {intents[case_id]}" for case_id in comparison["regressions"]]
        lines += ["", "Unchanged: both pass: " + (", ".join(f"`{c}`" for c in comparison["both_pass"]) or "none")
                  + "; both fail: " + (", ".join(f"`{c}`" for c in comparison["both_fail"]) or "none") + ".", ""]
    return lines[:-1]


# -- tool-comparison.svg -------------------------------------------------------------------------

_HIGHER, _LOWER, _COST = "higher is better", "lower is better", "a cost: lower is cheaper, never a win"
_CHART_ROWS = (
    ("cases passed", "cases_passed", "cases", _HIGHER),
    ("actionable errors (%)", "actionable_error_rate", None, _HIGHER),
    ("unsafe side effects", "unsafe_side_effects", None, _LOWER),
    ("duplicate side effects", "duplicate_side_effects", None, _LOWER),
    ("duplicates under faults", "fault_duplicate_side_effects", None, _LOWER),
    ("secret leaks", "secret_leaks", None, _LOWER),
    ("catalog tokens (est.)", "catalog_tokens_estimate", None, _COST),
)


def _colours(evaluation: Any) -> dict[str, str]:
    colours = {candidate.name: SVG_CANDIDATE_COLOURS[number % len(SVG_CANDIDATE_COLOURS)]
               for number, candidate in enumerate(evaluation.candidates)}
    if evaluation.baseline is not None:
        colours[evaluation.baseline.name] = SVG_BASELINE_COLOUR
    return colours


def _chart_svg(evaluation: Any) -> str:
    """A horizontal grouped bar chart, one bar per surface. Each group is scaled to its own maximum,
    labelled with values, and says whether lower or higher is better; a cost is drawn as an outline, so
    a longer bar there never reads as a win."""
    metrics, surfaces, colours = evaluation.metrics, evaluation.surfaces, _colours(evaluation)
    legend_lines = -(-len(surfaces) // SVG_LEGEND_PER_LINE)
    top = SVG_TOP + (legend_lines - 1) * SVG_ROW
    group = max(len(surfaces) * SVG_ROW, 2 * SVG_ROW) + 14
    height = top + len(_CHART_ROWS) * group + 10
    width = max([SVG_WIDTH] + [SVG_LABEL_WIDTH + (number % SVG_LEGEND_PER_LINE) * SVG_LEGEND_ENTRY + 20
                               + SVG_CHARACTER_WIDTH * len(surface.label) for number, surface in enumerate(surfaces)])
    names = " vs ".join(surface.name for surface in surfaces)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f"<title>{escape(names)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for number, surface in enumerate(surfaces):
        x = SVG_LABEL_WIDTH + (number % SVG_LEGEND_PER_LINE) * SVG_LEGEND_ENTRY
        y = 14 + (number // SVG_LEGEND_PER_LINE) * SVG_ROW
        parts.append(f'<rect x="{x}" y="{y}" width="14" height="14" fill="{colours[surface.name]}"/>')
        parts.append(f'<text x="{x + 20}" y="{y + 12}">{escape(surface.label)}</text>')
    y = top
    for label, key, total_key, direction in _CHART_ROWS:
        values = {surface.name: metrics[surface.name][key] for surface in surfaces}
        if key.endswith("_rate"):
            values = {name: round(value * 100, 1) for name, value in values.items()}
        totals = [metrics[surface.name][total_key] for surface in surfaces] if total_key else []
        scale = max([1] + totals + list(values.values()))
        parts.append(f'<text x="10" y="{y + SVG_ROW - 4}">{escape(label)}</text>')
        parts.append(f'<text x="10" y="{y + 2 * SVG_ROW - 6}" font-size="11" fill="#5f6368">{escape(direction)}</text>')
        row_y = y
        for surface in surfaces:
            width = round(SVG_BAR_MAX * values[surface.name] / scale, 1) if scale else 0
            suffix = f" / {metrics[surface.name][total_key]}" if total_key else ""
            colour = colours[surface.name]
            paint = (f'fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="4 2"' if direction == _COST
                     else f'fill="{colour}"')
            parts.append(f'<rect x="{SVG_LABEL_WIDTH}" y="{row_y}" width="{width}" height="{SVG_ROW - 4}" {paint}/>')
            parts.append(f'<text x="{SVG_LABEL_WIDTH + width + 6}" y="{row_y + SVG_ROW - 8}">'
                         f"{values[surface.name]}{suffix}</text>")
            row_y += SVG_ROW
        y += group
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# -- tool-failures.md ----------------------------------------------------------------------------


def _failures_md(evaluation: Any) -> str:
    lines = ["# Tool failures", "",
             "Each failing case per surface, with every grade that differed (expected vs actual). Candidate "
             "failures fail the gate; baseline failures are expected weaknesses of the reference surface and do not.",
             ""]
    for surface in _gating_order(evaluation):
        results = evaluation.results[surface.name]
        failing = [result for result in results if result.ran and not result.passed]
        not_run = [result.case.case_id for result in results if not result.ran]
        heading = f"## {surface.label}: {len(failing)} failing case(s)"
        lines += [heading + (f", {len(not_run)} not run" if not_run else ""), ""]
        effects = effect_failures(evaluation, surface, lambda text: _markdown(_cell(text, evaluation.mask)))
        if not failing and not not_run and not effects:
            lines += ["None.", ""]
        for result in failing:
            lines += _failure_block(result, evaluation.mask)
        lines += effects
        if not_run:
            lines += ["Not run (the case has no steps for this surface): "
                      + ", ".join(f"`{case_id}`" for case_id in not_run) + ".", ""]
    return "\n".join(lines)


def _failure_block(result: CaseResult, mask: SecretMask) -> list[str]:
    case = result.case
    lines = [f"### {case.case_id}", "",
             f"{_paragraph(_inline(case.intent))} ({_markdown(display_path(case.source_path))}:{case.source_line})", "",
             "| grade | expected | actual |", "| --- | --- | --- |"]
    lines += ["| " + " | ".join(_markdown(_cell(value, mask)) for value in (grade.name, grade.expected, grade.actual))
              + " |" for grade in _failed(result)]
    return lines + [""]


# -- tool-runs.jsonl -----------------------------------------------------------------------------


def _runs_jsonl(evaluation: Any) -> str:
    lines: list[str] = []
    for surface in evaluation.surfaces:
        for result in evaluation.results[surface.name]:
            lines.extend(_run_lines(result, evaluation.mask))
    return "".join(line + "\n" for line in lines)


def _run_lines(result: CaseResult, mask: SecretMask) -> Iterable[str]:
    run = result.run
    if run is None:
        yield json_line({"kind": "case", "case_id": result.case.case_id, "surface": result.surface, "ran": False,
                          "passed": False})
        return
    for call in run.calls:
        yield json_line({
            "kind": "call",
            "case_id": run.case_id,
            "surface": run.surface,
            "call_id": call.call_id,
            "tool": call.tool,
            "arguments": mask.value(call.arguments),
            "approved": call.approved,
            "result": call.view,
            **({"faults": list(call.faults)} if call.faults else {}),
        })
    yield json_line({
        "kind": "case",
        "case_id": run.case_id,
        "surface": run.surface,
        "ran": True,
        "passed": result.passed,
        "grades": [grade.to_dict() for grade in result.grades],
        "side_effects": run.side_effects,
        "duplicate_side_effects": run.duplicate_side_effects,
        "unsafe_side_effects": result.unsafe_side_effects,
        **({"faults": list(run.faults)} if run.faults else {}),
        **({"effect_findings": [finding.to_dict() for finding in run.effect_findings]} if run.effect_findings else {}),
    })


# -- junit.xml -----------------------------------------------------------------------------------


def _junit_xml(evaluation: Any) -> str:
    """One testsuite per surface with one testcase per case, plus one testcase per gate check.

    A candidate's failures (and cases it does not run) are <failure>s. A baseline's are <skipped>
    ("expected baseline failure"), so a CI system shows them without failing the build; only the
    candidates and the gate can fail it.
    """
    suites = [_suite(f"tool-eval.{surface.name}", surface.label,
                     [_case_xml(result, surface.baseline, evaluation.mask) for result in evaluation.results[surface.name]])
              for surface in _gating_order(evaluation)]
    gate_cases = [(check.name, None if check.passed else check.detail, None) for check in evaluation.gate]
    suites.append(_suite("tool-eval.gate", "gate", gate_cases))
    tests = sum(suite[1] for suite in suites)
    failures = sum(suite[2] for suite in suites)
    skipped = sum(suite[3] for suite in suites)
    body = "".join(suite[0] for suite in suites)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites name="tool-eval" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}">\n'
            f"{body}</testsuites>\n")


def _case_xml(result: CaseResult, baseline: bool, mask: SecretMask) -> tuple[str, str | None, str | None]:
    case_id = result.case.case_id
    if not result.ran:
        return (case_id, None, NOT_RUN_REASON) if baseline else (case_id, NOT_RUN_REASON, None)
    failed = _failed(result)
    if not failed:
        return case_id, None, None
    detail = "\n".join(f"{grade.name}: expected {_cell(grade.expected, mask)}, actual {_cell(grade.actual, mask)}"
                       for grade in failed)
    if baseline:
        return case_id, None, f"expected baseline failure ({len(failed)} grade(s) differ):\n{detail}"
    return case_id, detail, None


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


def escape(text: str) -> str:
    """`&`, `<` and `>` as entities (what `xml.sax.saxutils.escape` does; that module imports
    `urllib.request`, a tenth of the time tool-eval spends importing, for nothing the reports use)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(text: str) -> str:
    """An attribute value with its quotes, as `xml.sax.saxutils.quoteattr` writes it: escaped, line
    breaks and tabs as character references, in double quotes unless only single quotes avoid `&quot;`."""
    text = escape(text).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return '"{}"'.format(text.replace('"', "&quot;"))


def _xml_characters(text: str) -> str:
    """Control characters (other than tab and newlines), lone surrogates, U+FFFE/U+FFFF would make the
    file malformed, and a CI parser would reject the whole report; they come from case files and tool
    output, so they are shown as escapes instead."""
    return NOT_XML_CHARACTER.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
