"""`@tool` with pydantic, attacked: what the author declared secret in pydantic's own way stays secret.

Found by the adversarial review of main (6dd0a37), closed on branch hred (a field whose schema says
`writeOnly` or `format: password` is added to the spec's `redact` by `@tool` and `ToolSpec.from_function`):

- SIGNATURE-SECRETSTR-SHOWN: a parameter model with a `SecretStr` field (its schema says `format:
  password`, `writeOnly: true`) gets no `redact` entry, so the secret is shown in full wherever arguments
  are: the approval request's summary (read by the approving person, kept in a LangGraph checkpoint or
  pydantic-ai's deferred requests, and read by the model), tool-eval's reports.
"""

from __future__ import annotations

import json
import unittest

from agent_lab import Actor, Registry, ToolCall, tool

try:
    from pydantic import BaseModel, SecretStr
except ImportError:  # locally the test skips; in CI (.ci/run) pydantic is installed and no skip passes
    BaseModel = None  # type: ignore[assignment,misc]

PASSWORD = "s3cr3t-pw"  # short: the summary is cut at a few dozen characters

if BaseModel is not None:
    class Login(BaseModel):
        user: str
        password: SecretStr

    @tool(required_permission=None, effect="write", approval="always")
    def log_in(login: Login) -> dict:
        """Log a user in to the legacy system; a person approves each login."""
        return {"ok": True}


@unittest.skipIf(BaseModel is None, "pydantic is not installed (pip install pydantic)")
class ASecretStrStaysSecretTest(unittest.TestCase):
    def test_a_secret_str_argument_is_not_in_the_approval_request(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(log_in.spec, log_in.handler)
        result = registry.invoke(ToolCall("log_in", {"login": {"user": "ada", "password": PASSWORD}}),
                                 actor=Actor(id="agent-1", tenant="acme"))
        self.assertEqual(result.error.code if result.error else None, "approval_required")
        self.assertNotIn(PASSWORD, json.dumps(result.to_model()))


class SchemasThatDeclareSecretsTest(unittest.TestCase):
    def test_a_member_declared_secret_in_any_branch_or_item_is_redacted_by_name(self) -> None:
        from agent_lab.function_schema import secret_fields

        secret = {"type": "string", "writeOnly": True}
        schema = {"type": "object", "properties": {
            "pin": {"anyOf": [secret, {"type": "null"}]}, "keys": {"type": "array", "items": secret},
            "login": {"type": "object", "properties": {"password": {"type": "string", "format": "password"},
                                                       "user": {"type": "string"}}},
            "note": {"type": "string", "description": "writeOnly"}}}
        self.assertEqual(sorted(secret_fields(schema)), ["keys", "password", "pin"])


if __name__ == "__main__":
    unittest.main()
