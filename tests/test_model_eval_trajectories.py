"""Trajectory constraints and budgets in model-eval tasks: graded per trial like the other checks, each
failure named by its kind, and a budget gone over reported as over budget, never as a silent pass."""

from __future__ import annotations

import json
import unittest
from typing import Any

from agent_lab.modeleval.cassettes import CASSETTE_FILE
from agent_lab.modeleval.loopback import LoopbackModelServer
from agent_lab.modeleval.models import UrllibTransport
from agent_lab.modeleval.agent import CallRecord
from agent_lab.modeleval.runner import evaluate_model, run_model_eval
from agent_lab.modeleval.trajectory import trajectory_problem

from model_eval_fixtures import LAB, TYPED, TempDirMixin, abstain_task, get_task, write_tasks
from model_versions import upgrade_tasks, version_one
from test_model_eval_runs import run

VERSIONS = {"one": "python:model_versions:version_one", "two": "python:model_versions:version_two"}


def task_named(task_id: str, **surface: Any) -> dict[str, Any]:
    """An upgrade task with more expectations on the typed surface."""
    task = next(t for t in upgrade_tasks() if t["task_id"] == task_id)
    task["surfaces"][TYPED].update(surface)
    return task


def check(result: Any, prefix: str) -> Any:
    return next(c for c in result.grade.checks if c.name.startswith(prefix))


class TrajectoryConstraintsTest(TempDirMixin, unittest.TestCase):
    def evaluate(self, version: str, *tasks: dict[str, Any]) -> dict[str, Any]:
        path = write_tasks(self.make_dir(), list(tasks))
        evaluation = evaluate_model(LAB, [path], model=VERSIONS[version], repeats=1)
        return {result.task.task_id: result for result in evaluation.results[TYPED]}

    def test_each_match_mode_holds_for_the_baseline_order_and_fails_as_a_trajectory_check_when_it_changes(self) -> None:
        ticket, thread = ({"tool": tool, "arguments": {"/ticket_id": {"exact": "T-1004"}}}
                          for tool in ("get_ticket", "get_ticket_thread"))
        # version one calls get_ticket then get_ticket_thread; version two the other way round
        expected = [  # mode, listed calls, (passes for version one, passes for version two)
            ("strict", (ticket, thread), (True, False)),
            ("unordered", (thread, ticket), (True, True)),
            ("unordered", (ticket,), (False, False)),  # a call not listed
            ("subset", (thread,), (True, True)),  # among others
            ("subset", (ticket, ticket), (False, False)),  # each listed call needs its own proposal
            ("superset", (ticket, thread, {"tool": "list_tickets"}), (True, True)),  # nothing but these
            ("superset", (ticket,), (False, False)),
        ]
        for mode, calls, wanted in expected:
            with self.subTest(mode=mode, calls=[c["tool"] for c in calls]):
                task = task_named("status-and-thread", trajectory={"match": mode, "calls": list(calls)})
                got = tuple(self.evaluate(version, task)["status-and-thread"].passed for version in ("one", "two"))
                self.assertEqual(got, wanted)
                failing = self.evaluate("two" if wanted[0] else "one", task)["status-and-thread"]
                if False in wanted:
                    found = check(failing, "trajectory")
                    self.assertEqual((found.kind, found.passed), ("trajectory", False))
                    self.assertIn("expected", found.detail)

    def test_a_strict_trajectory_names_the_first_call_out_of_place(self) -> None:
        task = task_named("status-and-thread", trajectory={"match": "strict", "calls": [
            {"tool": "get_ticket"}, {"tool": "get_ticket_thread"}]})
        found = check(self.evaluate("two", task)["status-and-thread"], "trajectory")
        self.assertEqual(found.detail, "call 1 is get_ticket_thread, not the listed call 1 (get_ticket): expected "
                                       "[get_ticket, get_ticket_thread], got [get_ticket_thread, get_ticket]")

    def test_overlapping_listed_calls_find_the_pairing_a_first_come_pairing_would_miss(self) -> None:
        # Calls T-1003 then T-1004; listed: any ticket, then T-1003 only. Pairing first come, the "any"
        # entry takes the T-1003 call and "T-1003 only" is left with nothing; the pairing exists.
        def proposal(ticket: str, index: int) -> CallRecord:
            return CallRecord(step=index, call_id=f"c{index}", tool="get_ticket", host_name="get_ticket",
                              arguments={"ticket_id": ticket}, unparseable=False, known_tool=True, schema_valid=True,
                              injected=None, approval=None, view={"outcome": "succeeded"})

        calls = [proposal("T-1003", 0), proposal("T-1004", 1)]
        any_ticket = {"tool": "get_ticket", "arguments": {"/ticket_id": {"present": True}}}
        only_1003 = {"tool": "get_ticket", "arguments": {"/ticket_id": {"exact": "T-1003"}}}
        for mode in ("unordered", "subset", "superset"):
            with self.subTest(mode=mode):
                self.assertIsNone(trajectory_problem({"match": mode, "calls": [any_ticket, only_1003]}, calls))
        self.assertIsNotNone(trajectory_problem({"match": "unordered", "calls": [only_1003, only_1003]}, calls))
        self.assertIsNotNone(trajectory_problem({"match": "strict", "calls": [only_1003, only_1003]}, calls))
        self.assertIsNone(trajectory_problem({"match": "strict", "calls": [only_1003, any_ticket]}, calls))

    def test_max_calls_counts_every_proposal_of_the_tool(self) -> None:
        task = task_named("status-once", max_calls={"get_ticket": 1})
        self.assertTrue(self.evaluate("one", task)["status-once"].passed)
        result = self.evaluate("two", task)["status-once"]
        found = check(result, "at most 1 call(s) of get_ticket")
        self.assertEqual((found.passed, found.detail, found.kind), (False, "2 call(s)", "trajectory"))
        self.assertEqual(result.grade.failure_kinds, ["trajectory"])

    def test_absent_arguments_fail_on_any_proposal_that_holds_them(self) -> None:
        task = task_named("thread-last-three", absent_arguments={"get_ticket_thread": ["/limit"]})
        result = self.evaluate("one", task)["thread-last-three"]
        found = check(result, "get_ticket_thread without /limit")
        self.assertEqual((found.passed, found.detail), (False, "1 call(s) with /limit"))
        self.assertTrue(self.evaluate("two", task)["thread-last-three"].passed)

    def test_the_task_file_refuses_trajectories_that_contradict_the_task_or_hold_broken_schemas(self) -> None:
        directory = self.make_dir()
        broken_schema = task_named("status-once", trajectory={"match": "subset", "calls": [
            {"tool": "get_ticket", "arguments": {"/ticket_id": {"schema": {"minLength": -1}}}}]})
        must_abstain = abstain_task()
        must_abstain["surfaces"][TYPED]["trajectory"] = {"match": "strict", "calls": [{"tool": "get_ticket"}]}
        unknown_mode = task_named("priority", trajectory={"match": "prefix", "calls": []})
        negative = task_named("thread-last-three", max_calls={"get_ticket": -1})
        root_pointer = task_named("status-and-thread", absent_arguments={"get_ticket": [""]})
        code, _, stderr = run("model-eval", "--tasks", write_tasks(directory, [broken_schema, must_abstain, unknown_mode,
                                                                               negative, root_pointer]),
                              "--out", str(directory / "out"))
        self.assertEqual(code, 2)
        lines = stderr.splitlines()
        self.assertIn("'surfaces/typed-registry-v2/trajectory/calls/0/arguments/~1ticket_id/schema' is not a valid "
                      "JSON Schema", lines[0])
        self.assertIn(":2: 'surfaces/typed-registry-v2/trajectory' requires calls (strict), but the task says the "
                      "right answer is to abstain", lines[1])
        self.assertIn(":3: 'surfaces/typed-registry-v2/trajectory/match' must be one of", lines[2])
        self.assertIn(":4: 'surfaces/typed-registry-v2/max_calls/get_ticket' must be greater than or equal to 0", lines[3])
        self.assertIn(":5: 'surfaces/typed-registry-v2/absent_arguments/get_ticket/0' must match", lines[4])
        self.assertFalse((directory / "out").exists())

    def test_a_trajectory_alone_is_a_check_that_can_fail(self) -> None:
        directory = self.make_dir()
        task = get_task(surfaces={TYPED: {"trajectory": {"match": "strict", "calls": [{"tool": "get_ticket"}]}}})
        del task["answer"]
        code, _, stderr = run("model-eval", "--tasks", write_tasks(directory, [task]), "--repeats", "1",
                              "--out", str(directory / "out"))
        self.assertEqual((code, stderr), (0, ""))


class BudgetTest(TempDirMixin, unittest.TestCase):
    def test_going_over_a_budget_fails_the_trial_as_over_budget_in_every_report(self) -> None:
        directory = self.make_dir()
        task = {**task_named("status-once"), "budget": {"tool_calls": 1, "model_turns": 2}}
        tasks = write_tasks(directory, [task, task_named("priority")])
        code, stdout, _ = run("model-eval", "--tasks", tasks, "--model", VERSIONS["two"], "--out", str(directory / "out"))
        self.assertEqual(code, 0)  # a failed task is the model's: the run itself succeeded
        out = directory / "out"
        report = json.loads((out / "model-eval.json").read_text(encoding="utf-8"))
        figures = report["metrics"][TYPED]["all"]
        self.assertEqual(figures["trials_over_budget"], 3)
        self.assertEqual(figures["over_budget"], {"model_turns": 3, "tool_calls": 3})
        self.assertEqual(figures["failed_trials_by_kind"], {"check": 0, "trajectory": 0, "budget": 3})
        row = next(r for r in report["tasks"] if r["task_id"] == "status-once")["surfaces"][TYPED]
        self.assertEqual((row["successes"], row["over_budget"]), (0, {"model_turns": 3, "tool_calls": 3}))
        self.assertEqual(row["failed_checks"], ["budget: model_turns", "budget: tool_calls"])
        trials = [json.loads(line) for line in (out / "model-eval-runs.jsonl").read_text(encoding="utf-8").splitlines()]
        first = next(t for t in trials if t["task_id"] == "status-once")
        self.assertEqual(first["over_budget"], ["model_turns", "tool_calls"])
        self.assertEqual(first["budgets"]["tool_calls"], {"limit": 1, "used": 2, "exceeded": True})
        self.assertEqual(first["budgets"]["model_turns"], {"limit": 2, "used": 3, "exceeded": True})
        self.assertEqual(first["failure_kinds"], ["budget"])
        junit = (out / "junit.xml").read_text(encoding="utf-8")
        self.assertIn('name="status-once"><failure type="over_budget" message="0 of 3 trials passed; failed: '
                      'budget: model_turns; budget: tool_calls"', junit)
        markdown = (out / "model-eval.md").read_text(encoding="utf-8")
        self.assertIn("- `status-once` on typed-registry-v2: model_turns in 3 of 3 trial(s); tool_calls in 3 of 3 trial(s)",
                      markdown)
        self.assertIn("| trials over budget | 3 |", markdown)
        ok = run("model-eval", "--tasks", tasks, "--model", VERSIONS["one"], "--out", str(directory / "one"))
        self.assertEqual(ok[0], 0)
        one = json.loads((directory / "one" / "model-eval.json").read_text(encoding="utf-8"))
        self.assertEqual(one["metrics"][TYPED]["all"]["trials_over_budget"], 0)

    def test_a_budget_with_no_figure_is_reported_as_not_measured_never_as_met(self) -> None:
        directory = self.make_dir()
        task = {**task_named("priority"), "budget": {"tokens": 10, "latency_ms": 5}}
        evaluation = run_model_eval(LAB, [write_tasks(directory, [task])], out_dir=directory / "out",
                                    model=VERSIONS["one"], repeats=1)
        result = evaluation.results[TYPED][0]
        self.assertTrue(result.passed)  # an in-process agent reports no tokens and has no model latency
        self.assertEqual([(use.name, use.measured) for use in result.grade.budgets], [("tokens", False), ("latency_ms", False)])
        self.assertFalse([c for c in result.grade.checks if c.kind == "budget"])
        self.assertEqual(evaluation.metrics[TYPED]["all"]["budgets_not_measured"], {"latency_ms": 1, "tokens": 1})
        markdown = (directory / "out" / "model-eval.md").read_text(encoding="utf-8")
        self.assertIn("- `priority` on typed-registry-v2: latency_ms not measured (no figure reported); tokens not "
                      "measured (no figure reported)", markdown)

    def test_token_and_latency_budgets_use_what_the_provider_reported_and_the_cassette_recorded(self) -> None:
        directory = self.make_dir()
        tasks = write_tasks(directory, [task_named("priority")])
        with LoopbackModelServer(version_one, name="ticket-bot-v1") as server:
            spec = f"openai:bot-v1@{server.base_url}"
            run_model_eval(LAB, [tasks], out_dir=directory / "recorded", model=spec, repeats=1,
                           record=str(directory / "cassette"), transport=UrllibTransport(timeout_s=5, max_attempts=1))
        # The recorded latencies are set to 120 ms a request: under replay, that is what the budget sees.
        cassette = directory / "cassette" / CASSETTE_FILE
        lines = [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]
        for line in lines:
            line["response"]["latency_ms"] = 120.0
        cassette.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        replayed = evaluate_model(LAB, [tasks], model=spec, repeats=1, replay=str(directory / "cassette"))
        trial = replayed.results[TYPED][0].trial
        self.assertEqual((trial.steps, trial.latency_ms), (2, 240.0))
        tokens = trial.input_tokens + trial.output_tokens
        budgets = {"under": {"tokens": tokens, "latency_ms": 240}, "over": {"tokens": tokens - 1, "latency_ms": 239.5}}
        for label, budget in budgets.items():
            with self.subTest(budget=label):
                path = write_tasks(directory, [{**task_named("priority"), "budget": budget}], f"{label}.jsonl")
                result = evaluate_model(LAB, [path], model=spec, repeats=1, replay=str(directory / "cassette")).results[TYPED][0]
                self.assertEqual(result.passed, label == "under")
                self.assertEqual(result.grade.over_budget, [] if label == "under" else ["tokens", "latency_ms"])
                self.assertEqual(check(result, "budget: latency_ms").detail,
                                 f"240 of at most {'240' if label == 'under' else '239.5'}")

    def test_a_model_turns_budget_the_step_limit_makes_unreachable_is_refused(self) -> None:
        directory = self.make_dir()
        task = {**task_named("priority"), "step_limit": 4, "budget": {"model_turns": 4}}
        code, _, stderr = run("model-eval", "--tasks", write_tasks(directory, [task]), "--out", str(directory / "o"))
        self.assertEqual(code, 2)
        self.assertIn("'budget/model_turns' is 4, but the step limit (4) stops a trial first", stderr)
        self.assertEqual(len(stderr.splitlines()), 1)

