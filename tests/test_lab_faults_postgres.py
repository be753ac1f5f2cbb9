"""The ticket lab's fault cases with their receipts on a real PostgreSQL server.

Each fault case replayed on the typed candidate with `"receipts": "postgres"` (a schema of its own per
replay, on the server AGENT_LAB_TEST_POSTGRES_DSN names, handed to the lab as AGENT_LAB_POSTGRES_DSN)
leaves one effect; the crash case, a child process SIGKILLed after the effect with its connections cut,
runs twenty times in a row without a second effect. Skipped with the reason without a server or
psycopg; .ci/run starts one and fails if these skip.
"""

from __future__ import annotations

import dataclasses
import os
import unittest
from unittest import mock

from agent_lab.lab.grading import grade_run
from agent_lab.lab.replay import replay_case
from agent_lab.lab.tickets import lab as tickets
from agent_lab.lab.tool_eval import quiet_registry_logs
from postgres_support import DSN, SKIP_REASON
from test_lab_faults import BASELINE, CRASH, fault_cases


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class PostgresFaultCasesTest(unittest.TestCase):
    def setUp(self) -> None:
        patch = mock.patch.dict(os.environ, {"AGENT_LAB_POSTGRES_DSN": DSN})
        patch.start()
        self.addCleanup(patch.stop)
        logs = quiet_registry_logs()
        logs.__enter__()
        self.addCleanup(logs.__exit__, None, None, None)

    def replay(self, case, surface: str):  # type: ignore[no-untyped-def]
        moved = dataclasses.replace(case, receipts="postgres")
        run = replay_case(moved, surface, lab=tickets)
        return run, [grade.to_dict() for grade in grade_run(moved, run) if not grade.passed]

    def test_every_fault_case_leaves_one_effect_on_the_candidate(self) -> None:
        for case in fault_cases():
            with self.subTest(case=case.case_id):
                run, failed = self.replay(case, "candidate")
                self.assertEqual(failed, [])
                self.assertEqual((run.side_effects, run.duplicate_side_effects), (1, 0))

    def test_the_baseline_shows_the_same_duplicates_as_on_sqlite(self) -> None:
        for case in fault_cases():
            with self.subTest(case=case.case_id):
                run, _ = self.replay(case, "baseline")
                self.assertEqual((run.side_effects, run.duplicate_side_effects), BASELINE[case.case_id])

    def test_the_crash_case_twenty_times_in_a_row_never_writes_twice(self) -> None:
        [case] = [case for case in fault_cases() if case.case_id == CRASH]
        second_effects = []
        for _ in range(20):
            run, failed = self.replay(case, "candidate")
            self.assertIn("crashed", run.calls[0].view)
            self.assertEqual(failed, [])
            second_effects.append(run.side_effects - 1)
        self.assertEqual(second_effects, [0] * 20)

    def test_each_replay_drops_its_schema(self) -> None:
        import psycopg

        [case] = [case for case in fault_cases() if case.case_id == "fault-store-unavailable"]
        self.replay(case, "candidate")
        with psycopg.connect(DSN, autocommit=True) as admin:
            left = admin.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'agent_lab_case_%'").fetchone()
        self.assertEqual(left[0], 0)


if __name__ == "__main__":
    unittest.main()
