"""The official MCP Python SDK client through the contract gateway over Streamable HTTP
(`serve-mcp --upstream ... --http`), as tests/test_interop_gateway.py shows it over stdio.

Against the counting upstream (tests/mcp_gateway_upstream.py, built with the SDK's own server) and the
reference server mcp-server-time: tools listed with the upstream's schemas, invalid arguments refused
with no upstream call, a keyed write retried five times reaching the upstream once, an approval-required
call confirmed through an elicitation on the call's event stream (handshake era) or answered
`input_required` (2026-07-28) and run once, a redacted field, an answer that breaks its outputSchema
refused, a hidden tool absent and answered like an unknown one, and an Origin from another site refused.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from tests.mcp_http_support import http_server
from tests.mcp_reference_servers import command_line, missing_reason, named

try:
    import mcp
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.types import ElicitResult

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "gateway"
UPSTREAM = REPO_ROOT / "tests" / "mcp_gateway_upstream.py"
SESSION_TIMEOUT_S = 90.0
PERMISSIONS = ("notes:write", "bank:write", "profile:read", "sensor:read")  # not "admin"


def wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def structured_error(result: dict[str, Any]) -> dict[str, Any]:
    return json.loads(result["content"][0]["text"])["error"]


def protocol_error_type() -> Any:
    from mcp.shared import exceptions

    return getattr(exceptions, "MCPError", None) or getattr(exceptions, "McpError")


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class GatewayHttpCase(unittest.TestCase):
    """One gateway process (and its upstream) per test class, over HTTP; a scratch folder holds the
    upstream's count file and the SQLite receipts. Tests use distinct idempotency keys."""

    upstream: str
    policy: Path
    permissions: tuple[str, ...] = PERMISSIONS

    @classmethod
    def setUpClass(cls) -> None:
        scratch = tempfile.TemporaryDirectory(prefix="agent-lab-gw-http-")
        cls.addClassCleanup(scratch.cleanup)
        cls.scratch = Path(scratch.name)
        cls.count_file = cls.scratch / "calls.log"
        args = ["--upstream", cls.upstream_command(), "--policy", str(cls.policy),
                "--receipts", f"sqlite:{cls.scratch / 'receipts.db'}"]
        for permission in cls.permissions:
            args += ["--permission", permission]
        context = http_server(args)
        cls.server = context.__enter__()
        cls.addClassCleanup(context.__exit__, None, None, None)

    @classmethod
    def upstream_command(cls) -> str:
        raise NotImplementedError

    def upstream_calls(self, tool: str) -> int:
        if not self.count_file.exists():
            return 0
        return self.count_file.read_text(encoding="utf-8").split().count(tool)

    def handshake(self, scenario: Any, *, elicitation: Any = None, headers: dict[str, str] | None = None) -> Any:
        async def main() -> Any:
            async with create_mcp_http_client(headers=headers) as client:
                async with streamable_http_client(self.server.url, http_client=client) as (read_stream, write_stream):
                    async with ClientSession(read_stream, write_stream, elicitation_callback=elicitation) as session:
                        await session.initialize()
                        return await scenario(session)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))

    def stateless(self, scenario: Any, *, elicitation: Any = None) -> Any:
        async def main() -> Any:
            async with mcp.Client(self.server.url, elicitation_callback=elicitation) as client:
                assert client.session.protocol_version == "2026-07-28"
                return await scenario(client)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))


class CountingUpstreamOverHttpTest(GatewayHttpCase):
    policy = FIXTURES / "counting-policy.json"

    @classmethod
    def upstream_command(cls) -> str:
        return " ".join(shlex.quote(word) for word in (sys.executable, str(UPSTREAM), str(cls.count_file)))

    def test_tools_are_listed_with_the_upstreams_schemas_and_the_hidden_one_is_absent(self) -> None:
        async def listing(session: Any) -> dict[str, Any]:
            return {tool["name"]: tool for tool in wire(await session.list_tools())["tools"]}

        for tools in (self.handshake(listing), self.stateless(listing)):
            self.assertNotIn("admin_reset", tools)  # the actor lacks "admin"
            self.assertEqual(tools["get_reading"]["outputSchema"]["properties"]["celsius"], {"type": "number"})
            self.assertEqual(tools["record_note"]["inputSchema"]["properties"]["note"]["type"], "string")
            self.assertIn("request_id", tools["record_note"]["inputSchema"]["required"])

    def test_a_hidden_tool_is_answered_exactly_like_an_unknown_one(self) -> None:
        async def both(session: Any) -> list[Any]:
            answers = []
            for name in ("admin_reset", "no_such_tool"):
                try:
                    await session.call_tool(name, {"confirm": True})
                except protocol_error_type() as error:
                    answers.append((error.error.code, error.error.message, error.error.data["code"]))
            return answers

        hidden, unknown = self.handshake(both)
        self.assertEqual(hidden, unknown)
        self.assertEqual(hidden[0], -32602)
        self.assertEqual(self.upstream_calls("admin_reset"), 0)

    def test_invalid_arguments_are_refused_without_reaching_the_upstream(self) -> None:
        async def bad(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("record_note", {"note": 5, "request_id": "h-bad"}))

        before = self.upstream_calls("record_note")
        for result in (self.handshake(bad), self.stateless(bad)):
            self.assertTrue(result["isError"])
            self.assertEqual(structured_error(result)["code"], "invalid_arguments")
        self.assertEqual(self.upstream_calls("record_note"), before)

    def test_a_keyed_write_retried_five_times_reaches_the_upstream_once(self) -> None:
        async def retried(session: Any) -> list[dict[str, Any]]:
            return [wire(await session.call_tool("record_note", {"note": "hello", "request_id": "h-1"}))
                    for _ in range(5)]

        before = self.upstream_calls("record_note")
        results = self.handshake(retried)
        self.assertTrue(all(not result.get("isError") for result in results), results)
        self.assertEqual({json.dumps(result["structuredContent"]) for result in results},
                         {json.dumps({"recorded": "hello"})})
        self.assertEqual(self.upstream_calls("record_note"), before + 1)

    def test_a_redacted_field_never_reaches_the_client(self) -> None:
        async def profile(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("get_profile", {"user": "ada"}))

        result = self.handshake(profile)
        self.assertNotIn("tok-live-5f3c9a", json.dumps(result))
        self.assertEqual(result["structuredContent"]["user"], "ada")

    def test_an_answer_that_breaks_the_upstreams_output_schema_is_refused(self) -> None:
        async def reading(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("get_reading", {"sensor": "boiler"}))

        result = self.handshake(reading)
        self.assertTrue(result["isError"])
        self.assertEqual(structured_error(result)["code"], "invalid_tool_output")
        self.assertNotIn("very hot", json.dumps(result))

    def test_handshake_era_approval_is_an_elicitation_on_the_event_stream_and_runs_once(self) -> None:
        asked: list[Any] = []

        async def confirm(context: Any, params: Any) -> Any:
            asked.append(wire(params))
            return ElicitResult(action="accept", content={"confirm": True})

        async def transfer(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("confirm_transfer",
                                                {"account": "acc-9", "amount": 40, "request_id": "h-t-1"}))

        before = self.upstream_calls("confirm_transfer")
        result = self.handshake(transfer, elicitation=confirm)
        self.assertFalse(result.get("isError"), result)
        self.assertEqual(len(asked), 1)
        self.assertIn("acc-9", asked[0]["message"])
        self.assertEqual(asked[0]["requestedSchema"]["properties"]["confirm"]["type"], "boolean")
        self.assertEqual(self.upstream_calls("confirm_transfer"), before + 1)

    def test_a_declined_elicitation_is_approval_declined_and_nothing_runs(self) -> None:
        async def decline(context: Any, params: Any) -> Any:
            return ElicitResult(action="decline")

        async def transfer(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("confirm_transfer",
                                                {"account": "acc-9", "amount": 41, "request_id": "h-t-2"}))

        before = self.upstream_calls("confirm_transfer")
        result = self.handshake(transfer, elicitation=decline)
        self.assertEqual(structured_error(result)["code"], "approval_declined")
        self.assertEqual(self.upstream_calls("confirm_transfer"), before)

    def test_stateless_approval_is_input_required_and_runs_once_after_confirmation(self) -> None:
        asked: list[Any] = []

        async def confirm(context: Any, params: Any) -> Any:
            asked.append(wire(params))
            return ElicitResult(action="accept", content={"confirm": True})

        async def transfer(client: Any) -> dict[str, Any]:
            return wire(await client.call_tool("confirm_transfer",
                                               {"account": "acc-7", "amount": 5, "request_id": "h-t-4"}))

        before = self.upstream_calls("confirm_transfer")
        result = self.stateless(transfer, elicitation=confirm)
        self.assertFalse(result.get("isError"), result)
        self.assertEqual(result["structuredContent"], {"account": "acc-7", "moved": 5})
        self.assertEqual(len(asked), 1)
        self.assertEqual(self.upstream_calls("confirm_transfer"), before + 1)

    def test_stateless_input_required_result_is_answered_first_and_nothing_runs_until_confirmed(self) -> None:
        async def first_round(client: Any) -> Any:
            return wire(await client.session.call_tool(
                "confirm_transfer", {"account": "acc-1", "amount": 3, "request_id": "h-t-5"},
                allow_input_required=True))

        async def never(context: Any, params: Any) -> Any:
            raise AssertionError("the test reads the first round itself")

        before = self.upstream_calls("confirm_transfer")
        first = self.stateless(first_round, elicitation=never)
        self.assertEqual(first["resultType"], "input_required")
        self.assertEqual(first["inputRequests"]["confirm"]["method"], "elicitation/create")
        self.assertIn("acc-1", first["inputRequests"]["confirm"]["params"]["message"])
        self.assertEqual(self.upstream_calls("confirm_transfer"), before)

    def test_an_origin_from_another_site_is_refused(self) -> None:
        async def listing(session: Any) -> Any:
            return await session.list_tools()

        with self.assertRaises(Exception) as refused:
            self.handshake(listing, headers={"Origin": "http://evil.example"})
        self.assertIn("Forbidden", str(refused.exception) + repr(getattr(refused.exception, "exceptions", "")))
        allowed = self.handshake(listing, headers={"Origin": "http://localhost:6274"})  # a local inspector
        self.assertTrue(wire(allowed)["tools"])


class ReferenceUpstreamOverHttpTest(GatewayHttpCase):
    """mcp-server-time behind the gateway, over HTTP: the actor may read the time but not convert it."""

    policy = FIXTURES / "time-policy.json"
    permissions = ("time:read",)

    @classmethod
    def setUpClass(cls) -> None:
        reason = missing_reason(named("time"), sdk=True)
        if reason is not None:
            raise unittest.SkipTest(reason)
        super().setUpClass()

    @classmethod
    def upstream_command(cls) -> str:
        return command_line(named("time"), str(cls.scratch))

    def test_the_reference_servers_tools_are_served_with_its_schemas(self) -> None:
        async def scenario(session: Any) -> tuple[Any, ...]:
            tools = {tool["name"]: tool for tool in wire(await session.list_tools())["tools"]}
            good = wire(await session.call_tool("get_current_time", {"timezone": "UTC"}))
            bad = wire(await session.call_tool("get_current_time", {"timezone": 5}))
            try:
                await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "10:00",
                                                         "target_timezone": "UTC"})
                hidden = None
            except protocol_error_type() as error:
                hidden = error.error.code
            return tools, good, bad, hidden

        tools, good, bad, hidden = self.handshake(scenario)
        self.assertEqual(set(tools), {"get_current_time"})
        self.assertEqual(tools["get_current_time"]["inputSchema"]["required"], ["timezone"])
        self.assertFalse(good.get("isError"), good)
        self.assertEqual(good["structuredContent"]["timezone"], "UTC")
        self.assertEqual(structured_error(bad)["code"], "invalid_arguments")
        self.assertEqual(hidden, -32602)


del GatewayHttpCase  # a base class only: its setUpClass needs an upstream

if __name__ == "__main__":
    unittest.main()
