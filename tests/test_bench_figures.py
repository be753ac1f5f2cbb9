"""`bench --json` / `bench --compare`: figures in one stable shape, and regressions named.

Nothing here times anything: the sections are stand-ins that report fixed numbers."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

import agent_lab.bench as bench
from agent_lab.bench import _figures


def _stand_in_section(name: str, figures: list[dict]) -> str:
    """A bench section module that reports `figures` (keyword arguments of `report`)."""
    module = types.ModuleType(name)

    def main(argv):
        for figure in figures:
            _figures.report(**figure)
        return 0

    module.main = main  # type: ignore[attr-defined]
    sys.modules[name] = module
    return name


def _run_bench(argv: list[str], figures: list[dict]) -> tuple[int, str]:
    section = _stand_in_section("agent_lab_test_section", figures)
    output = io.StringIO()
    with mock.patch.dict(bench.SECTIONS, {"stand-in": section}, clear=True), contextlib.redirect_stdout(output):
        status = bench.main(argv)
    return status, output.getvalue()


class ReportTest(unittest.TestCase):
    def tearDown(self) -> None:
        del _figures.FIGURES[:]

    def test_the_ratio_is_the_median_of_per_round_ratios_and_the_spread_their_range(self) -> None:
        figure = _figures.report("x.read", unit="s/call", ours=[2.0, 3.0, 9.0], peer=[1.0, 1.0, 3.0], target="<= 1.3")
        self.assertEqual(figure.ratio, 3.0)  # ratios 2, 3, 3
        self.assertEqual(figure.spread, 1.0)
        self.assertEqual((figure.ours, figure.peer, figure.rounds), (3.0, 1.0, 3))
        self.assertIs(_figures.FIGURES[-1], figure)

    def test_a_figure_without_a_peer_spreads_over_its_own_values(self) -> None:
        figure = _figures.report("x.bytes", unit="bytes", ours=[100, 140, 120])
        self.assertIsNone(figure.ratio)
        self.assertEqual((figure.ours, figure.spread), (120.0, 40.0))

    def test_rounds_of_different_lengths_or_none_are_refused(self) -> None:
        with self.assertRaises(ValueError):
            _figures.report("x", unit="s", ours=[1.0, 2.0], peer=[1.0])
        with self.assertRaises(ValueError):
            _figures.report("x", unit="s", ours=[])

    def test_interleave_rotates_which_measurement_goes_first(self) -> None:
        order: list[str] = []
        values = _figures.interleave({"a": lambda: order.append("a") or 1.0,
                                      "b": lambda: order.append("b") or 2.0}, rounds=4)
        self.assertEqual(order, ["a", "b", "b", "a", "a", "b", "b", "a"])
        self.assertEqual(values, {"a": [1.0] * 4, "b": [2.0] * 4})


class JsonAndCompareTest(unittest.TestCase):
    FIGURES = [
        {"name": "runtime.read_vs_peer", "unit": "s/call", "ours": [2.0, 2.0], "peer": [1.0, 1.0], "target": "<= 1.3"},
        {"name": "scale.memory_per_tool", "unit": "bytes", "ours": [4000, 4000], "target": "<= 8192"},
        {"name": "stores.throughput", "unit": "receipts/s", "ours": [100, 100], "better": "higher"},
    ]

    def setUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.path = os.path.join(self.directory.name, "figures.json")

    def _write(self, figures: list[dict]) -> None:
        status, _ = _run_bench(["--json", self.path], figures)
        self.assertEqual(status, 0)

    def test_json_holds_every_figure_sorted_by_name_in_the_stable_shape(self) -> None:
        self._write(self.FIGURES)
        with open(self.path, encoding="utf-8") as file:
            document = json.load(file)
        self.assertEqual(document["format"], "agent-lab-bench/1")
        names = [entry["name"] for entry in document["figures"]]
        self.assertEqual(names, sorted(figure["name"] for figure in self.FIGURES))
        for entry in document["figures"]:
            self.assertLessEqual({"name", "unit", "ours", "peer", "ratio", "spread"}, set(entry))
        self.assertEqual(document["figures"][0]["ratio"], 2.0)

    def test_a_malformed_figures_file_is_one_line_not_a_traceback(self) -> None:
        # A "figures" that is no list, a rounds of 1e400, an ours of 10**400: each raised out of read_figures.
        for figures, said in (("5", '"figures" must be a list'),
                              ('[{"name": "a", "unit": "s", "ours": 1, "rounds": 1e400}]', "figure 1 lacks"),
                              ('[{"name": "a", "unit": "s", "ours": 1' + "0" * 400 + "}]", "figure 1 lacks")):
            with self.subTest(figures=figures[:40]):
                with open(self.path, "w", encoding="utf-8") as file:
                    file.write('{"format": "%s", "figures": %s}' % (_figures.FIGURES_FORMAT, figures))
                with self.assertRaises(ValueError) as refused:
                    _figures.read_figures(self.path)
                self.assertIn(said, str(refused.exception))

    def test_compare_passes_when_nothing_got_worse(self) -> None:
        self._write(self.FIGURES)
        status, output = _run_bench(["--compare", self.path], self.FIGURES)
        self.assertEqual(status, 0, output)
        self.assertIn("0 figure(s) worse", output)

    def test_compare_names_each_figure_that_got_worse_beyond_the_threshold(self) -> None:
        self._write(self.FIGURES)
        worse = [
            {**self.FIGURES[0], "ours": [3.0, 3.0]},      # ratio 2 -> 3: 50% worse
            {**self.FIGURES[1], "ours": [4200, 4200]},    # 5% worse: under the 10% threshold
            {**self.FIGURES[2], "ours": [50, 50]},        # half the throughput: worse, though lower
        ]
        status, output = _run_bench(["--compare", self.path], worse)
        self.assertEqual(status, 1, output)
        self.assertIn("runtime.read_vs_peer: 2 -> 3 (+50% worse)", output)
        self.assertIn("stores.throughput", output)
        self.assertNotIn("scale.memory_per_tool:", output)

    def test_a_change_inside_the_runs_spread_is_not_a_regression(self) -> None:
        noisy = [{**self.FIGURES[1], "ours": [2000, 6000]}]  # median 4000, spread 4000
        self._write(noisy)
        status, output = _run_bench(["--compare", self.path], [{**noisy[0], "ours": [3000, 7000]}])
        self.assertEqual(status, 0, output)

    def test_every_figure_that_misses_its_target_is_marked_and_named(self) -> None:
        status, output = _run_bench([], self.FIGURES)  # ratio 2.0 against <= 1.3: missed; 4000 <= 8192: met
        self.assertEqual(status, 0, output)  # timings are noisy: marked, not failed
        rows = {line.split()[0]: line for line in output.splitlines() if line.startswith(("runtime.", "scale.", "stores."))}
        self.assertTrue(rows["runtime.read_vs_peer"].endswith("<= 1.3   MISSED"), rows)
        self.assertTrue(rows["scale.memory_per_tool"].endswith("met"), rows)
        self.assertTrue(rows["stores.throughput"].endswith("-"), rows)
        self.assertIn("1 of 2 figures MISS their target: runtime.read_vs_peer", output)
        self._write(self.FIGURES)
        with open(self.path, encoding="utf-8") as file:
            entries = {entry["name"]: entry["meets_target"] for entry in json.load(file)["figures"]}
        self.assertEqual(entries, {"runtime.read_vs_peer": False, "scale.memory_per_tool": True,
                                   "stores.throughput": None})

    def test_targets_are_read_as_comparisons_of_the_compared_number(self) -> None:
        for target, ours, meets in (("<= 1.3", 1.3, True), ("< 1.3", 1.3, False), (">= 2", 2.0, True),
                                    ("> 2", 2.5, True), ("> 2", 1.0, False), ("<= 8192", 9000.0, False),
                                    ("about 1", 1.0, None), (None, 1.0, None)):
            with self.subTest(target=target, ours=ours):
                self.assertIs(_figures.Figure(name="x", unit="u", ours=ours, target=target).meets_target, meets)

    def test_a_file_that_is_not_bench_json_is_exit_2_with_one_line(self) -> None:
        with open(self.path, "w", encoding="utf-8") as file:
            file.write('{"figures": []}')
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as stop:
            _run_bench(["--compare", self.path], self.FIGURES)
        self.assertEqual(stop.exception.code, 2)
        self.assertIn("not a `bench --json` file", stderr.getvalue())
        self.assertNotIn("Traceback", stderr.getvalue())

    def test_json_into_a_missing_directory_is_exit_2_on_stderr_and_writes_nothing(self) -> None:
        target = os.path.join(self.directory.name, "missing", "figures.json")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status, output = _run_bench(["--json", target], self.FIGURES)
        self.assertEqual(status, 2)
        self.assertIn("cannot write", stderr.getvalue())  # a script reading the figures from stdout never gets it
        self.assertNotIn("cannot write", output)
        self.assertFalse(os.path.exists(os.path.dirname(target)))


class OnlyTest(unittest.TestCase):
    """`--only` names the sections to run: repeated, or comma-separated as the issues write it."""

    def run_sections(self, argv: list[str]) -> list[str]:
        ran: list[str] = []
        sections = {}
        for name in ("runtime", "names", "gate"):
            module = types.ModuleType(f"agent_lab_test_{name}")
            module.main = (lambda label: lambda rest: ran.append(label) or 0)(name)  # type: ignore[attr-defined]
            sys.modules[module.__name__] = module
            self.addCleanup(sys.modules.pop, module.__name__, None)
            sections[name] = module.__name__
        with mock.patch.dict(bench.SECTIONS, sections, clear=True), contextlib.redirect_stdout(io.StringIO()):
            bench.main(argv)
        return ran

    def test_a_comma_list_runs_those_sections_in_its_order(self) -> None:
        self.assertEqual(self.run_sections(["--only", "gate,runtime"]), ["gate", "runtime"])

    def test_repeated_and_listed_sections_add_up_and_each_runs_once(self) -> None:
        self.assertEqual(self.run_sections(["--only", "names", "--only", "runtime,names"]), ["names", "runtime"])

    def test_without_only_every_section_runs(self) -> None:
        self.assertEqual(self.run_sections([]), ["runtime", "names", "gate"])

    def test_an_unknown_section_is_exit_2_naming_it(self) -> None:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as stop:
            self.run_sections(["--only", "runtime,nope"])
        self.assertEqual(stop.exception.code, 2)
        self.assertIn("no section 'nope'", stderr.getvalue())


if __name__ == "__main__":
    unittest.main()
