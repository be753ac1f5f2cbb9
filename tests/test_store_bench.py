"""The store bench runs end to end (its figures are printed, never asserted): SQLite always, PostgreSQL
when a server is configured (tests/postgres_support.py), else it says it skipped PostgreSQL and why."""

from __future__ import annotations

import contextlib
import io
import unittest

from agent_lab.bench import SECTIONS, _figures, store_bench

from postgres_support import DSN, SKIP_REASON


class StoreBenchSmokeTest(unittest.TestCase):
    def run_bench(self, *argv: str) -> str:
        printed = io.StringIO()
        del _figures.FIGURES[:]
        self.addCleanup(_figures.FIGURES.clear)
        with contextlib.redirect_stdout(printed):
            status = store_bench.main(["--quick", "--writers", "2", "--processes", "2", *argv])
        self.assertEqual(status, 0)
        return printed.getvalue()

    def test_the_stores_section_is_part_of_the_bench(self) -> None:
        self.assertEqual(SECTIONS["stores"], "agent_lab.bench.store_bench")

    def test_a_quick_run_compares_the_sqlite_store_with_raw_sql_in_one_and_several_processes(self) -> None:
        printed = self.run_bench("--postgres-dsn", "")
        for label in ("raw sqlite3", "SqliteReceiptStore", "1 process", "2 processes"):
            self.assertIn(label, printed)
        reported = {figure.name: figure for figure in _figures.FIGURES}
        self.assertEqual(sorted(reported), ["stores.sqlite_1proc_vs_raw", "stores.sqlite_2proc_vs_raw"])
        for figure in reported.values():
            self.assertEqual((figure.unit, figure.rounds, figure.target), ("s/receipt", 1, "<= 1.25"))
            assert figure.peer is not None and figure.ratio is not None
            self.assertGreater(figure.ours, 0)
            self.assertAlmostEqual(figure.ratio, figure.ours / figure.peer)
        self.assertIn("PostgreSQL receipts: skipped (no server", printed)

    @unittest.skipIf(SKIP_REASON, SKIP_REASON)
    def test_a_quick_run_compares_the_postgres_store_with_raw_sql_when_a_server_is_given(self) -> None:
        printed = self.run_bench("--postgres-dsn", DSN)
        for label in ("raw psycopg", "PostgresReceiptStore", "1 writer", "2 writers", "synchronous_commit=",
                      "isolation"):
            self.assertIn(label, printed)
        reported = {figure.name: figure for figure in _figures.FIGURES if figure.name.startswith("stores.postgres")}
        self.assertEqual(sorted(reported), ["stores.postgres_1writer_vs_raw", "stores.postgres_2writers_vs_raw"])
        for figure in reported.values():
            self.assertEqual((figure.unit, figure.rounds, figure.target, figure.better),
                             ("receipts/s", 1, ">= 0.7", "higher"))
            assert figure.peer is not None and figure.ratio is not None
            self.assertGreater(figure.ours, 0)
            self.assertAlmostEqual(figure.ratio, figure.ours / figure.peer)
            self.assertIn(figure.verdict, ("met", "MISSED"))

if __name__ == "__main__":
    unittest.main()
