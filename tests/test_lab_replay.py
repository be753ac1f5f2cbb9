"""Replaying the dataset: the candidate passes every case, the baseline fails most, grading catches lies."""

from __future__ import annotations

import json
import tempfile
import threading
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.calls import ToolCall
from agent_lab.lab.backend import TicketBackend
from agent_lab.lab.baseline import build_baseline_registry
from agent_lab.lab.candidate import build_candidate_registry, candidate_specs
from agent_lab.lab.cases import CaseFileError, load_cases
from agent_lab.lab.grading import case_passed, grade_run
from agent_lab.lab import replay
from agent_lab.lab.replay import replay_case
from agent_lab.lab.tool_eval import evaluate

REPO = Path(__file__).resolve().parent.parent
DATASET = str(REPO / "datasets" / "tool-cases.jsonl")

REQUIRED_CASES = {
    # the seed's eleven
    "read-ticket", "preview-before-write", "write-needs-approval", "invalid-arguments", "permission-boundary",
    "duplicate-action", "idempotency-conflict", "transient-timeout", "bounded-list", "ticket-not-found",
    "invalid-cursor",
    # issue 3
    "unknown-tool-near-miss", "arguments-not-an-object", "undeclared-extra-property", "boolean-for-integer",
    "integral-float", "handler-crash-contained", "output-breaks-schema", "replay-identical-receipt",
    # issue 4
    "approval-for-other-arguments", "approval-expired", "conditional-approval", "cross-tenant-read",
    "write-timeout-unknown", "duplicate-while-in-flight", "replay-after-restart", "output-too-large",
    "forged-cursor", "secret-field-masked",
}


class DatasetReplayTest(unittest.TestCase):
    """One full evaluation of the dataset, shared by the tests below (it takes a couple of seconds)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.evaluation = evaluate([DATASET])
        cls.by_id = {  # keyed by role: the ticket lab has one baseline and one candidate
            role: {result.case.case_id: result for result in cls.evaluation.results[role]}
            for role in ("baseline", "candidate")
        }

    def failing(self, strategy: str) -> list[str]:
        return [case_id for case_id, result in self.by_id[strategy].items() if not result.passed]

    def test_the_dataset_holds_every_required_case(self) -> None:
        self.assertLessEqual(REQUIRED_CASES, set(self.by_id["candidate"]))

    def test_the_candidate_passes_every_case(self) -> None:
        failures = {
            case_id: [grade.to_dict() for grade in self.by_id["candidate"][case_id].grades if not grade.passed]
            for case_id in self.failing("candidate")
        }
        self.assertEqual(failures, {})

    def test_the_baseline_fails_most_cases(self) -> None:
        self.assertGreater(len(self.failing("baseline")), len(self.by_id["baseline"]) * 3 // 4)

    def test_the_gate_passes_with_no_unsafe_or_duplicate_candidate_effects(self) -> None:
        candidate = self.evaluation.metrics["candidate"]
        self.assertTrue(self.evaluation.gate_passed)
        self.assertEqual((candidate["unsafe_side_effects"], candidate["duplicate_side_effects"]), (0, 0))

    def test_the_baseline_shows_the_unsafe_effects_the_candidate_prevents(self) -> None:
        baseline = self.evaluation.metrics["baseline"]
        self.assertGreater(baseline["unsafe_side_effects"], 0)
        self.assertGreater(baseline["duplicate_side_effects"], 0)
        self.assertGreater(baseline["secret_leaks"], 0)
        self.assertEqual(self.by_id["baseline"]["duplicate-action"].run.duplicate_side_effects, 1)

    def test_no_candidate_result_shows_a_customer_email(self) -> None:
        secrets = TicketBackend().secret_values()
        views = json.dumps([call.view for result in self.by_id["candidate"].values() for call in result.run.calls])
        self.assertEqual([secret for secret in secrets if secret in views], [])

    def test_another_tenants_ticket_answers_exactly_like_a_missing_one(self) -> None:
        calls = self.by_id["candidate"]["cross-tenant-read"].run.calls
        self.assertEqual(calls[0].view, calls[1].view)
        self.assertEqual(calls[1].view["error"]["code"], "not_found")

    def test_call_ids_name_the_case_the_strategy_and_the_call(self) -> None:
        calls = self.by_id["candidate"]["duplicate-while-in-flight"].run.calls
        self.assertEqual([call.call_id for call in calls],
                         [f"duplicate-while-in-flight:typed-registry-v2:{n}" for n in range(3)])


    def test_timing_cases_do_not_race_the_machine_a_held_write_lands_after_the_calls_answered(self) -> None:
        candidate = self.by_id["candidate"]["duplicate-while-in-flight"].run.calls
        baseline = self.by_id["baseline"]["duplicate-while-in-flight"].run.calls
        self.assertEqual(candidate[0].view["error"]["code"], "tool_timeout")  # held past its deadline, every run
        self.assertEqual([call.view["output"]["id"] for call in baseline], ["F-0002", "F-0001", "F-0003"])


class HeldBackendOperationsTest(unittest.TestCase):
    """Slow backend operations end when the lab releases them, so cases do not depend on machine speed."""

    def test_only_the_first_slow_writes_are_held_and_they_land_when_released(self) -> None:
        backend = TicketBackend(write_delay_ms=60_000, slow_writes=1)
        answers: list[dict] = []
        held = threading.Thread(target=lambda: answers.append(backend.record_followup("T-1001", "held")), daemon=True)
        held.start()
        self.assertTrue(backend.wait_write_started())
        self.assertEqual(backend.record_followup("T-1001", "not held")["id"], "F-0001")
        self.assertEqual((backend.effect_count, answers), (1, []))  # the held write has not landed
        backend.release_held()
        held.join(10)
        self.assertEqual([answer["id"] for answer in answers], ["F-0002"])
        self.assertEqual(backend.effect_count, 2)

    def test_a_release_ends_a_held_lookup_and_later_lookups_are_not_held(self) -> None:
        backend = TicketBackend(lookup_delay_ms=60_000, slow_lookups=1)
        answers: list[object] = []
        held = threading.Thread(target=lambda: answers.append(backend.lookup_live("T-1001")), daemon=True)
        held.start()
        self.assertEqual(backend.lookup_live("T-1002")["id"], "T-1002")  # the second lookup is not slow
        backend.release_held()
        held.join(10)
        self.assertEqual([answer["id"] for answer in answers], ["T-1001"])


class AwaitWriteStartedTest(unittest.TestCase):
    def test_the_marker_waits_for_the_background_calls_own_write_not_an_earlier_one(self) -> None:
        write = {"tool": "ticket_operation", "arguments": {"operation": "record_followup",
                                                           "payload": {"ticket_id": "T-1001", "note": "n"}}}
        steps = [write, {**write, "background": True}, {"do": "await_write_started"}, write]
        case = {"case_id": "await", "intent": "Wait for the background write.", "actor": {
                    "id": "a", "tenant": "acme", "permissions": ["tickets:write"]},
                "calls": {"baseline": steps, "candidate": steps}, "expected": {"outcome": "succeeded", "side_effects": 3}}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "await.jsonl"
            path.write_text(json.dumps(case) + "\n", encoding="utf-8")
            [loaded] = load_cases([str(path)])
        awaited: list[int] = []
        real_wait = replay._Session._wait_for_writes

        def spy(session: object, count: int) -> None:
            awaited.append(count)
            real_wait(session, count)

        with mock.patch.object(replay._Session, "_wait_for_writes", spy):
            run = replay_case(loaded, "baseline")
        self.assertEqual(awaited, [2])  # the sync write before it had already started one
        self.assertEqual(run.side_effects, 3)


class UnansweredCallTest(unittest.TestCase):
    def test_a_background_call_that_never_returns_is_graded_as_unanswered_not_shifted_or_crashing(self) -> None:
        steps = [{"tool": "get_ticket", "arguments": {"ticket_id": "T-1001"}, "background": True},
                 {"tool": "get_ticket", "arguments": {"ticket_id": "T-1002"}}]
        case = {"case_id": "stuck", "intent": "A call that never returns.", "actor": {
                    "id": "a", "tenant": "acme", "permissions": ["tickets:read"]},
                "calls": {"baseline": steps[1:], "candidate": steps},
                "expected": {"outcome": "succeeded", "side_effects": 0, "steps": [{"outcome": "succeeded"}]}}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stuck.jsonl"
            path.write_text(json.dumps(case) + "\n", encoding="utf-8")
            [loaded] = load_cases([str(path)])
        never = threading.Event()
        real_invoke = replay._Session._invoke

        def first_call_never_returns(session: object, registry: object, call: ToolCall, *args: object) -> object:
            if call.call_id == "stuck:typed-registry-v2:0":
                never.wait(30)
                raise SystemExit  # the thread ends here without a result (a background thread's exit)
            return real_invoke(session, registry, call, *args)

        with mock.patch.object(replay._Session, "_invoke", first_call_never_returns), \
                mock.patch.object(replay, "WAIT_LIMIT_S", 0.01):
            run = replay_case(loaded, "candidate")
        never.set()
        self.assertEqual([call.call_id for call in run.calls],
                         ["stuck:typed-registry-v2:0", "stuck:typed-registry-v2:1"])
        self.assertEqual(run.calls[1].view["output"]["ticket"]["id"], "T-1002")
        failed = [grade.name for grade in grade_run(loaded, run) if not grade.passed]
        self.assertEqual(failed, ["call[0].outcome"])


class ShowsSecretTest(unittest.TestCase):
    """A view shows a secret when any string or member name holds it, however JSON would spell it."""

    def test_a_secret_in_a_string_or_a_member_name_is_seen(self) -> None:
        secret = "customer.1001@acme-mail.example"
        for view in ({"output": {"email": secret}}, {"output": [f"mail {secret} now"]}, {secret: 1}):
            self.assertTrue(replay.shows_secret(view, frozenset({secret})), view)
        self.assertFalse(replay.shows_secret({"output": {"email": "[redacted]"}}, frozenset({secret})))

    def test_a_secret_that_json_escapes_is_still_seen_in_a_string(self) -> None:
        for secret in ('pass"word-1', "back\\slash-22", "tab\there-333", "nul\x00here-44"):
            view = {"output": {"note": f"x{secret}y"}, f"k{secret}": 0}
            self.assertTrue(replay.shows_secret(view, frozenset({secret, "unrelated-secret"})), secret)
            self.assertFalse(replay.shows_secret({"output": "nothing here"}, frozenset({secret})), secret)


class GradingTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def load(self, case: dict) -> object:
        path = self.dir / "case.jsonl"
        path.write_text(json.dumps(case) + "\n", encoding="utf-8")
        [loaded] = load_cases([str(path)])
        return loaded

    def dataset_case(self, case_id: str) -> dict:
        for line in Path(DATASET).read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            if case["case_id"] == case_id:
                return case
        raise AssertionError(f"no case {case_id} in the dataset")

    def test_a_wrong_expectation_fails_and_the_grade_says_what_differed(self) -> None:
        case = self.dataset_case("read-ticket")
        case["expected"] = {"outcome": "rejected", "error_code": "not_found", "side_effects": 1}
        loaded = self.load(case)
        grades = grade_run(loaded, replay_case(loaded, "candidate"))
        failed = {grade.name: (grade.expected, grade.actual) for grade in grades if not grade.passed}
        self.assertFalse(case_passed(grades))
        self.assertEqual(failed, {
            "final.outcome": ("rejected", "succeeded"),
            "final.error_code": ("not_found", None),
            "side_effects": (1, 0),
        })

    def test_a_wrong_output_check_fails(self) -> None:
        case = self.dataset_case("bounded-list")
        case["expected"]["checks"] = [{"path": "/output/items", "length": 25}]
        loaded = self.load(case)
        grades = grade_run(loaded, replay_case(loaded, "candidate"))
        [failed] = [grade for grade in grades if not grade.passed]
        self.assertEqual((failed.name, failed.expected, failed.actual),
                         ("final.check[0] length at /output/items", 25, 10))

    def test_a_not_contains_check_at_a_path_that_leads_nowhere_fails(self) -> None:
        case = self.dataset_case("read-ticket")
        case["expected"]["candidate"]["checks"] = [{"path": "/error/message", "not_contains": "NoneType"}]
        loaded = self.load(case)
        grades = grade_run(loaded, replay_case(loaded, "candidate"))
        [failed] = [grade for grade in grades if not grade.passed]
        self.assertEqual((failed.name, failed.actual), ("final.check[0] not_contains at /error/message", "(absent)"))

    def test_a_case_expecting_1_for_a_boolean_is_refused_before_grading(self) -> None:
        case = self.dataset_case("duplicate-action")
        case["expected"]["replayed"] = 1
        with self.assertRaises(CaseFileError):
            self.load(case)

    def test_each_replay_starts_from_a_fresh_backend(self) -> None:
        loaded = self.load(self.dataset_case("duplicate-action"))
        first, second = replay_case(loaded, "baseline"), replay_case(loaded, "baseline")
        self.assertEqual((first.side_effects, second.side_effects), (2, 2))
        self.assertEqual(first.calls[0].view, second.calls[0].view)


class LabEntryPointsTest(unittest.TestCase):
    def test_every_candidate_tool_has_a_closed_input_schema_and_an_output_schema(self) -> None:
        for spec in candidate_specs():
            with self.subTest(tool=spec.name):
                self.assertIs(spec.input_schema.get("additionalProperties"), False)
                self.assertIsNotNone(spec.output_schema)
                self.assertEqual(spec.warnings, ())

    def test_the_baseline_is_one_wide_tool_on_the_same_registry(self) -> None:
        with build_baseline_registry(TicketBackend()) as baseline, build_candidate_registry(TicketBackend()) as candidate:
            self.assertEqual(baseline.names(), ["ticket_operation"])
            self.assertIn("record_ticket_followup", candidate.names())
            self.assertTrue(baseline.spec("ticket_operation").warnings)


if __name__ == "__main__":
    unittest.main()
