"""Faults as case steps: every marker done for real on the ticket lab, on every store it makes sense on.

The ticket lab's fault cases (tagged "fault" in datasets/tool-cases.jsonl) replayed on both surfaces:
the typed candidate leaves one effect per case whatever the fault, the wide baseline the duplicates the
fault provokes. The crash case kills a real child process (SIGKILL) after the effect, twenty times in a
row without a second effect. Bad fault steps are bad input at FILE:LINE. (PostgreSQL: see
test_lab_faults_postgres.py; declared versus observed effects: test_lab_effects.py.)
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.idempotency import InMemoryReceiptStore, ReceiptKey, ReceiptStoreUnavailable, ReservationStatus
from agent_lab.lab import Journal, Lab, LabError, evaluate
from agent_lab.lab.cases import Case, CaseFileError, load_cases
from agent_lab.lab.crash import crash_lab_problem, lab_reference
from agent_lab.lab.fault_store import FaultInjectingStore, FaultPlan
from agent_lab.lab.faults import FAULT_MARKERS, RESOLVE
from agent_lab.lab.grading import grade_run
from agent_lab.lab.replay import replay_case
from agent_lab.lab.tickets import lab as tickets
from agent_lab.lab.tool_eval import quiet_registry_logs
from agent_lab.lab.tickets.world import TicketBackend

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "datasets" / "tool-cases.jsonl"
CRASH = "fault-crash-after-effect"

# What each fault case leaves on the wide baseline: (side effects, duplicates). The typed candidate leaves
# one effect and no duplicate in every one of them.
BASELINE = {
    CRASH: (4, 3),
    "fault-receipt-write-fails": (2, 1),
    "fault-receipt-never-written": (2, 1),
    "fault-store-unavailable": (2, 1),
    "fault-lease-lapses-mid-run": (3, 2),
    "fault-clock-steps-forward": (2, 1),
    "fault-clock-steps-backward": (2, 1),
    "fault-delivered-twice-at-once": (3, 2),
    "fault-retry-while-running": (3, 2),
    "fault-resume-after-approval": (3, 2),
    "fault-resume-delivered-twice": (4, 3),
}


def fault_cases() -> list[Case]:
    return [case for case in load_cases([str(DATASET)], lab=tickets) if "fault" in case.tags]


def write_cases(directory: Path, *lines: dict) -> str:
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


class TicketFaultCasesTest(unittest.TestCase):
    """One evaluation of the ticket lab's fault cases, on both surfaces."""

    @classmethod
    def setUpClass(cls) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            lines = [line for line in DATASET.read_text(encoding="utf-8").splitlines() if '"fault"' in line]
            path = Path(tmp) / "faults.jsonl"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            cls.evaluation = evaluate([str(path)])
        cls.results = {role: {result.case.case_id: result for result in cls.evaluation.results[role]}
                       for role in ("baseline", "candidate")}

    def test_the_lab_ships_a_fault_case_for_every_marker(self) -> None:
        used = {step["do"] for case in fault_cases() for steps in case.calls.values() for step in steps if "do" in step}
        self.assertLessEqual(set(FAULT_MARKERS) | {RESOLVE}, used)
        self.assertEqual(sorted(BASELINE), sorted(case.case_id for case in fault_cases()))

    def test_the_typed_candidate_leaves_one_effect_and_no_duplicate_in_every_fault_case(self) -> None:
        for case_id, result in self.results["candidate"].items():
            with self.subTest(case=case_id):
                self.assertTrue(result.passed, [grade.to_dict() for grade in result.grades if not grade.passed])
                self.assertEqual((result.run.side_effects, result.run.duplicate_side_effects), (1, 0))

    def test_the_wide_baseline_shows_the_duplicates_each_fault_provokes(self) -> None:
        for case_id, result in self.results["baseline"].items():
            with self.subTest(case=case_id):
                self.assertFalse(result.passed)
                self.assertEqual((result.run.side_effects, result.run.duplicate_side_effects), BASELINE[case_id])

    def test_the_metrics_count_the_fault_cases_per_surface(self) -> None:
        candidate, baseline = self.evaluation.metrics["candidate"], self.evaluation.metrics["baseline"]
        self.assertEqual((candidate["fault_cases"], candidate["fault_cases_passed"],
                          candidate["fault_side_effects"], candidate["fault_duplicate_side_effects"]), (11, 11, 11, 0))
        self.assertEqual((baseline["fault_cases"], baseline["fault_cases_passed"],
                          baseline["fault_side_effects"], baseline["fault_duplicate_side_effects"]), (11, 0, 30, 19))

    def test_the_crash_kills_the_child_after_the_effect_and_the_key_says_what_the_lease_rules_say(self) -> None:
        run = self.results["candidate"][CRASH].run
        views = [call.view for call in run.calls]
        self.assertIn("crashed", views[0])  # the child died: no answer, no receipt
        self.assertEqual([view.get("error", {}).get("code") for view in views[1:]],
                         ["idempotency_in_progress", "outcome_unknown", None])  # lease alive, lapsed, resolved
        self.assertTrue(views[-1]["replayed"])
        self.assertEqual(run.faults, ("crash_after_effect (killed)", "redeliver", "lapse_lease", "redeliver",
                                      "resolve happened=true (resolved)", "redeliver"))
        baseline = self.results["baseline"][CRASH].run
        self.assertIn("crashed", baseline.calls[0].view)  # no key: killed before its answer left the process

    def test_each_delivery_says_which_fault_marker_delivered_it(self) -> None:
        twice = self.results["candidate"]["fault-delivered-twice-at-once"].run
        self.assertEqual([call.faults for call in twice.calls],
                         [("deliver_twice",), ("deliver_twice",), ("redeliver",)])
        self.assertEqual(len({call.call_id for call in twice.calls}), 1)  # one call, delivered three times

    def test_a_receipt_that_never_lands_leaves_the_key_unknown_never_free(self) -> None:
        run = self.results["candidate"]["fault-receipt-never-written"].run
        self.assertEqual(run.calls[0].view["outcome"], "succeeded")  # the caller had its answer
        self.assertEqual(run.calls[1].view["error"]["code"], "outcome_unknown")


class EveryStoreTest(unittest.TestCase):
    """The fault cases pass on the candidate on every store they make sense on (PostgreSQL elsewhere)."""

    def test_each_fault_case_passes_on_memory_and_on_sqlite(self) -> None:
        for case in fault_cases():
            for receipts in ("memory", "sqlite"):
                if receipts == "memory" and case.case_id == CRASH:
                    continue  # a crash loses an in-memory store with the process: refused at load (below)
                with self.subTest(case=case.case_id, receipts=receipts), quiet_registry_logs():
                    moved = dataclasses.replace(case, receipts=receipts)
                    run = replay_case(moved, "candidate", lab=tickets)
                    failed = [grade.to_dict() for grade in grade_run(moved, run) if not grade.passed]
                    self.assertEqual(failed, [])
                    self.assertEqual((run.side_effects, run.duplicate_side_effects), (1, 0))


class CrashTwentyTimesTest(unittest.TestCase):
    def test_the_crash_case_twenty_times_in_a_row_never_writes_twice_on_sqlite(self) -> None:
        [case] = [case for case in fault_cases() if case.case_id == CRASH]
        second_effects = []
        for _ in range(20):
            run = replay_case(case, "candidate", lab=tickets)
            self.assertIn("crashed", run.calls[0].view)
            self.assertTrue(all(grade.passed for grade in grade_run(case, run)))
            second_effects.append(run.side_effects - 1)
        self.assertEqual(second_effects, [0] * 20)


class JournalTest(unittest.TestCase):
    def test_appends_from_several_processes_all_land_once_in_order_per_process(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            context = multiprocessing.get_context("spawn")
            writers = [context.Process(target=_append_many, args=(tmp, writer)) for writer in range(4)]
            for process in writers:
                process.start()
            for process in writers:
                process.join(60)
            records = Journal(tmp, "shared").records()
        self.assertEqual(len(records), 4 * 50)
        for writer in range(4):
            self.assertEqual([record["n"] for record in records if record["writer"] == writer], list(range(50)))

    def test_a_line_a_crash_cut_short_is_skipped_and_the_next_record_starts_a_new_line(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            journal = Journal(tmp, "cut")
            journal.append({"n": 1})
            with open(journal.path, "ab") as file:
                file.write(b'{"n": 2, "note": "half a reco')
            journal.append({"n": 3})
            self.assertEqual(Journal(tmp, "cut").records(), [{"n": 1}, {"n": 3}])

    def test_the_ticket_world_on_a_directory_is_one_world_for_every_backend_opened_on_it(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            TicketBackend(directory=tmp).issue_credit("T-1001", 100, "sorry", action_id="act-1")
            other = TicketBackend(directory=tmp)
            other.record_followup("T-1002", "done", action_id="act-2")
            self.assertEqual([effect.kind for effect in other.effects], ["credit", "followup"])
            self.assertEqual(TicketBackend(directory=tmp).record_followup("T-1003", "x")["id"], "F-0002")


def _append_many(directory: str, writer: int) -> None:
    journal = Journal(directory, "shared")
    for number in range(50):
        journal.append({"writer": writer, "n": number})


class FaultInjectingStoreTest(unittest.TestCase):
    def test_refuses_exactly_the_next_n_calls_and_changes_nothing_when_it_does(self) -> None:
        plan = FaultPlan()
        store = FaultInjectingStore(InMemoryReceiptStore(), plan)
        key = ReceiptKey("acme", "tool", "k-1")
        plan.refuse("reserve", 1)
        with self.assertRaises(ReceiptStoreUnavailable):
            store.reserve(key, "f")
        self.assertIsNone(store.lookup(key))
        owner = store.reserve(key, "f").owner
        plan.refuse("complete", 2)
        for _ in range(2):
            with self.assertRaises(ReceiptStoreUnavailable):
                store.complete(key, owner, {"ok": True})
            self.assertIs(store.lookup(key).status, ReservationStatus.IN_PROGRESS)
        self.assertTrue(store.complete(key, owner, {"ok": True}))
        self.assertIs(store.lookup(key).status, ReservationStatus.REPLAY)
        self.assertEqual(plan.refused, {"reserve": 1, "complete": 2})

    def test_a_receipt_of_unknown_outcome_meets_the_same_faults_and_is_kept_until_resolved(self) -> None:
        plan = FaultPlan()
        store = FaultInjectingStore(InMemoryReceiptStore(), plan)
        key = ReceiptKey("acme", "tool", "k-1")
        owner = store.reserve(key, "f").owner
        plan.refuse("complete", 1)
        with self.assertRaises(ReceiptStoreUnavailable):
            store.complete_unknown(key, owner, {"outcome": "unknown"})
        self.assertIs(store.lookup(key).status, ReservationStatus.IN_PROGRESS)
        self.assertTrue(store.complete_unknown(key, owner, {"outcome": "unknown"}))
        self.assertEqual(store.unresolved(), [key])
        self.assertTrue(store.resolve(key, "f", record=None))
        self.assertEqual(plan.refused, {"reserve": 0, "complete": 1})


def _lab_without_directory() -> Lab:
    return Lab(name="memory-only", world=lambda: TicketBackend(), surfaces=tickets.surfaces,
               effects=TicketBackend.effect_records)


MODULE_LEVEL_LAB = _lab_without_directory()
CHILD_SECRET = "tok_child_secret_4711"


def _world_failing_in_the_crash_child(directory: str | None = None) -> TicketBackend:
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "agent_lab.lab.crash":
        raise RuntimeError(f"cannot open the vault with {CHILD_SECRET}")
    return TicketBackend(directory=directory)


# A world factory that takes a directory and keeps nothing there: the child's credit is lost to the replay.
FORGETFUL_LAB = Lab(name="forgetful", world=lambda directory=None: TicketBackend(), surfaces=tickets.surfaces,
                    effects=TicketBackend.effect_records)
FAILING_CHILD_LAB = Lab(name="failing-child", world=_world_failing_in_the_crash_child, surfaces=tickets.surfaces,
                        effects=TicketBackend.effect_records, secrets=lambda world: [CHILD_SECRET])


class BadFaultStepsTest(unittest.TestCase):
    """Fault steps a replay cannot honour are bad input at FILE:LINE, before anything runs."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def problems(self, steps: list, *, lab: Lab = tickets, **extra: object) -> str:
        line = {"case_id": "bad", "intent": "A bad fault step.", "actor": {"id": "a", "tenant": "acme",
                "permissions": ["tickets:credit"]}, "calls": steps, "expected": {
                    "outcome": "succeeded", "error_code": None, "side_effects": 1}, **extra}
        with self.assertRaises(CaseFileError) as raised:
            load_cases([write_cases(self.dir, line)], lab=lab)
        return str(raised.exception)

    CREDIT = {"tool": "issue_ticket_credit", "arguments": {"ticket_id": "T-1001", "amount_cents": 5,
                                                            "reason": "r", "action_id": "act-00000001"}}

    def test_a_crash_needs_receipts_that_outlive_the_process(self) -> None:
        text = self.problems([{"do": "crash_after_effect"}, self.CREDIT])
        self.assertIn("cases.jsonl:1: 'calls/0' crashes the process running the call", text)
        self.assertIn('"receipts": "sqlite" or "postgres"', text)

    def test_a_crash_needs_a_world_that_lives_in_files(self) -> None:
        text = self.problems([{"do": "crash_after_effect"}, self.CREDIT], lab=MODULE_LEVEL_LAB, receipts="sqlite")
        self.assertIn("world cannot outlive a process: give its world factory a `directory` keyword", text)

    def test_a_crash_needs_a_lab_a_child_process_can_import(self) -> None:
        local = Lab(name="local", world=TicketBackend, surfaces=tickets.surfaces, effects=TicketBackend.effect_records)
        self.assertIsNone(lab_reference(local))
        self.assertIn("not a module-level value", crash_lab_problem(local))
        self.assertEqual(lab_reference(tickets), "agent_lab.lab.tickets:lab")

    def test_postgres_receipts_need_a_server(self) -> None:
        with mock.patch.dict(os.environ, {"AGENT_LAB_POSTGRES_DSN": ""}):
            text = self.problems([self.CREDIT], receipts="postgres")
        self.assertIn("'receipts' is postgres: set AGENT_LAB_POSTGRES_DSN", text)

    def test_an_arming_marker_needs_a_delivery_right_after_it(self) -> None:
        self.assertIn("'calls/0' (deliver_twice) must be followed by a call or a redeliver step",
                      self.problems([{"do": "deliver_twice"}, {"do": "settle"}, self.CREDIT]))
        self.assertIn("'calls/1' (crash_after_effect) must be followed by a call or a redeliver step",
                      self.problems([self.CREDIT, {"do": "crash_after_effect"}], receipts="sqlite"))
        self.assertIn("cannot apply to the same delivery",
                      self.problems([{"do": "crash_after_effect"}, {"do": "deliver_twice"}, self.CREDIT],
                                    receipts="sqlite"))

    def test_a_redelivery_or_a_resolution_needs_an_earlier_call(self) -> None:
        self.assertIn("'calls/0' (redeliver) acts on the latest call, but no call comes before it",
                      self.problems([{"do": "redeliver"}, self.CREDIT]))
        self.assertIn("'calls/0' (resolve) acts on the latest call",
                      self.problems([{"do": "resolve", "happened": False}, self.CREDIT]))

    def test_a_marker_takes_only_its_own_parameters(self) -> None:
        self.assertIn("times", self.problems([{"do": "fail_receipt_writes"}, self.CREDIT]))
        self.assertIn("seconds", self.problems([{"do": "lapse_lease", "seconds": 5}, self.CREDIT]))
        self.assertIn("output", self.problems([{"do": "resolve", "happened": True}, self.CREDIT]))
        self.assertIn("approval", self.problems([self.CREDIT, {"do": "settle", "approval": True}]))

    def test_redeliveries_count_as_calls_in_the_expectation(self) -> None:
        line = {"case_id": "count", "intent": "Counted.", "actor": {"id": "a", "tenant": "acme", "permissions": []},
                "calls": [{"do": "deliver_twice"}, self.CREDIT, {"do": "settle"}, {"do": "redeliver"}],
                "expected": {"outcome": "rejected", "error_code": "permission_denied", "side_effects": 0,
                             "steps": [{}, {}, {}, {}]}}
        with self.assertRaises(CaseFileError) as raised:
            load_cases([write_cases(self.dir, line)], lab=tickets)
        self.assertIn("'expected/steps' describes 4 calls but", str(raised.exception))
        line["expected"]["steps"] = [{}, {}, {}]
        [case] = load_cases([write_cases(self.dir, line)], lab=tickets)
        self.assertEqual(case.call_count("candidate"), 3)

    def test_resolving_a_call_of_a_tool_without_a_key_is_bad_input_at_the_case_line(self) -> None:
        wide = {"tool": "ticket_operation", "arguments": {"operation": "get", "payload": {"ticket_id": "T-1001"}}}
        line = {"case_id": "nokey", "intent": "No key.", "actor": {"id": "a", "tenant": "acme", "permissions": []},
                "calls": {"baseline": [wide, {"do": "resolve", "happened": False}]},
                "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 0}}
        [case] = load_cases([write_cases(self.dir, line)], lab=tickets)
        with self.assertRaises(CaseFileError) as raised:
            replay_case(case, "baseline", lab=tickets)
        self.assertIn("cases.jsonl:1: 'calls/baseline/1' resolves the key of call 0, but tool 'ticket_operation' "
                      "takes no idempotency key", str(raised.exception))


class CrashChildFailureTest(unittest.TestCase):
    def test_a_lab_that_fails_in_the_child_is_a_lab_error_with_the_worlds_secrets_masked(self) -> None:
        [case] = [case for case in fault_cases() if case.case_id == CRASH]
        with self.assertRaises(LabError) as raised:
            replay_case(case, "candidate", lab=FAILING_CHILD_LAB)
        message = str(raised.exception)
        self.assertIn("world() raised RuntimeError: cannot open the vault with", message)
        self.assertNotIn(CHILD_SECRET, message)


    def test_a_world_that_takes_a_directory_but_keeps_nothing_there_is_a_broken_lab_not_a_pass(self) -> None:
        [case] = [case for case in fault_cases() if case.case_id == CRASH]
        for surface in ("candidate", "baseline"):  # killed at the receipt, and killed before the answer
            with self.subTest(surface=surface), self.assertRaises(LabError) as raised:
                replay_case(case, surface, lab=FORGETFUL_LAB)
            self.assertIn("a crash child changed its world, but the replay's world does not show it",
                          str(raised.exception))


class ClockStepTest(unittest.TestCase):
    def test_a_step_moves_the_registrys_clock_too_so_an_earlier_approval_expires(self) -> None:
        followup = {"tool": "record_ticket_followup", "arguments": {"ticket_id": "T-1001", "note": "n",
                                                                    "action_id": "act-00000042"}, "approval": True}
        line = {"case_id": "stepped", "intent": "Approval checked by a stepped clock.",
                "actor": {"id": "a", "tenant": "acme", "permissions": ["tickets:write"]},
                "calls": {"candidate": [{"do": "clock_step", "seconds": 3600}, followup, {"do": "clock_step",
                                                                                        "seconds": 600},
                                        {"do": "redeliver"}]},
                "expected": {"outcome": "rejected", "error_code": "approval_expired", "side_effects": 1}}
        with tempfile.TemporaryDirectory() as tmp:
            [case] = load_cases([write_cases(Path(tmp), line)], lab=tickets)
        run = replay_case(case, "candidate", lab=tickets)
        # issued by the stepped clock, so valid at first; 600 s later (ttl 300 s) the same approval has expired
        self.assertEqual([call.view.get("error", {}).get("code") for call in run.calls], [None, "approval_expired"])
        self.assertEqual(run.faults, ("clock_step +3600 s", "clock_step +600 s", "redeliver"))


if __name__ == "__main__":
    unittest.main()
