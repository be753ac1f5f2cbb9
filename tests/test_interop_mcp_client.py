"""Our MCP client against real servers: the official Python SDK's server, and the reference servers.

- A server built with the official SDK (`tests/mcp_sdk_server.py`, needs `mcp`), over stdio and over
  Streamable HTTP (stateful and stateless), in every revision we speak: listed, called, a call past its
  timeout cancelled while the server keeps serving, and its tools gated through a Registry.
- The reference servers from PyPI (mcp-server-time, mcp-server-git, mcp-server-fetch) and npm
  (@modelcontextprotocol/server-everything, -filesystem, -memory), found on MCP_SERVERS_PATH as every
  test finds them (tests/mcp_reference_servers.py): `inspect --mcp` lists each one's tools, and
  `tool-eval` gates a lab over the memory server with tests/labs/memory-policy.json and
  memory-cases.jsonl.

Skipped, with the reason, when a package or server is not installed; .ci/run installs them all, and its
interop run fails if any of these skip.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Iterator

from agent_lab import Actor, Registry, ToolCall
from agent_lab.cli import main
from agent_lab.mcp_client import McpTimeout, connect, import_tools
from agent_lab.mcp_client.wire import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from mcp_reference_servers import command_line, executable, missing_reason, named

try:
    import mcp  # noqa: F401

    SDK_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    SDK_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

HERE = Path(__file__).resolve().parent
SDK_SERVER = HERE / "mcp_sdk_server.py"
LABS = HERE / "labs"
EXPECTED_TOOLS = {"time": {"get_current_time", "convert_time"}, "git": {"git_status", "git_log"}, "fetch": {"fetch"},
                  "everything": {"echo"}, "filesystem": {"read_text_file", "write_file"},
                  "memory": {"create_entities", "read_graph"}}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def http_sdk_server(*extra: str) -> Iterator[str]:
    """The SDK server on a free loopback port (stateful, or stateless with "stateless"); yields its URL."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    process = subprocess.Popen([sys.executable, str(SDK_SERVER), "http", str(port), *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@unittest.skipIf(SDK_MISSING is not None, SDK_MISSING or "")
class OfficialSdkServerTest(unittest.TestCase):
    def exercise(self, server: str, version: str) -> None:
        with connect(server, versions=[version], timeout_s=20) as client:
            self.assertEqual(client.protocol_version, version)
            self.assertEqual(client.server_info["name"], "sdk-test-server")
            self.assertEqual({tool["name"] for tool in client.list_tools()}, {"add", "remember", "nap"})
            self.assertEqual(client.call_tool("add", {"a": 2, "b": 3})["structuredContent"], {"result": 5})
            started = time.monotonic()
            with self.assertRaises(McpTimeout):
                client.call_tool("nap", {"seconds": 10}, timeout_s=1)
            self.assertLess(time.monotonic() - started, 5)
            self.assertFalse(client.call_tool("remember", {"note": "still serving"})["isError"])

    def test_stdio_in_every_revision(self) -> None:
        for version in MODERN_VERSIONS + HANDSHAKE_VERSIONS:
            with self.subTest(version=version):
                self.exercise(f"{sys.executable} {SDK_SERVER} stdio", version)

    def test_streamable_http_stateful_and_stateless_in_every_revision(self) -> None:
        for mode in ((), ("stateless",)):
            with http_sdk_server(*mode) as url:
                for version in MODERN_VERSIONS + HANDSHAKE_VERSIONS:
                    with self.subTest(mode=mode, version=version):
                        self.exercise(url, version)

    def test_the_default_negotiation_reaches_the_newest_revision(self) -> None:
        with connect(f"{sys.executable} {SDK_SERVER} stdio", timeout_s=20) as client:
            self.assertEqual((client.era, client.protocol_version), ("modern", "2026-07-28"))

    def test_its_tools_gated_by_a_registry(self) -> None:
        policy = {"tools": {"add": {"permission": "math", "effect": "read", "approval": "never"}}}
        actor = Actor(id="a", tenant="t", permissions={"math"})
        with http_sdk_server() as url, connect(url, timeout_s=20) as client, Registry() as registry:
            import_tools(client, policy=policy).register(registry)
            added = registry.invoke(ToolCall(name="add", arguments={"a": 2, "b": 40}), actor=actor)
            refused = registry.invoke(ToolCall(name="add", arguments={"a": "two", "b": 40}), actor=actor)
        self.assertEqual(added.output, {"result": 42})
        self.assertEqual(refused.error.code, "invalid_arguments")


class ReferenceServersTest(unittest.TestCase):
    """`inspect --mcp` on each reference server: it connects, lists and imports every tool."""

    def test_inspect_lists_each_reference_server(self) -> None:
        for name, expected in EXPECTED_TOOLS.items():
            server = named(name)
            with self.subTest(server=name):
                reason = missing_reason(server)
                if reason is not None:
                    self.skipTest(reason)
                with tempfile.TemporaryDirectory() as directory:
                    code, out, err = run("inspect", "--mcp", command_line(server, directory), "--json")
                self.assertEqual(code, 0, err)
                [surface] = json.loads(out)["surfaces"]
                self.assertLessEqual(expected, {tool["name"] for tool in surface["tools"]})
                self.assertTrue(all(tool["provenance"]["contract_hash"].startswith("sha256:")
                                    for tool in surface["tools"]))


class MemoryServerLabTest(unittest.TestCase):
    """tool-eval of a lab whose surface is the reference memory server, configured in [tool.agent-lab]."""

    def test_the_memory_server_passes_the_gate_under_its_policy(self) -> None:
        reason = missing_reason(named("memory"))
        if reason is not None:
            self.skipTest(reason)
        command = executable(named("memory"))
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text(
                "[tool.agent-lab]\n"
                f"mcp = {json.dumps(f'MEMORY_FILE_PATH={{world}}/memory.jsonl {command}')}\n"
                f"policy = {json.dumps(str(LABS / 'memory-policy.json'))}\n"
                f"cases = [{json.dumps(str(LABS / 'memory-cases.jsonl'))}]\n")
            before = os.getcwd()
            os.chdir(directory)
            try:
                code, out, err = run("tool-eval")
            finally:
                os.chdir(before)
            report = json.loads(Path(directory, "reports", "tool-comparison.json").read_text())
        self.assertEqual(code, 0, out + err)
        server = report["surfaces"]["server"]
        self.assertEqual((server["cases"], server["cases_passed"], server["duplicate_side_effects"]), (9, 9, 0))
        self.assertEqual(server["servers"][0]["server"], "memory-server")


if __name__ == "__main__":
    unittest.main()
