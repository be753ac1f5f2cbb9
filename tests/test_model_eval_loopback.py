"""model-eval against a real HTTP server on 127.0.0.1, in all three wire formats: what the model gets
wrong is graded as the model's, what the endpoint gets wrong is an infrastructure failure, the key goes
in a header and nowhere else."""

from __future__ import annotations

import json
import unittest
from typing import Any

from agent_lab.modeleval.loopback import LoopbackModelServer, Reply
from agent_lab.modeleval.models import UrllibTransport
from agent_lab.modeleval.runner import evaluate_model, run_model_eval
from agent_lab.modeleval.scripted import reference_agent

from model_eval_fixtures import LAB, TYPED, TempDirMixin, abstain_task, get_task, write_tasks

FORMATS = {  # provider -> (path, a reply proposing one call with raw argument text, a reply with a text answer)
    "openai": "/chat/completions",
    "openai-responses": "/responses",
    "anthropic": "/messages",
}
KEY_ENV = "AGENT_LAB_TEST_MODEL_KEY"
KEY = "sk-test-0123456789-never-written"


def call_reply(provider: str, name: str, arguments: str, *, cut: bool = False) -> dict[str, Any]:
    """A provider response proposing one call whose arguments are `arguments` (raw JSON text)."""
    if provider == "openai":
        return {"choices": [{"index": 0, "finish_reason": "length" if cut else "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_x1", "type": "function", "function": {"name": name, "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7}}
    if provider == "openai-responses":
        return {"status": "incomplete" if cut else "completed", "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_x1", "name": name, "arguments": arguments}],
            "usage": {"input_tokens": 11, "output_tokens": 7}}
    try:
        parsed: Any = json.loads(arguments)
    except json.JSONDecodeError:
        parsed = arguments  # Anthropic sends an object; a broken one arrives as something else
    return {"content": [{"type": "tool_use", "id": "toolu_x1", "name": name, "input": parsed}],
            "stop_reason": "max_tokens" if cut else "tool_use", "usage": {"input_tokens": 11, "output_tokens": 7}}


def text_reply(provider: str, text: str) -> dict[str, Any]:
    if provider == "openai":
        return {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}
    if provider == "openai-responses":
        return {"status": "completed", "output": [{"type": "message", "role": "assistant",
                                                   "content": [{"type": "output_text", "text": text}]}]}
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


class NoWait:
    """Stands in for time.sleep: records what the transport would have waited."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class LoopbackFormatsTest(TempDirMixin, unittest.TestCase):
    def setUp(self) -> None:
        self.server = LoopbackModelServer(reference_agent, name="reference").start()
        self.addCleanup(self.server.stop)
        self.dir = self.make_dir()
        self.tasks = write_tasks(self.dir, [get_task(), abstain_task()])

    def run_eval(self, provider: str, *, transport: Any = None, tasks: str | None = None, **options: Any) -> Any:
        transport = transport or UrllibTransport(timeout_s=5, max_attempts=2, sleep=NoWait())
        return evaluate_model(LAB, [tasks or self.tasks], model=f"{provider}:stand-in@{self.server.base_url}",
                              repeats=1, transport=transport, **options)

    def trial(self, evaluation: Any, task_id: str) -> Any:
        return next(r for r in evaluation.results[TYPED] if r.task.task_id == task_id)

    def test_the_reference_agent_behind_every_format_passes_and_is_named_scripted(self) -> None:
        for provider in FORMATS:
            with self.subTest(provider=provider):
                evaluation = self.run_eval(provider)
                self.assertEqual(evaluation.metrics[TYPED]["all"]["task_success"]["numerator"], 2)
                self.assertTrue(evaluation.scripted)
                self.assertEqual(evaluation.served_by, ("scripted:reference",))
                usage = self.trial(evaluation, "status").trial
                self.assertIsNotNone(usage.input_tokens)  # the stand-in reports usage like a provider

    def test_malformed_tool_call_json_is_a_failed_call_not_an_abstention(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                self.server.queue(path, Reply(body=call_reply(provider, "get_ticket", '{"ticket_id": "T-10')),
                                  Reply(body=text_reply(provider, "I could not do it.")))
                tasks = write_tasks(self.dir, [abstain_task()], "abstain.jsonl")
                evaluation = self.run_eval(provider, tasks=tasks)
                result = self.trial(evaluation, "delete")
                [call] = result.trial.calls
                self.assertTrue(call.unparseable)
                self.assertEqual(call.error_code, "invalid_arguments")
                self.assertFalse(result.trial.abstained)
                self.assertFalse(result.passed)
                figures = evaluation.metrics[TYPED]["all"]
                self.assertEqual(figures["abstention_recall"]["numerator"], 0)  # not credited as abstaining
                self.assertEqual(figures["abstention_recall"]["denominator"], 1)
                self.assertEqual(figures["argument_validity"]["numerator"], 0)
                self.assertEqual(figures["unparseable_calls"], 1)

    def test_a_tool_that_does_not_exist_answers_tool_not_found_and_the_model_can_recover(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                self.server.queue(path, Reply(body=call_reply(provider, "get_tickets", '{"ticket_id": "T-1003"}')))
                evaluation = self.run_eval(provider)
                result = self.trial(evaluation, "status")
                first, second = result.trial.calls
                self.assertEqual((first.tool, first.error_code, first.known_tool), ("get_tickets", "tool_not_found", False))
                self.assertIn("get_ticket", json.dumps(first.view))  # close names point the way
                self.assertEqual((second.tool, second.outcome), ("get_ticket", "succeeded"))
                figures = evaluation.metrics[TYPED]["all"]
                self.assertEqual(figures["unknown_tool_calls"], 1)
                self.assertEqual(figures["tool_selection_accuracy"]["numerator"], 0)

    def test_429_then_success_is_retried_after_the_servers_retry_after(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                sleep = NoWait()
                self.server.queue(path, Reply(429, {"error": {"type": "rate_limit"}}, {"Retry-After": "2"}))
                evaluation = self.run_eval(provider, transport=UrllibTransport(timeout_s=5, max_attempts=3, sleep=sleep))
                self.assertEqual(evaluation.infrastructure_failures, 0)
                self.assertEqual(evaluation.metrics[TYPED]["all"]["task_success"]["numerator"], 2)
                self.assertEqual(sleep.waits, [2.0])

    def test_a_retry_after_beyond_the_cap_is_an_infrastructure_failure(self) -> None:
        sleep = NoWait()
        self.server.queue("/chat/completions", Reply(503, {}, {"Retry-After": "3600"}))
        evaluation = self.run_eval("openai", transport=UrllibTransport(timeout_s=5, max_attempts=3, sleep=sleep,
                                                                       retry_after_cap_s=30))
        result = self.trial(evaluation, "status")
        self.assertIsNone(result.grade)
        self.assertIn("3600 s", result.trial.infrastructure)
        self.assertEqual(sleep.waits, [])

    def test_a_body_cut_short_is_retried(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                sleep = NoWait()
                self.server.queue(path, Reply(body=b'{"choices": [{"mess', truncate=True))
                evaluation = self.run_eval(provider, transport=UrllibTransport(timeout_s=5, max_attempts=2, sleep=sleep))
                self.assertEqual(evaluation.infrastructure_failures, 0)
                self.assertEqual(len(sleep.waits), 1)

    def test_a_response_cut_off_at_the_token_limit_is_an_unparseable_call(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                self.server.queue(path, Reply(body=call_reply(provider, "get_ticket", '{"ticket_id": "T-1003"}', cut=True)))
                evaluation = self.run_eval(provider)
                first = self.trial(evaluation, "status").trial.calls[0]
                self.assertTrue(first.unparseable)
                self.assertEqual(first.error_code, "invalid_arguments")

    def test_a_hang_past_the_timeout_is_an_infrastructure_failure_never_a_model_failure(self) -> None:
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                self.server.queue(path, Reply(body=text_reply(provider, "late"), hang_s=30),
                                  Reply(body=text_reply(provider, "late"), hang_s=30))
                evaluation = self.run_eval(provider, transport=UrllibTransport(timeout_s=0.2, max_attempts=2, sleep=NoWait()))
                result = self.trial(evaluation, "status")
                self.assertIsNone(result.grade)
                self.assertEqual(result.trial.status, "infrastructure_failure")
                self.assertIn("timeout", result.trial.infrastructure)
                figures = evaluation.metrics[TYPED]["all"]
                self.assertEqual(figures["infrastructure_failures"], 1)
                self.assertEqual(figures["trials_graded"], 1)  # the other task, unaffected
                self.assertIsNone(figures["pass_hat_k"])

    def test_an_answer_that_is_json_text_but_not_plain_json_is_an_infrastructure_failure(self) -> None:
        # A lone surrogate escape (a call name no request can carry back) or a number no float holds,
        # in the provider's own envelope: the endpoint's fault, reported as such, never a crash.
        broken = {
            "lone surrogate": lambda text: text.replace('"get_ticket"', '"get_\\ud800ticket"'),
            "1e400": lambda text: text.replace(": 11", ": 1e400"),
        }
        for provider, path in FORMATS.items():
            for label, breaking in broken.items():
                with self.subTest(provider=provider, broken=label):
                    text = breaking(json.dumps(call_reply(provider, "get_ticket", '{"ticket_id": "T-1003"}')))
                    self.server.queue(path, Reply(body=text.encode("ascii")))
                    evaluation = self.run_eval(provider, record=str(self.dir / f"cassette-{provider}-{len(label)}"))
                    result = self.trial(evaluation, "status")
                    self.assertIsNone(result.grade)
                    self.assertIn("not plain JSON", result.trial.infrastructure)

    def test_arguments_nested_past_any_limit_are_an_unparseable_call_and_the_stand_in_answers_400(self) -> None:
        deep = '{"ticket_id": ' + "[" * 100_000 + "]" * 100_000 + "}"
        for provider, path in (("openai", "/chat/completions"), ("openai-responses", "/responses")):
            with self.subTest(provider=provider):
                self.server.queue(path, Reply(body=call_reply(provider, "get_ticket", deep)))
                result = self.trial(self.run_eval(provider), "status")
                [call] = result.trial.calls
                self.assertTrue(call.unparseable)
                # The next request carries the text back; the stand-in cannot read it and says so
                # (HTTP 400) instead of dropping the connection with a traceback in its thread.
                self.assertEqual(result.trial.infrastructure, "the endpoint answered HTTP 400")

    def test_an_http_error_that_retrying_cannot_fix_is_reported_at_once(self) -> None:
        sleep = NoWait()
        self.server.queue("/messages", Reply(401, {"error": {"type": "authentication_error", "message": "bad key sk-x"}}))
        evaluation = self.run_eval("anthropic", transport=UrllibTransport(timeout_s=5, max_attempts=3, sleep=sleep))
        result = self.trial(evaluation, "status")
        self.assertEqual(result.trial.infrastructure, "the endpoint answered HTTP 401")
        self.assertEqual(sleep.waits, [])

    def test_a_key_the_endpoint_echoes_is_masked_in_the_cassette_and_a_replay_answers_as_the_recorded_run(self) -> None:
        import os
        from unittest import mock

        tasks = write_tasks(self.dir, [get_task()], "status.jsonl")
        for provider, path in FORMATS.items():
            with self.subTest(provider=provider):
                # A debugging endpoint quotes the Authorization header: in a call's arguments, then in its answer.
                self.server.queue(path, Reply(body=call_reply(provider, "get_ticket", json.dumps({"ticket_id": f"Bearer {KEY}"}))),
                                  Reply(body=text_reply(provider, f"debug: you sent {KEY}")))
                model, cassette = f"{provider}:stand-in@{self.server.base_url}#{KEY_ENV}", self.dir / f"echo-{provider}"
                with mock.patch.dict(os.environ, {KEY_ENV: KEY}):
                    recorded = evaluate_model(LAB, [tasks], model=model, repeats=1, record=str(cassette),
                                              transport=UrllibTransport(timeout_s=5, max_attempts=1))
                text = (cassette / "cassette.jsonl").read_text(encoding="utf-8")
                self.assertFalse(KEY in text, "the key is in the cassette")
                self.assertIn("[redacted]", text)
                replayed = evaluate_model(LAB, [tasks], model=model, repeats=1, replay=str(cassette))  # no key, no network

                runs = [self.trial(evaluation, "status").trial for evaluation in (recorded, replayed)]
                self.assertEqual([call.arguments for call in runs[0].calls], [{"ticket_id": "Bearer [redacted]"}])
                self.assertEqual(runs[0].answers, ("debug: you sent [redacted]",))
                self.assertEqual([(run.answers, [(call.arguments, call.outcome) for call in run.calls]) for run in runs[1:]],
                                 [(runs[0].answers, [(call.arguments, call.outcome) for call in runs[0].calls])])

    def test_the_key_is_sent_as_a_header_and_never_written_to_a_cassette_or_a_report(self) -> None:
        import os
        from unittest import mock

        for provider, header in (("openai", "authorization"), ("openai-responses", "authorization"), ("anthropic", "x-api-key")):
            with self.subTest(provider=provider), mock.patch.dict(os.environ, {KEY_ENV: KEY}):
                out, cassette = self.dir / f"out-{provider}", self.dir / f"cassette-{provider}"
                self.server.received.clear()
                run_model_eval(LAB, [self.tasks], out_dir=out, model=f"{provider}:stand-in@{self.server.base_url}#{KEY_ENV}",
                               repeats=1, record=str(cassette),
                               transport=UrllibTransport(timeout_s=5, max_attempts=1))
                self.assertTrue(all(KEY in received.headers[header] for received in self.server.received))
                written = [path.read_text(encoding="utf-8") for path in [*out.iterdir(), *cassette.iterdir()]]
                self.assertTrue(written)
                self.assertFalse([text for text in written if KEY in text])
                self.assertTrue(any(KEY_ENV in text for text in written))  # the variable's name is fine to show
