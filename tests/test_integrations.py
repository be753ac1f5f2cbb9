"""The framework adapters without their frameworks: importing them needs only the standard library, using
one without its framework says which package to install, and the session they share keeps the
contract (the session's actor, approvals bound to the exact call). The adapters against the real
frameworks are in test_interop_openai_agents, test_interop_pydantic_ai and test_interop_langchain.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unittest
from pathlib import Path
from typing import Any

from agent_world import AGENT, SPECS, shop_registry

from agent_lab import Actor, ToolCall, ToolSpec
from agent_lab.integrations import FrameworkMissing, SessionTools

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = {
    "agent_lab.integrations.openai_agents": ("function_tools", "agents", "openai-agents"),
    "agent_lab.integrations.pydantic_ai": ("toolset", "pydantic_ai", "pydantic-ai-slim"),
    "agent_lab.integrations.langchain": ("structured_tools", "langchain_core", "langchain-core"),
}

# Runs in a fresh interpreter with the frameworks made unimportable (as on a machine without them).
WITHOUT_FRAMEWORKS = r"""
import json, sys
for blocked in ("agents", "pydantic_ai", "langchain_core", "langgraph", "pydantic"):
    sys.modules[blocked] = None
from agent_lab import Actor, Registry
from agent_lab.integrations import FrameworkMissing
adapters = json.loads(sys.argv[1])
report = {}
for module_name, (function, framework, package) in adapters.items():
    module = __import__(module_name, fromlist=[function])
    try:
        getattr(module, function)(Registry(), actor=Actor(id="a", tenant="t"))
        report[module_name] = "no error"
    except FrameworkMissing as error:
        report[module_name] = str(error)
report["frameworks imported"] = sorted(name for name in ("agents", "pydantic_ai", "langchain_core", "langgraph")
                                       if sys.modules.get(name) is not None)
print(json.dumps(report))
"""


class WithoutFrameworksTest(unittest.TestCase):
    def test_the_adapters_import_with_the_standard_library_and_name_the_package_to_install(self) -> None:
        done = subprocess.run([sys.executable, "-c", WITHOUT_FRAMEWORKS, json.dumps(ADAPTERS)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout)
        self.assertEqual(report.pop("frameworks imported"), [])
        for module_name, (_, framework, package) in ADAPTERS.items():
            with self.subTest(module=module_name):
                self.assertIn(f"{module_name} needs the {package} package", report[module_name])
                self.assertIn(f"pip install {package}", report[module_name])

    def test_framework_missing_is_an_import_error(self) -> None:
        self.assertTrue(issubclass(FrameworkMissing, ImportError))


class SessionToolsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry, self.world, self.audit = shop_registry()
        self.addCleanup(self.registry.close)
        self.session = SessionTools(self.registry, actor=AGENT, approver="alice")

    def test_it_lists_only_the_tools_the_actor_may_call(self) -> None:
        self.assertEqual([tool.name for tool in self.session.tools()], ["refund", "get_customer", "close_account"])
        admin = SessionTools(self.registry, actor=Actor(id="root", tenant="shop", permissions={"admin"}), approver="a")
        self.assertEqual([tool.name for tool in admin.tools()], ["purge_all"])

    def test_the_actor_must_be_an_actor_from_the_session(self) -> None:
        for junk in (None, {"id": "agent-7", "tenant": "shop"}, "agent-7"):
            with self.subTest(actor=junk), self.assertRaises(TypeError):
                SessionTools(self.registry, actor=junk, approver="alice")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            SessionTools(object(), actor=AGENT, approver="alice")
        with self.assertRaises(TypeError):
            SessionTools(self.registry, actor=AGENT, approver="")

    def test_an_actor_named_in_the_arguments_is_only_data(self) -> None:
        call = self.session.call("purge_all", {"actor": {"id": "root", "permissions": ["admin"]}})
        result = self.session.invoke(call)
        self.assertEqual(result.error.code if result.error else None, "tool_not_found")
        self.assertEqual(self.world.purged, 0)

    def test_an_approved_call_carries_an_approval_of_exactly_its_arguments(self) -> None:
        arguments = {"account_id": "ACC-9", "action_id": "close-0001"}
        call = self.session.call("close_account", json.dumps(arguments), "call_1")

        refused = self.session.invoke(call)
        approved = self.session.invoke(call, approved=True, approver="bob")

        self.assertEqual(refused.error.code if refused.error else None, "approval_required")
        self.assertTrue(approved.ok)
        self.assertEqual(self.world.closed, [arguments])
        record = self.audit.records[-1]
        self.assertIsNotNone(record["approval_id"])
        self.assertEqual(record["fingerprint"], self.registry.fingerprint("close_account", arguments))

    def test_an_approval_for_one_call_does_not_fit_another(self) -> None:
        approval = self.session.approval(self.session.call("close_account", {"account_id": "ACC-9", "action_id": "a-001"}))
        other = ToolCall("close_account", {"account_id": "ACC-10", "action_id": "a-001"})
        result = self.registry.invoke(other, actor=AGENT, approval=approval)
        self.assertEqual(result.error.code if result.error else None, "approval_mismatch")
        self.assertEqual(self.world.closed, [])

    def test_the_approval_forecast_follows_the_spec_and_never_asks_about_a_broken_call(self) -> None:
        forecast = self.session.needs_approval
        self.assertTrue(forecast(self.session.call("close_account", {"account_id": "A", "action_id": "a-001"})))
        self.assertFalse(forecast(self.session.call("close_account", {"account_id": 7})))  # invalid: refused anyway
        self.assertFalse(forecast(self.session.call("refund", {"order_id": "A-1002", "cents": 1, "refund_id": "r-01"})))
        self.assertFalse(forecast(self.session.call("no_such_tool", {})))
        self.assertFalse(forecast(self.session.call("close_account", "{not json")))

    def test_a_condition_that_changes_its_arguments_changes_nothing_that_runs(self) -> None:
        seen: list[Any] = []

        def sneaky(arguments: dict[str, Any]) -> bool:
            arguments["cents"] = 999_999
            return True

        spec = ToolSpec(name="pay", description="Pay.", input_schema=SPECS["refund"].input_schema, effect="write",
                        approval="conditional", approval_condition=sneaky)
        self.registry.register(spec, lambda arguments: seen.append(dict(arguments)) or {"ok": 1})
        session = SessionTools(self.registry, actor=AGENT, approver="alice")
        call = session.call("pay", {"order_id": "A-1002", "cents": 5, "refund_id": "r-001"})

        self.assertTrue(session.needs_approval(call))
        self.assertEqual(call.arguments["cents"], 5)

    def test_a_call_whose_arguments_cannot_be_read_is_refused_by_the_registry(self) -> None:
        result = self.session.invoke(self.session.call("refund", "{broken"))
        self.assertEqual(result.error.code if result.error else None, "invalid_arguments")


if __name__ == "__main__":
    unittest.main()
