"""The names bench runs end to end (its figures are printed, never asserted)."""

from __future__ import annotations

import contextlib
import io
import unittest

from agent_lab.bench import SECTIONS, _figures, names_bench


class NamesBenchSmokeTest(unittest.TestCase):
    def test_the_names_section_is_part_of_the_bench(self) -> None:
        self.assertEqual(SECTIONS["names"], "agent_lab.bench.names_bench")

    def test_a_quick_run_reports_the_index_and_the_scan(self) -> None:
        del _figures.FIGURES[:]
        self.addCleanup(_figures.FIGURES.clear)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = names_bench.main(["--quick"])
        self.assertEqual(status, 0)
        self.assertIn("difflib scan of every visible tool", printed.getvalue())
        reported = {figure.name: figure for figure in _figures.FIGURES}
        self.assertEqual(sorted(reported), ["scale.unknown_name_ms_10k", "scale.unknown_name_vs_scan_10k"])
        self.assertEqual(reported["scale.unknown_name_ms_10k"].target, "<= 1")
        self.assertIsNotNone(reported["scale.unknown_name_vs_scan_10k"].ratio)

    def test_the_misspellings_are_never_registered_names(self) -> None:
        names = names_bench.tool_names(500)
        self.assertEqual(len(set(names)), 500)
        self.assertFalse(set(names_bench.misspell(names, 100)) & set(names))


if __name__ == "__main__":
    unittest.main()
