"""The runtime bench runs end to end (its figures are printed, never asserted)."""

from __future__ import annotations

import contextlib
import io
import unittest

from agent_lab.bench import runtime_bench


class RuntimeBenchSmokeTest(unittest.TestCase):
    def test_quick_run_prints_every_measurement_and_exits_zero(self) -> None:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = runtime_bench.main(["--quick", "--rounds", "1"])
        self.assertEqual(status, 0)
        for label in ("handler called directly", "run_inline=True", "worker pool + deadline",
                      "replay a receipt (SQLite store)"):
            self.assertIn(label, printed.getvalue())


if __name__ == "__main__":
    unittest.main()
