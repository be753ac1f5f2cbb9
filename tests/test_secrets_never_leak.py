"""End to end: a secret argument or output value never leaves the process.

One write tool whose spec redacts its `api_token` argument and its `customer_email` output is called
through a real Registry with a JsonlAuditSink and a SqliteReceiptStore, along every path that builds
something outward-facing: success, replay, approval required, invalid arguments (another field and the
secret field itself), business failure with details, crash, broken output and a late write. Each
secret is a fresh random string, so finding it anywhere is a leak, never a coincidence. Then every
outward artefact is searched: the model view, repr, the stored receipt, the audit file and the
receipt database bytes, and the warnings the library logged.
"""

import json
import logging
import os
import secrets
import tempfile
import threading
import time
import unittest
from pathlib import Path

from agent_lab.audit import JsonlAuditSink, read_audit_file
from agent_lab.calls import ToolCall
from agent_lab.errors import ToolFailure
from agent_lab.idempotency import SqliteReceiptStore
from agent_lab.policy import Actor, Approval
from agent_lab.redaction import REDACTED
from agent_lab.registry import Registry
from agent_lab.spec import ApprovalPolicy, Effect, RetryPolicy, ToolSpec

APPROVAL_THRESHOLD = 500
ACTOR = Actor(id="agent-7", tenant="acme", permissions={"tokens.rotate"})


def rotate_token_spec():
    return ToolSpec(
        name="rotate_token",
        description="Rotate a customer's API token and say who was notified.",
        input_schema={
            "type": "object",
            "properties": {
                "action_id": {"type": "string", "pattern": "^[a-z0-9-]{8,64}$"},
                "api_token": {"type": "string", "pattern": "^sk-[0-9a-f]{32}$", "maxLength": 35},
                "label": {"type": "string", "maxLength": 12},
                "amount": {"type": "integer", "minimum": 0, "maximum": 1000},
                "mode": {"enum": ["ok", "fail", "crash", "bad_output", "slow"]},
            },
            "required": ["action_id", "api_token", "label", "amount", "mode"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"customer_email": {"type": "string"}, "status": {"enum": ["rotated"]}},
            "required": ["customer_email", "status"],
            "additionalProperties": False,
        },
        required_permission="tokens.rotate",
        effect=Effect.WRITE,
        idempotency_key="action_id",
        approval=ApprovalPolicy.CONDITIONAL,
        approval_condition=lambda arguments: arguments["amount"] > APPROVAL_THRESHOLD,
        retry_policy=RetryPolicy.TRANSIENT,
        timeout_ms=5_000,
        redact=("api_token", "customer_email"),
    )


class CapturedLogs(logging.Handler):
    """Everything the library logs at WARNING and above (what a production log would keep)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(self.format(record))


class Scenario:
    """Runs every outward-facing path once against a real registry and keeps what came out of it."""

    def __init__(self, directory):
        self.token = "sk-" + secrets.token_hex(16)
        self.email = f"cust-{secrets.token_hex(8)}@example.test"
        self.slow_release = threading.Event()
        self.audit_path = os.path.join(directory, "audit.jsonl")
        self.directory = directory
        self.receipts = SqliteReceiptStore(os.path.join(directory, "receipts.sqlite"))
        self.audit = JsonlAuditSink(self.audit_path)
        self.registry = Registry(receipts=self.receipts, audit=self.audit)
        self.registry.register(rotate_token_spec(), self.handler)
        self.results = []
        self.paths = {}

    def handler(self, arguments):
        mode = arguments["mode"]
        if mode == "fail":
            raise ToolFailure(
                "conflict",
                "The token cannot be rotated while another rotation is pending.",
                details={"api_token": arguments["api_token"], "customer_email": self.email},
            )
        if mode == "crash":
            raise RuntimeError(f"upstream refused {arguments['api_token']} for {self.email}")
        if mode == "bad_output":
            return {"customer_email": self.email, "status": self.email, "extra": self.email}
        if mode == "slow":
            self.slow_release.wait(5)
        return {"customer_email": self.email, "status": "rotated"}

    def arguments(self, mode="ok", **overrides):
        arguments = {
            "action_id": "act-" + secrets.token_hex(6),
            "api_token": self.token,
            "label": "prod key",
            "amount": 10,
            "mode": mode,
        }
        arguments.update(overrides)
        return arguments

    def invoke(self, path, arguments, *, name="rotate_token", **options):
        result = self.registry.invoke(ToolCall(name, arguments), actor=ACTOR, **options)
        self.results.append(result)
        self.paths[path] = result
        return result

    def run(self):
        first = self.arguments()
        self.invoke("succeeded", first)
        self.invoke("replayed", dict(first))
        big = self.arguments(amount=APPROVAL_THRESHOLD + 1)
        self.invoke("approval_required", big)
        approval = self.registry.approval_for(ToolCall("rotate_token", big), actor=ACTOR, approver="lead")
        self.invoke("approval_mismatch", dict(big, label="other"), approval=approval)
        self.invoke("approved", big, approval=approval)
        self.invoke("other_field_invalid", self.arguments(label="far too long for the label"))
        self.invoke("secret_field_invalid", self.arguments(api_token=self.token + "Z"))
        self.invoke("secret_field_wrong_type", self.arguments(api_token=[self.token]))
        self.invoke("secret_field_not_json", self.arguments(api_token=self.token.encode()))
        self.invoke("unexpected_member", self.arguments(note=self.token))
        self.invoke("unknown_tool", self.arguments(), name="rotate_tokens")
        self.invoke("business_failure", self.arguments("fail"))
        self.invoke("crash", self.arguments("crash"))
        self.invoke("broken_output", self.arguments("bad_output"))
        slow = self.arguments("slow")
        self.invoke("late_write", slow, deadline=time.monotonic() + 0.1)
        self.slow_release.set()
        self.wait_for_replay("late_write_replayed", slow)
        self.close()

    def wait_for_replay(self, path, arguments):
        """The late write stores its receipt when it finishes; its key then replays that result."""
        give_up = time.monotonic() + 5
        while not self.invoke(path, dict(arguments)).replayed and time.monotonic() < give_up:
            time.sleep(0.005)

    def close(self):
        self.slow_release.set()
        self.registry.close(wait=True)
        self.receipts.close()
        self.audit.close()

    def files(self, prefix):
        """(name, bytes) of every file in the scenario's directory whose name starts with prefix."""
        found = []
        for name in sorted(os.listdir(self.directory)):
            if name.startswith(prefix):
                with open(os.path.join(self.directory, name), "rb") as file:
                    found.append((name, file.read()))
        return found


class SecretsNeverLeakTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.logs = CapturedLogs()
        cls.logs.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        library_logger = logging.getLogger("agent_lab")
        library_logger.addHandler(cls.logs)
        cls.scenario = Scenario(cls.directory.name)
        try:
            cls.scenario.run()
        finally:
            cls.scenario.close()
            library_logger.removeHandler(cls.logs)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def assertNoSecret(self, text, where):
        for secret in (self.scenario.token, self.scenario.email):  # assertFalse: never print the haystack
            self.assertFalse(secret in text, f"a secret leaked into {where}")

    def test_every_path_reached_the_outcome_it_is_meant_to_exercise(self):
        expected_codes = {
            "succeeded": None, "replayed": None, "approval_required": "approval_required",
            "approval_mismatch": "approval_mismatch", "approved": None,
            "other_field_invalid": "invalid_arguments", "secret_field_invalid": "invalid_arguments",
            "secret_field_wrong_type": "invalid_arguments", "secret_field_not_json": "invalid_arguments",
            "unexpected_member": "invalid_arguments", "unknown_tool": "tool_not_found",
            "business_failure": "conflict", "crash": "handler_exception", "broken_output": "invalid_tool_output",
            "late_write": "tool_timeout", "late_write_replayed": None,
        }
        self.assertEqual(set(self.scenario.paths), set(expected_codes))
        for path, code in expected_codes.items():
            with self.subTest(path=path):
                error = self.scenario.paths[path].error
                self.assertEqual(error.code if error is not None else None, code)
        self.assertTrue(self.scenario.paths["replayed"].replayed)
        self.assertTrue(self.scenario.paths["late_write_replayed"].replayed)

    def test_secret_output_and_argument_fields_are_masked_not_dropped(self):
        paths = self.scenario.paths
        self.assertEqual(paths["succeeded"].to_model()["output"]["customer_email"], REDACTED)
        self.assertEqual(paths["replayed"].to_model()["output"]["customer_email"], REDACTED)
        details = paths["business_failure"].to_model()["error"]["details"]
        self.assertEqual(details, {"api_token": REDACTED, "customer_email": REDACTED})
        self.assertIn(f"api_token={REDACTED}", paths["approval_required"].error.details["summary"])
        # In process the handler's real output is still there for the application to use.
        self.assertEqual(paths["succeeded"].output["customer_email"], self.scenario.email)

    def test_no_secret_reaches_the_model_view_repr_or_receipt_of_any_result(self):
        for result in self.scenario.results:
            with self.subTest(call=result.call_id, code=result.error.code if result.error else None):
                self.assertNoSecret(json.dumps(result.to_model(), ensure_ascii=False), "to_model()")
                self.assertNoSecret(json.dumps(result.to_record(), ensure_ascii=False), "to_record()")
                self.assertNoSecret(repr(result), "repr()")
                self.assertNoSecret(str(result), "str()")

    def test_no_secret_reaches_the_audit_file(self):
        ((name, data),) = self.scenario.files("audit.jsonl")
        self.assertEqual(len(read_audit_file(self.scenario.audit_path)), len(self.scenario.results))
        self.assertNoSecret(data.decode("utf-8"), name)

    def test_no_secret_reaches_the_receipt_database(self):
        files = self.scenario.files("receipts.sqlite")
        self.assertIn("receipts.sqlite", [name for name, _ in files])
        for name, data in files:
            self.assertNoSecret(data.decode("latin-1"), name)

    def test_no_secret_reaches_the_library_logs(self):
        self.assertTrue(self.logs.lines, "the crash path should have logged a warning")
        self.assertNoSecret("\n".join(self.logs.lines), "the library's warnings")


DATASET = Path(__file__).resolve().parent.parent / "datasets" / "tool-cases.jsonl"


class LabReportsNeverShowSecretsTest(unittest.TestCase):
    """The tool-eval reports, written for real, hold none of the ticket backend's secret values.

    Only the dataset's cases that expect `secrets_masked` are replayed (a secret-bearing subset that
    runs in a fraction of a second). The wide baseline does show secrets to the model, so the secrets
    are really in play; the reports must still hold none of them.
    """

    @classmethod
    def setUpClass(cls):
        from agent_lab.lab.backend import TicketBackend
        from agent_lab.lab.tool_eval import run_tool_eval

        cls.directory = tempfile.TemporaryDirectory()
        lines = [line for line in DATASET.read_text(encoding="utf-8").splitlines()
                 if line.strip() and json.loads(line)["expected"].get("secrets_masked")]
        cls.case_count = len(lines)
        cases = Path(cls.directory.name) / "secret-cases.jsonl"
        cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cls.out = Path(cls.directory.name) / "reports"
        cls.evaluation = run_tool_eval([str(cases)], out_dir=cls.out)
        cls.secrets = TicketBackend().secret_values()

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_the_replayed_cases_put_secrets_in_play(self):
        self.assertGreater(self.case_count, 0, "the dataset has no case that expects secrets_masked")
        self.assertTrue(self.secrets)
        self.assertGreater(self.evaluation.metrics["baseline"]["secret_leaks"], 0)
        self.assertEqual(self.evaluation.metrics["candidate"]["secret_leaks"], 0)

    def test_no_report_file_contains_a_secret(self):
        files = sorted(path for path in self.out.rglob("*") if path.is_file())
        self.assertGreaterEqual(len(files), 6)
        for path in files:
            text = path.read_bytes().decode("utf-8")
            leaked = sorted(secret for secret in self.secrets if secret in text)
            self.assertEqual(len(leaked), 0, f"{len(leaked)} secret value(s) leaked into {path.name}")

    def test_masked_values_appear_as_the_redaction_marker(self):
        self.assertIn(REDACTED, (self.out / "tool-runs.jsonl").read_text(encoding="utf-8"))


if __name__ == "__main__":
    unittest.main()
