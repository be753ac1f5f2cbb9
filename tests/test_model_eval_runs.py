"""model-eval end to end: task files checked like case files, the shipped task set, runs that are
byte-identical under the scripted agent and under replayed cassettes, and replay that never guesses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import unittest
from pathlib import Path
from typing import Any

from agent_lab import cli
from agent_lab.modeleval.cassettes import MissingRecording
from agent_lab.modeleval.loopback import LoopbackModelServer
from agent_lab.modeleval.models import UrllibTransport
from agent_lab.modeleval.reports import REPORT_FILES
from agent_lab.modeleval.runner import evaluate_model, run_model_eval
from agent_lab.modeleval.scripted import reference_agent
from agent_lab.modeleval.shipped import SHIPPED_TASKS
from agent_lab.modeleval.tasks import load_tasks

from model_eval_fixtures import LAB, REPO, TYPED, WIDE, TempDirMixin, get_task, write_tasks

DATASET = REPO / "datasets" / "model-tasks.jsonl"
CASSETTES = REPO / "datasets" / "model-cassettes"
CASSETTE_SPECS = {  # the spec each committed cassette was recorded with (the loopback stand-in; see README)
    "openai-chat": "openai:stand-in@http://127.0.0.1:8765",
    "openai-responses": "openai-responses:stand-in@http://127.0.0.1:8765",
    "anthropic-messages": "anthropic:stand-in@http://127.0.0.1:8765",
}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


class ShippedTasksTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tasks = load_tasks([str(SHIPPED_TASKS)], surfaces=[TYPED, WIDE])

    def test_the_package_copy_and_the_dataset_are_identical(self) -> None:
        self.assertEqual(SHIPPED_TASKS.read_bytes(), DATASET.read_bytes())

    def test_at_least_40_tasks_over_both_surfaces_with_10_held_out(self) -> None:
        self.assertGreaterEqual(len(self.tasks), 40)
        self.assertGreaterEqual(sum(task.split == "heldout" for task in self.tasks), 10)
        self.assertTrue(all(set(task.surfaces) == {TYPED, WIDE} for task in self.tasks))

    def test_every_kind_the_issue_asks_for_is_there(self) -> None:
        tags = {tag for task in self.tasks for tag in task.tags}
        self.assertLessEqual({"must-call", "abstain", "similar-tools", "multi-step", "cursor", "approval", "recovery",
                              "invalid-arguments", "tool-timeout", "not-found", "secret", "minefield", "injected"}, tags)
        self.assertEqual({task.approvals for task in self.tasks}, {"never", "listed", "always"})

    def test_no_held_out_message_shares_five_words_in_a_row_with_a_dev_message(self) -> None:
        def shingles(text: str) -> set[tuple[str, ...]]:
            words = re.findall(r"[a-z0-9$€'-]+", text.lower())
            return {tuple(words[i:i + 5]) for i in range(len(words) - 4)}

        dev = set().union(*(shingles(m) for t in self.tasks if t.split == "dev" for m in t.messages))
        for task in (t for t in self.tasks if t.split == "heldout"):
            for message in task.messages:
                self.assertFalse(shingles(message) & dev, f"{task.task_id} repeats dev wording")


class TaskFileTest(TempDirMixin, unittest.TestCase):
    def test_problems_are_reported_as_file_and_line_and_exit_2_without_reports(self) -> None:
        directory = self.make_dir()
        broken = get_task(surfaces={"no-such-surface": {"must_call": [{"tool": "x"}]}})
        tasks = directory / "tasks.jsonl"
        tasks.write_text(json.dumps(get_task("fine")) + "\n{oops\n" + json.dumps(broken) + "\n"
                         + json.dumps(get_task("fine")) + "\n" + json.dumps({**get_task("bad-split"), "split": "test"}) + "\n",
                         encoding="utf-8")
        out = directory / "out"
        code, stdout, stderr = run("model-eval", "--tasks", str(tasks), "--out", str(out))
        self.assertEqual(code, 2)
        lines = stderr.splitlines()
        self.assertEqual(lines[0], f"{tasks}:2: broken JSON at column 2: Expecting property name enclosed in double quotes")
        self.assertTrue(lines[1].startswith(f"{tasks}:3: 'surfaces/no-such-surface' names a surface the lab does not have"))
        self.assertEqual(lines[2], f"{tasks}:4: duplicate task_id 'fine' (first at {tasks}:1)")
        self.assertTrue(lines[3].startswith(f"{tasks}:5: 'split' must be one of"))
        self.assertNotIn("Traceback", stdout + stderr)
        self.assertFalse(out.exists())

    def test_a_task_file_refuses_what_a_case_file_refuses(self) -> None:
        """Task and case files share one reader: a number no float holds, NaN, a repeated key and a lone
        surrogate escape are FILE:LINE problems (a task with 1e400 in a match once loaded as infinity)."""
        directory = self.make_dir()
        fine = json.dumps(get_task("fine"))
        lines = [fine.replace('"fine"', '"big"', 1)[:-1] + ', "tags": [1e400]}',
                 fine.replace('"fine"', '"nan"', 1)[:-1] + ', "tags": [NaN]}',
                 fine.replace('"fine"', '"twice"', 1)[:-1] + ', "split": "dev"}',
                 json.dumps({**get_task("surrogate"), "intent": "\ud800"})]
        tasks = directory / "tasks.jsonl"
        tasks.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, _, stderr = run("model-eval", "--tasks", str(tasks), "--out", str(directory / "o"))
        self.assertEqual(code, 2)
        self.assertEqual(stderr.splitlines(), [
            f"{tasks}:1: a number too large to read",
            f"{tasks}:2: NaN is not JSON",
            f"{tasks}:3: duplicate key 'split' in one object",
            f"{tasks}:4: 'intent' holds a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text",
        ])

    def test_a_task_that_cannot_fail_is_refused(self) -> None:
        directory = self.make_dir()
        vacuous = get_task(surfaces={TYPED: {}})
        del vacuous["answer"]
        code, _, stderr = run("model-eval", "--tasks", write_tasks(directory, [vacuous]), "--out", str(directory / "o"))
        self.assertEqual(code, 2)
        self.assertIn("says nothing that could fail", stderr)

    def test_a_broken_argument_schema_and_an_unknown_injected_code_are_refused(self) -> None:
        directory = self.make_dir()
        task = get_task()
        task["surfaces"][TYPED]["must_call"][0]["arguments"]["/ticket_id"] = {"schema": {"minLength": -1}}
        task["surfaces"][TYPED]["inject"] = [{"tool": "get_ticket", "error": "no_such_code"}]
        code, _, stderr = run("model-eval", "--tasks", write_tasks(directory, [task]), "--out", str(directory / "o"))
        self.assertEqual(code, 2)
        self.assertIn("is not a valid JSON Schema", stderr)
        self.assertIn("'surfaces/typed-registry-v2/inject/0/error' is not an error code of the catalogue", stderr)


class DeterminismTest(TempDirMixin, unittest.TestCase):
    def test_the_shipped_tasks_with_the_scripted_agent_are_byte_identical_across_two_runs(self) -> None:
        directory = self.make_dir()
        first, second = directory / "one", directory / "two"
        self.assertEqual(run("model-eval", "--out", str(first))[0], 0)
        code, stdout, _ = run("model-eval", "--out", str(second))
        self.assertEqual(code, 0)
        self.assertEqual(files(first), files(second))
        self.assertEqual(sorted(files(first)), sorted(REPORT_FILES))
        self.assertIn("SCRIPTED AGENT, NOT A MODEL", stdout)
        for name, text in files(first).items():  # every report, each trial's line and each JUnit suite
            self.assertIn(b"SCRIPTED AGENT, NOT A MODEL", text, name)
        runs = files(first)["model-eval-runs.jsonl"].decode("utf-8").splitlines()
        self.assertTrue(all("SCRIPTED AGENT, NOT A MODEL" in json.loads(line)["answers_from"] for line in runs))
        junit = files(first)["junit.xml"].decode("utf-8")
        self.assertEqual(junit.count('<property name="answers_from" value="SCRIPTED AGENT, NOT A MODEL'),
                         junit.count("<testsuite "))

    def test_replaying_each_committed_cassette_is_byte_identical_across_two_runs_and_offline(self) -> None:
        directory = self.make_dir()
        for name, spec in CASSETTE_SPECS.items():
            with self.subTest(cassette=name):
                outs = [directory / f"{name}-{n}" for n in (1, 2)]
                for out in outs:
                    code, stdout, stderr = run("model-eval", "--model", spec, "--replay", str(CASSETTES / name), "--out", str(out))
                    self.assertEqual((code, stderr), (0, ""))
                self.assertEqual(files(outs[0]), files(outs[1]))
                report = json.loads((outs[0] / "model-eval.json").read_text(encoding="utf-8"))
                self.assertTrue(report["answers_from"]["scripted"])
                self.assertEqual(report["answers_from"]["served_by"], ["scripted:scripted-reference-v1"])

    def test_a_replay_matches_the_in_process_run_of_the_same_agent(self) -> None:
        directory = self.make_dir()
        replayed = evaluate_model(LAB, [str(SHIPPED_TASKS)], model=CASSETTE_SPECS["anthropic-messages"],
                                  replay=str(CASSETTES / "anthropic-messages"))
        in_process = evaluate_model(LAB, [str(SHIPPED_TASKS)])
        for surface in (TYPED, WIDE):
            keep = ("task_success", "pass_hat_k", "argument_validity", "unsafe_effects", "abstention_recall")
            self.assertEqual({k: replayed.metrics[surface]["all"][k] for k in keep},
                             {k: in_process.metrics[surface]["all"][k] for k in keep})
        self.assertTrue(directory.exists())


class ReplayTest(TempDirMixin, unittest.TestCase):
    def test_a_request_without_a_recording_exits_2_naming_task_step_and_the_first_differing_message(self) -> None:
        directory = self.make_dir()
        tasks = write_tasks(directory, [get_task()])
        with LoopbackModelServer(reference_agent) as server:
            spec = f"openai:stand-in@{server.base_url}"
            run_model_eval(LAB, [tasks], out_dir=directory / "recorded", model=spec, repeats=1,
                           record=str(directory / "cassette"), transport=UrllibTransport(timeout_s=5, max_attempts=1))
        changed = write_tasks(directory, [get_task(ticket="T-1006")], "changed.jsonl")
        with self.assertRaises(MissingRecording) as caught:
            evaluate_model(LAB, [changed], model=spec, repeats=1, replay=str(directory / "cassette"))
        self.assertEqual((caught.exception.context.task_id, caught.exception.context.step), ("status", 0))
        self.assertIn("message 1 differs", caught.exception.detail)  # message 0 is the system prompt
        self.assertIn("T-1006", caught.exception.detail)
        code, _, stderr = run("model-eval", "--tasks", changed, "--model", spec, "--replay", str(directory / "cassette"),
                              "--out", str(directory / "out"))
        self.assertEqual(code, 2)
        self.assertIn("no recording for task 'status', surface 'typed-registry-v2', trial 1, step 0", stderr)
        self.assertFalse((directory / "out").exists())

    def test_a_replay_of_repeated_trials_gives_each_trial_the_answer_it_was_recorded_with(self) -> None:
        # A real model may answer the same request differently on each trial. A cassette that kept one
        # answer per request would replay a task that passed 1 of 2 trials as passing 2 of 2: pass^k
        # under replay would no longer be the recorded run's.
        directory = self.make_dir()
        tasks = write_tasks(directory, [get_task()])
        first_turns: list[int] = []

        def answers_wrong_on_its_second_first_turn(request: Any) -> Any:
            if len(request["messages"]) == 1:
                first_turns.append(1)
                if len(first_turns) == 2:
                    return {"content": "It is open.", "tool_calls": []}
            return reference_agent(request)

        with LoopbackModelServer(answers_wrong_on_its_second_first_turn) as server:
            spec = f"openai:stand-in@{server.base_url}"
            recorded = run_model_eval(LAB, [tasks], out_dir=directory / "recorded", model=spec, repeats=2,
                                      record=str(directory / "cassette"),
                                      transport=UrllibTransport(timeout_s=5, max_attempts=1))
        replayed = run_model_eval(LAB, [tasks], out_dir=directory / "replayed", model=spec, repeats=2,
                                  replay=str(directory / "cassette"))
        self.assertEqual([r.passed for r in recorded.results[TYPED]], [True, False])
        self.assertEqual([r.passed for r in replayed.results[TYPED]], [True, False])
        self.assertEqual(replayed.metrics[TYPED]["all"]["pass_hat_k"], {"1": 0.5, "2": 0.0})
        self.assertEqual((directory / "recorded" / "model-eval-runs.jsonl").read_bytes(),
                         (directory / "replayed" / "model-eval-runs.jsonl").read_bytes())
        with self.assertRaises(MissingRecording) as caught:  # a third trial was never asked
            evaluate_model(LAB, [tasks], model=spec, repeats=3, replay=str(directory / "cassette"))
        self.assertEqual((caught.exception.context.trial, caught.exception.context.step), (3, 0))

    def test_a_cassette_that_is_cut_short_not_json_or_not_plain_json_exits_2_at_its_line(self) -> None:
        directory = self.make_dir()
        committed = (CASSETTES / "openai-chat" / "cassette.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        good = committed[0]
        broken = {
            "cut short": (good + committed[1][:200], 2, "not a cassette recording"),
            "not JSON": ("hello\n", 1, "not a cassette recording"),
            "one answer per request": (good.replace('"asked":', '"first_asked":', 1), 1, "recorded with one answer per request"),
            "1e400": (good.replace('"status":200', '"status":1e400', 1), 1, "not plain JSON"),
            "lone surrogate": (good + good.replace('"role":"user","content":"', '"role":"user","content":"\\ud800', 1),
                               2, "not plain JSON"),
        }
        for label, (text, line, message) in broken.items():
            with self.subTest(broken=label):
                cassette = directory / label.replace(" ", "-")
                cassette.mkdir()
                (cassette / "cassette.jsonl").write_text(text, encoding="utf-8")
                code, _, stderr = run("model-eval", "--model", CASSETTE_SPECS["openai-chat"], "--replay", str(cassette),
                                      "--out", str(cassette / "out"))
                self.assertEqual(code, 2)
                self.assertTrue(stderr.startswith(f"model-eval: {cassette / 'cassette.jsonl'}:{line}: {message}"), stderr)
                self.assertEqual(len(stderr.splitlines()), 1)
                self.assertFalse((cassette / "out").exists())

    def test_a_replay_never_opens_a_connection(self) -> None:
        from unittest import mock

        with mock.patch("urllib.request.OpenerDirector.open", side_effect=AssertionError("network used")):
            evaluation = evaluate_model(LAB, [str(SHIPPED_TASKS)], model=CASSETTE_SPECS["openai-chat"], repeats=1,
                                        replay=str(CASSETTES / "openai-chat"), split="heldout")
        self.assertEqual(evaluation.infrastructure_failures, 0)

    def test_cassettes_are_for_network_models_only(self) -> None:
        directory = self.make_dir()
        code, _, stderr = run("model-eval", "--replay", str(directory), "--out", str(directory / "o"))
        self.assertEqual(code, 2)
        self.assertIn("a python: agent runs in this process and needs none", stderr)


class CommandLineTest(TempDirMixin, unittest.TestCase):
    def test_an_unreachable_endpoint_gives_exit_1_with_reports_that_say_infrastructure(self) -> None:
        directory = self.make_dir()
        tasks = write_tasks(directory, [get_task()])
        code, stdout, _ = run("model-eval", "--tasks", tasks, "--model", "openai:m@http://127.0.0.1:9", "--timeout", "0.5",
                              "--attempts", "1", "--repeats", "1", "--out", str(directory / "out"))
        self.assertEqual(code, 1)
        self.assertIn("1 infrastructure failure(s)", stdout)
        junit = (directory / "out" / "junit.xml").read_text(encoding="utf-8")
        self.assertIn("<error message=", junit)

    def test_bad_model_specs_exit_2_with_one_line(self) -> None:
        directory = self.make_dir()
        for spec, message in (("gpt-4o", "expected PROVIDER:MODEL"), ("mistral:large", "unknown provider 'mistral'"),
                              ("openai:m@ftp://host", "must be http:// or https://"),
                              ("openai:m@http://127.0.0.1:9#AGENT_LAB_SURELY_UNSET", "AGENT_LAB_SURELY_UNSET is not set"),
                              ("python:agent_lab.modeleval.scripted:nothing", "has no callable 'nothing'")):
            with self.subTest(spec=spec):
                code, _, stderr = run("model-eval", "--model", spec, "--out", str(directory / "o"))
                self.assertEqual(code, 2)
                self.assertIn(message, stderr)
                self.assertEqual(len(stderr.splitlines()), 1)

    def test_a_hosted_api_without_its_key_is_exit_2_before_any_request(self) -> None:
        from unittest import mock

        from agent_lab.modeleval.models import ModelSpecError, open_model

        class NoNetwork:
            def send(self, request: Any, context: Any) -> Any:
                raise AssertionError("a request was sent without a key")

        directory = self.make_dir()
        for spec, variable, host in (("openai:gpt-4.1-mini", "OPENAI_API_KEY", "api.openai.com"),
                                     ("openai-responses:gpt-4.1-mini", "OPENAI_API_KEY", "api.openai.com"),
                                     ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "api.anthropic.com")):
            for value in (None, ""):
                with self.subTest(spec=spec, value=value), mock.patch.dict(os.environ):
                    if value is None:
                        os.environ.pop(variable, None)
                    else:
                        os.environ[variable] = value
                    with self.assertRaisesRegex(ModelSpecError, f"{variable} is not set .*{host} needs a key"):
                        open_model(spec, transport=NoNetwork())
                    code, stdout, stderr = run("model-eval", "--model", spec, "--out", str(directory / "o"))
                    self.assertEqual((code, stdout), (2, ""))
                    self.assertIn("no request was sent", stderr)
        with mock.patch.dict(os.environ, {"OPENAI_API_KEY": ""}):  # a local server needs none: none is sent
            self.assertIsNotNone(open_model("openai:m@http://127.0.0.1:9", transport=NoNetwork()))

    def test_a_split_runs_only_its_tasks(self) -> None:
        directory = self.make_dir()
        code, _, _ = run("model-eval", "--split", "heldout", "--repeats", "1", "--out", str(directory))
        self.assertEqual(code, 0)
        report = json.loads((directory / "model-eval.json").read_text(encoding="utf-8"))
        self.assertEqual({row["split"] for row in report["tasks"]}, {"heldout"})
        self.assertEqual(set(report["metrics"][TYPED]), {"heldout", "all"})
