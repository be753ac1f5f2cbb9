"""Secret fields (ToolSpec.redact) never leave the process: not to the model, the audit file, the
approval summary, the stored receipt, nor the warning logs."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import unittest

from agent_lab.audit import AUDIT_FIELDS, AUDIT_STEPS, JsonlAuditSink
from agent_lab.calls import ToolCall
from agent_lab.idempotency import SqliteReceiptStore
from agent_lab.registry import STEPS, Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import WRITER

TOKEN = "sk-live-0123456789abcdef"
EMAIL = "alice.secret@example.com"

SPEC = ToolSpec(
    name="send_receipt",
    description="E-mail a receipt to the customer.",
    input_schema={
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "action_id": {"type": "string"},
                       "api_token": {"type": "string"}},
        "required": ["order_id", "action_id", "api_token"],
        "additionalProperties": False,
    },
    effect="write",
    idempotency_key="action_id",
    redact=("api_token", "customer_email"),
)
CALL = ToolCall("send_receipt", {"order_id": "O-1", "action_id": "a-1", "api_token": TOKEN})


def send_receipt(arguments):
    return {"sent": True, "customer_email": EMAIL, "contact": {"customer_email": EMAIL}}


class SecretsStayInTheProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.audit_path = os.path.join(directory.name, "audit.jsonl")
        self.receipts_path = os.path.join(directory.name, "receipts.sqlite3")
        self.audit = JsonlAuditSink(self.audit_path)
        self.addCleanup(self.audit.close)
        self.receipts = SqliteReceiptStore(self.receipts_path)
        self.addCleanup(self.receipts.close)
        self.registry = Registry(audit=self.audit, receipts=self.receipts)
        self.addCleanup(self.registry.close)

    def files_text(self) -> str:
        self.audit.close()
        self.receipts.close()
        texts = []
        for path in (self.audit_path, self.receipts_path, self.receipts_path + "-wal"):
            if os.path.exists(path):
                with open(path, "rb") as stored:
                    texts.append(stored.read().decode("utf-8", "replace"))
        return "\n".join(texts)

    def assert_no_secret(self, text: str) -> None:
        self.assertNotIn(TOKEN, text)
        self.assertNotIn(EMAIL, text)

    def test_model_view_receipt_replay_and_audit_file_mask_secret_fields(self) -> None:
        self.registry.register(SPEC, send_receipt)
        first = self.registry.invoke(CALL, actor=WRITER)
        replay = self.registry.invoke(CALL, actor=WRITER)
        self.assertTrue(first.ok and replay.replayed)
        self.assertEqual(first.to_model()["output"]["customer_email"], "[redacted]")
        self.assertEqual(first.output["customer_email"], EMAIL)  # the application itself still has it
        for view in (first.to_model(), replay.to_model(), first.to_record(), repr(first), repr(replay)):
            self.assert_no_secret(repr(view))
        self.assert_no_secret(self.files_text())

    def test_the_approval_summary_masks_secret_arguments(self) -> None:
        self.registry.register(dataclasses.replace(SPEC, approval="always"), send_receipt)
        result = self.registry.invoke(CALL, actor=WRITER)
        self.assertEqual(result.error.code, "approval_required")
        self.assertIn("api_token=[redacted]", result.error.details["summary"])
        self.assert_no_secret(repr(result.to_model()))
        self.assert_no_secret(self.files_text())

    def test_an_exception_carrying_a_secret_is_not_shown_or_logged_at_warning_level(self) -> None:
        def leaky(arguments):
            raise RuntimeError(f"auth failed for token {arguments['api_token']}")

        self.registry.register(SPEC, leaky)
        with self.assertLogs("agent_lab", level=logging.WARNING) as logs:
            result = self.registry.invoke(CALL, actor=WRITER)
        self.assertEqual(result.error.code, "handler_exception")
        self.assert_no_secret(repr(result.to_model()))
        self.assert_no_secret("\n".join(logs.output))
        self.assert_no_secret(self.files_text())

    def test_audit_records_have_the_contract_shape_and_step_names(self) -> None:
        self.assertEqual(STEPS, AUDIT_STEPS)
        self.registry.register(SPEC, send_receipt)
        self.registry.invoke(CALL, actor=WRITER)
        self.audit.close()
        from agent_lab.audit import read_audit_file

        (record,) = read_audit_file(self.audit_path)
        self.assertEqual(set(record), set(AUDIT_FIELDS))
        self.assertEqual((record["step"], record["outcome"], record["tenant"]), ("record", "succeeded", "acme"))


if __name__ == "__main__":
    unittest.main()
