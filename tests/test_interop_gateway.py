"""The official MCP Python SDK client through `serve-mcp --upstream` (the contract gateway) over stdio.

Against a test upstream built with the official SDK's server that counts the calls that reach it
(tests/mcp_gateway_upstream.py) and against the reference server mcp-server-time (found on
MCP_SERVERS_PATH): tools listed with the upstream's schemas, invalid arguments refused with no upstream
call, a keyed write retried five times reaching the upstream once, an approval-required call answered
as `input_required` (2026-07-28) or with an elicitation (handshake era) and run once after the user
confirms, a redacted field, an answer that breaks its outputSchema refused, a hidden tool absent and
answered like an unknown one.
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

from tests.mcp_reference_servers import command_line, missing_reason, named

try:
    import mcp
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
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


class GatewayCase(unittest.TestCase):
    """Each test starts the gateway (and its upstream) fresh, with a scratch folder for the count file
    and the SQLite receipts."""

    def setUp(self) -> None:
        scratch = tempfile.TemporaryDirectory(prefix="agent-lab-gw-")
        self.addCleanup(scratch.cleanup)
        self.scratch = Path(scratch.name)
        self.count_file = self.scratch / "calls.log"

    def upstream_calls(self, tool: str) -> int:
        if not self.count_file.exists():
            return 0
        return self.count_file.read_text(encoding="utf-8").split().count(tool)

    def gateway(self, upstream: str, policy: Path, permissions: tuple[str, ...]) -> Any:
        args = ["run_lab.py", "serve-mcp", "--upstream", upstream, "--policy", str(policy),
                "--receipts", f"sqlite:{self.scratch / 'receipts.db'}"]
        for permission in permissions:
            args += ["--permission", permission]
        return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO_ROOT))

    def counting_gateway(self) -> Any:
        upstream = " ".join(shlex.quote(word) for word in (sys.executable, str(UPSTREAM), str(self.count_file)))
        return self.gateway(upstream, FIXTURES / "counting-policy.json", PERMISSIONS)

    def handshake(self, server: Any, scenario: Any, *, elicitation: Any = None) -> Any:
        async def main() -> Any:
            async with stdio_client(server) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream, elicitation_callback=elicitation) as session:
                    await session.initialize()
                    return await scenario(session)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))

    def stateless(self, server: Any, scenario: Any, *, elicitation: Any = None) -> Any:
        async def main() -> Any:
            async with mcp.Client(server, elicitation_callback=elicitation) as client:
                assert client.session.protocol_version == "2026-07-28"
                return await scenario(client)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class CountingUpstreamTest(GatewayCase):
    def test_tools_are_listed_with_the_upstreams_schemas_and_the_hidden_one_is_absent(self) -> None:
        async def listing(session: Any) -> dict[str, Any]:
            return {tool["name"]: tool for tool in wire(await session.list_tools())["tools"]}

        tools = self.handshake(self.counting_gateway(), listing)
        self.assertNotIn("admin_reset", tools)  # the actor lacks "admin"
        self.assertEqual(tools["get_reading"]["outputSchema"]["properties"]["celsius"], {"type": "number"})
        self.assertEqual(tools["record_note"]["inputSchema"]["properties"]["note"]["type"], "string")
        self.assertIn("request_id", tools["record_note"]["inputSchema"]["required"])  # the policy's key

    def test_a_hidden_tool_is_answered_exactly_like_an_unknown_one(self) -> None:
        async def both(session: Any) -> list[Any]:
            answers = []
            for name in ("admin_reset", "no_such_tool"):
                try:
                    await session.call_tool(name, {"confirm": True})
                except protocol_error_type() as error:
                    answers.append((error.error.code, error.error.message, error.error.data["code"]))
            return answers

        hidden, unknown = self.handshake(self.counting_gateway(), both)
        self.assertEqual(hidden, unknown)
        self.assertEqual(hidden[0], -32602)
        self.assertEqual(self.upstream_calls("admin_reset"), 0)

    def test_invalid_arguments_are_refused_without_reaching_the_upstream(self) -> None:
        async def bad(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("record_note", {"note": 5, "request_id": "k-bad"}))

        result = self.handshake(self.counting_gateway(), bad)
        self.assertTrue(result["isError"])
        self.assertEqual(structured_error(result)["code"], "invalid_arguments")
        self.assertEqual(self.upstream_calls("record_note"), 0)

    def test_a_keyed_write_retried_five_times_reaches_the_upstream_once(self) -> None:
        async def retried(session: Any) -> list[dict[str, Any]]:
            return [wire(await session.call_tool("record_note", {"note": "hello", "request_id": "k-1"}))
                    for _ in range(5)]

        results = self.handshake(self.counting_gateway(), retried)
        self.assertTrue(all(not result.get("isError") for result in results), results)
        self.assertEqual({json.dumps(result["structuredContent"]) for result in results},
                         {json.dumps({"recorded": "hello"})})
        self.assertEqual(self.upstream_calls("record_note"), 1)

    def test_a_retry_in_a_new_gateway_process_is_answered_from_the_sqlite_receipt(self) -> None:
        async def once(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("record_note", {"note": "hello", "request_id": "k-2"}))

        first = self.handshake(self.counting_gateway(), once)
        second = self.handshake(self.counting_gateway(), once)
        self.assertEqual(first["structuredContent"], second["structuredContent"])
        self.assertEqual(self.upstream_calls("record_note"), 1)

    def test_a_redacted_field_never_reaches_the_client(self) -> None:
        async def profile(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("get_profile", {"user": "ada"}))

        result = self.handshake(self.counting_gateway(), profile)
        self.assertNotIn("tok-live-5f3c9a", json.dumps(result))
        self.assertEqual(result["structuredContent"]["user"], "ada")
        self.assertEqual(self.upstream_calls("get_profile"), 1)

    def test_an_answer_that_breaks_the_upstreams_output_schema_is_refused(self) -> None:
        async def reading(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("get_reading", {"sensor": "boiler"}))

        result = self.handshake(self.counting_gateway(), reading)
        self.assertTrue(result["isError"])
        self.assertEqual(structured_error(result)["code"], "invalid_tool_output")
        self.assertNotIn("very hot", json.dumps(result))

    def test_handshake_era_approval_is_an_elicitation_and_the_call_runs_once_after_confirmation(self) -> None:
        asked: list[Any] = []

        async def confirm(context: Any, params: Any) -> Any:
            asked.append(wire(params))
            return ElicitResult(action="accept", content={"confirm": True})

        async def transfer(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("confirm_transfer",
                                                {"account": "acc-9", "amount": 40, "request_id": "t-1"}))

        result = self.handshake(self.counting_gateway(), transfer, elicitation=confirm)
        self.assertFalse(result.get("isError"), result)
        self.assertEqual(len(asked), 1)
        self.assertIn("confirm_transfer", asked[0]["message"])
        self.assertIn("acc-9", asked[0]["message"])
        self.assertEqual(asked[0]["requestedSchema"]["properties"]["confirm"]["type"], "boolean")
        self.assertEqual(self.upstream_calls("confirm_transfer"), 1)

    def test_a_declined_confirmation_is_approval_declined_and_nothing_runs(self) -> None:
        async def decline(context: Any, params: Any) -> Any:
            return ElicitResult(action="decline")

        async def transfer(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("confirm_transfer",
                                                {"account": "acc-9", "amount": 40, "request_id": "t-2"}))

        result = self.handshake(self.counting_gateway(), transfer, elicitation=decline)
        self.assertEqual(structured_error(result)["code"], "approval_declined")
        self.assertEqual(self.upstream_calls("confirm_transfer"), 0)

    def test_a_client_without_elicitation_gets_the_approval_required_error(self) -> None:
        async def transfer(session: Any) -> dict[str, Any]:
            return wire(await session.call_tool("confirm_transfer",
                                                {"account": "acc-9", "amount": 40, "request_id": "t-3"}))

        result = self.handshake(self.counting_gateway(), transfer)
        error = structured_error(result)
        self.assertEqual(error["code"], "approval_required")
        self.assertEqual(error["details"]["tool"], "confirm_transfer")
        self.assertEqual(self.upstream_calls("confirm_transfer"), 0)

    def test_stateless_revision_approval_is_input_required_and_runs_once_after_confirmation(self) -> None:
        if not hasattr(mcp, "Client"):
            self.skipTest("this mcp SDK has no 2026-07-28 Client")
        asked: list[Any] = []

        async def confirm(context: Any, params: Any) -> Any:
            asked.append(wire(params))
            return ElicitResult(action="accept", content={"confirm": True})

        async def transfer(client: Any) -> dict[str, Any]:
            return wire(await client.call_tool("confirm_transfer",
                                               {"account": "acc-7", "amount": 5, "request_id": "t-4"}))

        result = self.stateless(self.counting_gateway(), transfer, elicitation=confirm)
        self.assertFalse(result.get("isError"), result)
        self.assertEqual(result["structuredContent"], {"account": "acc-7", "moved": 5})
        self.assertEqual(len(asked), 1)
        self.assertIn("acc-7", asked[0]["message"])
        self.assertEqual(self.upstream_calls("confirm_transfer"), 1)

    def test_stateless_input_required_result_quotes_the_call_and_a_changed_retry_asks_again(self) -> None:
        if not hasattr(mcp, "Client"):
            self.skipTest("this mcp SDK has no 2026-07-28 Client")

        async def rounds(client: Any) -> tuple[Any, ...]:
            session = client.session
            arguments = {"account": "acc-1", "amount": 3, "request_id": "t-5"}
            first = await session.call_tool("confirm_transfer", arguments, allow_input_required=True)
            state = first.request_state
            yes = {"confirm": ElicitResult(action="accept", content={"confirm": True})}
            changed = await session.call_tool("confirm_transfer", {**arguments, "amount": 300},
                                              input_responses=yes, request_state=state,
                                              allow_input_required=True)
            ran = await session.call_tool("confirm_transfer", arguments, input_responses=yes,
                                          request_state=state, allow_input_required=True)
            replayed = await session.call_tool("confirm_transfer", {**arguments, "request_id": "t-6"},
                                               input_responses=yes, request_state=state,
                                               allow_input_required=True)
            return wire(first), wire(changed), wire(ran), wire(replayed)

        async def never(context: Any, params: Any) -> Any:  # declares elicitation; the test answers itself
            raise AssertionError("the test drives the rounds itself")

        first, changed, ran, replayed = self.stateless(self.counting_gateway(), rounds, elicitation=never)
        self.assertEqual(first["resultType"], "input_required")
        self.assertEqual(first["inputRequests"]["confirm"]["method"], "elicitation/create")
        self.assertIn("acc-1", first["inputRequests"]["confirm"]["params"]["message"])
        self.assertEqual(changed["resultType"], "input_required")  # other arguments: asked again, not run
        self.assertFalse(ran.get("isError"), ran)
        # a different call (another key) cannot ride on that confirmation: it is asked again
        self.assertEqual(replayed["resultType"], "input_required")
        self.assertEqual(self.upstream_calls("confirm_transfer"), 1)


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class ReferenceUpstreamTest(GatewayCase):
    """mcp-server-time behind the gateway: the actor may read the time but not convert it."""

    def setUp(self) -> None:
        super().setUp()
        reason = missing_reason(named("time"), sdk=True)
        if reason is not None:
            self.skipTest(reason)
        self.server = self.gateway(command_line(named("time"), str(self.scratch)), FIXTURES / "time-policy.json",
                                   ("time:read",))

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

        tools, good, bad, hidden = self.handshake(self.server, scenario)
        self.assertEqual(set(tools), {"get_current_time"})
        self.assertEqual(tools["get_current_time"]["inputSchema"]["required"], ["timezone"])
        self.assertFalse(good.get("isError"), good)
        self.assertEqual(good["structuredContent"]["timezone"], "UTC")
        self.assertEqual(structured_error(bad)["code"], "invalid_arguments")
        self.assertEqual(hidden, -32602)


if __name__ == "__main__":
    unittest.main()
