"""Issue 8, item 3: redaction covers keys and paths, not only values.

With `redact=("contacts",)` everything below the `contacts` member is secret, its keys included. A
schema violation below it names the field and never what lies below: not in the error message, the
instance path, the keyword path, the details, `to_model()`, `repr(result)`, the stored receipt (SQLite
too) or the audit record. Each secret is a fresh random string, so finding it anywhere is a leak.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import unittest
from typing import Any

from agent_lab.audit import JsonlAuditSink
from agent_lab.calls import ToolCall, ToolResult
from agent_lab.errors import ToolFailure
from agent_lab.idempotency import SqliteReceiptStore
from agent_lab.policy import Actor
from agent_lab.redaction import REDACTED, REDACTED_VIOLATION_KEYWORD, redact_violations
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

ACTOR = Actor(id="agent-1", tenant="acme", permissions={"contacts.write"})

# Output schemas whose `contacts` member is checked by one keyword each; every keyword that can name
# a key (additionalProperties, propertyNames, required, dependentRequired, patternProperties, ...).
CONTACT_SCHEMAS: dict[str, dict[str, Any]] = {
    "additionalProperties false": {"type": "object", "additionalProperties": False},
    "additionalProperties schema": {"type": "object", "additionalProperties": {"type": "integer"}},
    "propertyNames": {"type": "object", "propertyNames": {"maxLength": 3}},
    "required below a key": {"type": "object", "additionalProperties": {"type": "object", "required": ["email"]}},
    "dependentRequired below a key": {
        "type": "object",
        "additionalProperties": {"type": "object", "dependentRequired": {"name": ["email"]}},
    },
    "patternProperties": {"type": "object", "patternProperties": {"^s": {"type": "integer"}}},
    "unevaluatedProperties": {"type": "object", "properties": {"known": {}}, "unevaluatedProperties": False},
    "through a $ref": {"$ref": "#/$defs/book"},
    "anyOf of objects": {"anyOf": [{"type": "object", "additionalProperties": False}, {"type": "string"}]},
    "items below a key": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
}


def output_schema(contacts: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"contacts": contacts, "status": {"type": "string"}},
        "required": ["status"],
        "$defs": {"book": {"type": "object", "additionalProperties": {"type": "integer"}}},
    }


def bad_contacts(secret: str, case: str) -> Any:
    """A `contacts` value that breaks CONTACT_SCHEMAS[case] only below one of its secret keys."""
    if case == "required below a key":
        return {secret: {"name": "x"}}
    if case == "dependentRequired below a key":
        return {secret: {"name": "x"}}
    if case == "items below a key":
        return {secret: [1, "two"]}
    if case == "propertyNames":
        return {secret: 1}
    if case == "patternProperties":
        return {"s" + secret: "not an integer"}
    return {secret: "x"}


def returning(contacts: Any) -> Any:
    return lambda arguments: {"contacts": contacts, "status": "ok"}


class Outputs:
    """A registry with a JSONL audit file and a SQLite receipt store in a temporary directory."""

    def __init__(self, test: unittest.TestCase, spec: ToolSpec, handler: Any) -> None:
        directory = tempfile.TemporaryDirectory()
        test.addCleanup(directory.cleanup)
        self.directory = directory.name
        self.audit = JsonlAuditSink(os.path.join(self.directory, "audit.jsonl"))
        self.receipts = SqliteReceiptStore(os.path.join(self.directory, "receipts.sqlite"))
        self.registry = Registry(audit=self.audit, receipts=self.receipts)
        test.addCleanup(self.close)
        self.registry.register(spec, handler)

    def close(self) -> None:
        self.registry.close()
        self.receipts.close()
        self.audit.close()

    def stored_text(self) -> str:
        self.close()
        texts = []
        for name in sorted(os.listdir(self.directory)):
            with open(os.path.join(self.directory, name), "rb") as stored:
                texts.append(stored.read().decode("latin-1"))
        return "\n".join(texts)


def write_spec(output: dict[str, Any] | None = None, **options: Any) -> ToolSpec:
    settings: dict[str, Any] = dict(
        name="save_contacts",
        description="Save an address book.",
        input_schema={
            "type": "object",
            "properties": {"action_id": {"type": "string"}, "contacts": {"type": "object",
                                                                        "additionalProperties": {"type": "string"}}},
            "required": ["action_id"],
        },
        output_schema=output,
        required_permission="contacts.write",
        effect="write",
        idempotency_key="action_id",
        redact=("contacts",),
    )
    settings.update(options)
    return ToolSpec(**settings)


class SecretKeysTestCase(unittest.TestCase):
    def assertNoSecret(self, secret: str, result: ToolResult, stored: str = "") -> None:
        views = {
            "to_model()": json.dumps(result.to_model(), ensure_ascii=False),
            "to_record()": json.dumps(result.to_record(), ensure_ascii=False),
            "repr()": repr(result),
            "error.message": result.error.message if result.error else "",
            "error.details": json.dumps(result.error.details if result.error else {}, ensure_ascii=False),
            "repr(error)": repr(result.error),
            "stored files": stored,
        }
        for where, text in views.items():
            self.assertFalse(_holds(text, secret), f"the secret key leaked into {where}")  # never print the haystack


def _holds(text: str, secret: str) -> bool:
    """Whether `text` holds `secret`. A number counts as a whole token only: call ids and fingerprints
    are hexadecimal, and one holds the digits 4821 in about one call in a thousand."""
    if re.fullmatch(r"-?[0-9.]+", secret):
        return re.search(rf"(?<![\w.]){re.escape(secret)}(?![\w.])", text) is not None
    return secret in text


class OutputKeysTest(SecretKeysTestCase):
    def test_a_secret_key_that_breaks_the_output_schema_never_leaves_the_process(self) -> None:
        for case, contacts_schema in CONTACT_SCHEMAS.items():
            with self.subTest(case=case):
                secret = "k" + secrets.token_hex(12)
                outputs = Outputs(self, write_spec(output_schema(contacts_schema)), returning(bad_contacts(secret, case)))
                result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
                self.assertEqual(result.error.code, "invalid_tool_output")
                self.assertNoSecret(secret, result, outputs.stored_text())
                violations = result.error.details["violations"]
                self.assertEqual([v["instance_path"] for v in violations], ["/contacts"])
                at_the_field = case == "anyOf of objects"  # no branch passes: reported at /contacts itself
                self.assertEqual(violations[0]["keyword"], "anyOf" if at_the_field else REDACTED_VIOLATION_KEYWORD)
                self.assertIn("'contacts'", result.error.message)

    def test_the_keyword_path_stops_where_the_schema_reaches_the_field(self) -> None:
        secret = "k" + secrets.token_hex(12)
        outputs = Outputs(self, write_spec(output_schema(CONTACT_SCHEMAS["through a $ref"])),
                          lambda arguments: {"contacts": {secret: "x"}, "status": "ok"})
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
        (violation,) = result.error.details["violations"]
        self.assertEqual(violation["keyword_path"], "/properties/contacts")

    def test_a_nan_under_a_secret_key_is_reported_at_the_field(self) -> None:
        secret = "k" + secrets.token_hex(12)
        outputs = Outputs(self, write_spec(output_schema({"type": "object"})),
                          lambda arguments: {"contacts": {secret: float("nan")}, "status": "ok"})
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
        self.assertEqual(result.error.code, "invalid_tool_output")
        self.assertNoSecret(secret, result, outputs.stored_text())
        self.assertEqual(result.error.details["violations"][0]["instance_path"], "/contacts")

    def test_a_non_string_key_below_a_secret_key_is_reported_at_the_field(self) -> None:
        secret = "k" + secrets.token_hex(12)
        outputs = Outputs(self, write_spec(output_schema({"type": "object"})),
                          lambda arguments: {"contacts": {secret: {7: "x"}}, "status": "ok"})
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
        self.assertEqual(result.error.code, "invalid_tool_output")
        self.assertNoSecret(secret, result, outputs.stored_text())

    def test_many_bad_secret_keys_make_one_violation_so_their_number_stays_hidden(self) -> None:
        keys = ["k" + secrets.token_hex(8) for _ in range(5)]
        outputs = Outputs(self, write_spec(output_schema({"type": "object", "additionalProperties": False})),
                          lambda arguments: {"contacts": dict.fromkeys(keys, 1), "status": "ok"})
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
        self.assertEqual(result.error.details["violation_count"], 1)
        for key in keys:
            self.assertNoSecret(key, result, "")

    def test_a_replayed_receipt_shows_no_secret_key_either(self) -> None:
        secret = "k" + secrets.token_hex(12)
        outputs = Outputs(self, write_spec(output_schema({"type": "object", "propertyNames": {"maxLength": 3}})),
                          lambda arguments: {"contacts": {secret: 1}, "status": "ok"})
        call = ToolCall("save_contacts", {"action_id": "a-1"})
        outputs.registry.invoke(call, actor=ACTOR)
        replay = outputs.registry.invoke(call, actor=ACTOR)
        self.assertTrue(replay.replayed)
        self.assertNoSecret(secret, replay, outputs.stored_text())

    def test_violations_outside_the_secret_field_keep_their_paths(self) -> None:
        outputs = Outputs(self, write_spec(output_schema({"type": "object"})),
                          lambda arguments: {"contacts": {}, "status": 5})
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1"}), actor=ACTOR)
        (violation,) = result.error.details["violations"]
        self.assertEqual((violation["instance_path"], violation["keyword"]), ("/status", "type"))


class InputKeysTest(SecretKeysTestCase):
    def setUp(self) -> None:
        self.secret = "k" + secrets.token_hex(12)
        self.outputs = Outputs(self, write_spec(), lambda arguments: {"saved": True})

    def invoke(self, contacts: Any) -> ToolResult:
        return self.outputs.registry.invoke(
            ToolCall("save_contacts", {"action_id": "a-1", "contacts": contacts}), actor=ACTOR)

    def test_invalid_arguments_below_a_secret_field_name_only_the_field(self) -> None:
        for contacts in ({self.secret: 1}, {self.secret: float("nan")}, {self.secret: 10 ** 5000},
                         {self.secret: {"nested": [1]}}):
            with self.subTest(value=type(contacts[self.secret]).__name__):
                result = self.invoke(contacts)
                self.assertEqual(result.error.code, "invalid_arguments")
                self.assertEqual([v["instance_path"] for v in result.error.details["violations"]], ["/contacts"])
                self.assertNoSecret(self.secret, result)
        self.assertNoSecret(self.secret, result, self.outputs.stored_text())

    def test_a_violation_of_the_secret_field_itself_still_names_its_rule(self) -> None:
        result = self.invoke("not an object")
        (violation,) = result.error.details["violations"]
        self.assertEqual((violation["instance_path"], violation["keyword"]), ("/contacts", "type"))


class ToolFailureTest(SecretKeysTestCase):
    def test_a_tool_failure_repeating_a_secret_argument_is_masked_in_message_details_and_repr(self) -> None:
        secret = "k" + secrets.token_hex(12)

        def handler(arguments):
            raise ToolFailure("conflict", f"contact {secret} already exists",
                              details={"contacts": arguments["contacts"], "hint": f"remove {secret} first",
                                       secret: "as a key"})

        outputs = Outputs(self, write_spec(), handler)
        result = outputs.registry.invoke(
            ToolCall("save_contacts", {"action_id": "a-1", "contacts": {secret: "x"}}), actor=ACTOR)
        self.assertEqual(result.error.code, "conflict")
        self.assertNoSecret(secret, result, outputs.stored_text())
        self.assertEqual(result.error.details["contacts"], REDACTED)
        self.assertIn(REDACTED, result.error.message)


    def test_a_tool_failure_repeating_a_secret_number_in_its_details_is_masked(self) -> None:
        for number in (4821, 98765432.5, -70001):
            with self.subTest(number=number):
                def handler(arguments):
                    pin = arguments["contacts"]["pin"]
                    raise ToolFailure("conflict", "That PIN is taken.", details={"pin_tried": pin, "tries": [pin, 2]})

                spec = write_spec(input_schema={"type": "object", "properties": {"action_id": {"type": "string"},
                                                                                 "contacts": {"type": "object"}},
                                                "required": ["action_id"]})
                outputs = Outputs(self, spec, handler)
                result = outputs.registry.invoke(
                    ToolCall("save_contacts", {"action_id": "a-1", "contacts": {"pin": number}}), actor=ACTOR)
                self.assertEqual(result.error.code, "conflict")
                self.assertEqual(result.error.details, {"pin_tried": REDACTED, "tries": [REDACTED, 2]})
                self.assertNoSecret(json.dumps(number), result, outputs.stored_text())


    def test_a_short_secret_argument_copied_into_a_tool_failure_is_masked_but_longer_numbers_are_kept(self) -> None:
        def handler(arguments):
            cvv = arguments["cvv"]
            raise ToolFailure("conflict", f"Card refused: CVV {cvv} does not match order 17375.",
                              details={"hint": f"cvv={cvv}", "tried": int(cvv), "order": 17375})

        spec = write_spec(input_schema={"type": "object", "properties": {"action_id": {"type": "string"},
                                                                         "cvv": {"type": "string"}},
                                        "required": ["action_id"]},
                          redact=("cvv",))
        outputs = Outputs(self, spec, handler)
        result = outputs.registry.invoke(ToolCall("save_contacts", {"action_id": "a-1", "cvv": "737"}), actor=ACTOR)
        self.assertEqual(result.error.code, "conflict")
        self.assertEqual(result.error.message, f"Card refused: CVV {REDACTED} does not match order 17375.")
        self.assertEqual(result.error.details, {"hint": f"cvv={REDACTED}", "tried": REDACTED, "order": 17375})
        # (the SQLite file is not searched, and the call's random ids are taken out of what is: a hex
        # fingerprint or call id holds "737" between letters by chance, about one call in a hundred)
        for shown in (json.dumps(result.to_model()), repr(result), json.dumps(result.to_record())):
            for random_id in (result.fingerprint, result.call_id):
                shown = shown.replace(str(random_id), "")
            self.assertIsNone(re.search(r"(?<!\d)737(?!\d)", shown))

    def login_refused(self, handler: Any, password: str) -> tuple[ToolResult, Outputs]:
        """The result of one call with a redacted `password` to a tool whose handler is `handler`."""
        spec = write_spec(input_schema={"type": "object", "properties": {"action_id": {"type": "string"},
                                                                         "password": {"type": "string"}},
                                        "required": ["action_id"]}, redact=("password",))
        outputs = Outputs(self, spec, handler)
        call = ToolCall("save_contacts", {"action_id": "a-1", "password": password})
        return outputs.registry.invoke(call, actor=ACTOR), outputs

    def test_a_tool_failure_quoting_the_arguments_as_a_repr_or_as_json_is_masked(self) -> None:
        # The ordinary way to say what was refused: f"{arguments}" or json.dumps(arguments) spells a
        # backslash, a line break or a non-ASCII letter of the secret otherwise than the secret itself.
        for secret in ("C:\\vault\\Pa55word", "p\u00e4ssw\u00f6rt-2024", "line1\nline2-secret", "correct\thorse  staple"):
            with self.subTest(secret=secret):
                def handler(arguments):
                    raise ToolFailure("conflict", f"login refused for {arguments}",
                                      details={"request": json.dumps(arguments), "shown": repr(arguments)})

                result, _ = self.login_refused(handler, secret)
                self.assertEqual(result.error.code, "conflict")
                shown = "\n".join([result.error.message, *result.error.details.values(), repr(result),
                                   json.dumps(result.to_model(), ensure_ascii=False)])
                for spelling in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1],
                                 json.dumps(secret, ensure_ascii=False)[1:-1], " ".join(secret.split())):
                    self.assertFalse(spelling in shown, "a spelling of the secret leaked")  # never print it
                self.assertIn(REDACTED, result.error.message)

    def test_a_tool_failure_code_that_repeats_a_secret_is_masked_for_the_model_and_the_audit(self) -> None:
        secret = "tok_live_" + secrets.token_hex(6)

        def handler(arguments):
            raise ToolFailure(f"key_revoked:{arguments['password']}", category="policy")

        result, outputs = self.login_refused(handler, secret)
        self.assertEqual(result.error.code, f"key_revoked:{REDACTED}")
        self.assertNoSecret(secret, result, outputs.stored_text())



class RedactViolationsTest(unittest.TestCase):
    def violation(self, instance_path: str, keyword_path: str, keyword: str = "type") -> dict[str, str]:
        return {"instance_path": instance_path, "keyword_path": keyword_path, "keyword": keyword,
                "message": f"'{instance_path[1:]}' breaks {keyword}"}

    def test_paths_through_a_secret_field_stop_at_it(self) -> None:
        cases = [
            ("/contacts/s", "/properties/contacts/additionalProperties", "/contacts", "/properties/contacts"),
            ("/a/0/contacts/s/x", "/properties/a/items/$ref/anyOf/1/properties/contacts/patternProperties/^s/type",
             "/a/0/contacts", "/properties/a/items/$ref/anyOf/1/properties/contacts"),
            ("/contacts/s", "/additionalProperties/propertyNames", "/contacts", "/additionalProperties"),
            ("/contacts/s", "", "/contacts", ""),
            ("/contacts/a~1b/c", "/properties/contacts/additionalProperties/required", "/contacts",
             "/properties/contacts"),
        ]
        for instance_path, keyword_path, field, field_keyword_path in cases:
            with self.subTest(instance_path=instance_path, keyword_path=keyword_path):
                (reported,) = redact_violations([self.violation(instance_path, keyword_path)], ["contacts"])
                self.assertEqual((reported["instance_path"], reported["keyword_path"]), (field, field_keyword_path))
                self.assertEqual(reported["keyword"], REDACTED_VIOLATION_KEYWORD)
                self.assertNotIn(instance_path[len(field):], reported["message"])

    def test_violations_at_or_beside_the_field_are_kept_and_the_input_is_not_mutated(self) -> None:
        kept = [self.violation("/contacts", "/properties/contacts/type"),
                self.violation("/other/x", "/properties/other/additionalProperties")]
        given = [dict(item) for item in kept]
        self.assertEqual(redact_violations(given, ("contacts",)), kept)
        self.assertEqual(given, kept)

    def test_without_secret_fields_nothing_changes(self) -> None:
        violations = [self.violation("/contacts/s", "/properties/contacts/additionalProperties")]
        self.assertEqual(redact_violations(violations, ()), violations)


if __name__ == "__main__":
    unittest.main()
