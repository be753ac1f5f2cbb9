"""Live: the reference MCP servers, installed from PyPI and npm, and the hostile test server, read through
our client (`agent_lab.mcp_client`; tests/mcp_reference_servers.py finds the servers on MCP_SERVERS_PATH),
then linted and locked.

Each reference server, as `lint --mcp` sees it through our client, has no error-level finding; when it
is the version the committed capture came from, its contracts hash exactly as the capture's do (the
fixtures are what the server sends). Our client and the official MCP Python SDK client read the same
tools/list from the same server, tool for tool and byte for byte. The hostile server
(tests/fixtures/mcp_hostile/server.py) is caught, and its rug pull, locked before and listed after, fails
`lint --lock`. Skipped, with the reason, when a server (or, for the comparison, the SDK) is absent;
.ci/run installs them, and there none may skip.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from agent_lab.cli import main
from agent_lab.contract import definitions_from_mcp
from agent_lab.lint import lint_catalog, lint_surfaces
from agent_lab.lockfile import Lockfile
from agent_lab.mcp_client import connect
from mcp_reference_servers import SERVERS, capture, command_line, listing, load_fixture, missing_reason

HOSTILE_SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_hostile" / "server.py")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


class ReferenceServersLiveTest(unittest.TestCase):
    def test_lint_mcp_finds_no_error_on_any_reference_server(self) -> None:
        for server in SERVERS:
            with self.subTest(server=server.name):
                reason = missing_reason(server)
                if reason is not None:
                    self.skipTest(reason)
                with tempfile.TemporaryDirectory() as scratch:
                    code, out, err = run("lint", "--mcp", command_line(server, scratch), "--format", "json")
                self.assertEqual(err, "")  # nothing left out of the import
                report = json.loads(out)
                self.assertEqual([f"{f['rule']} {f['tool']}{f['pointer']}" for f in report["findings"]
                                  if f["severity"] == "error"], [])
                self.assertEqual(code, 0)
                self.assertGreater(report["summary"]["tools"], 0)

    def test_each_server_matches_its_capture_when_the_version_is_the_same(self) -> None:
        for server in SERVERS:
            with self.subTest(server=server.name):
                reason = missing_reason(server)
                if reason is not None:
                    self.skipTest(reason)
                live = listing(server)
                self.assertTrue(live["tools"])
                report = lint_surfaces([(server.name, definitions_from_mcp(live["tools"]))])
                self.assertEqual([f"{f.rule} {f.tool}{f.pointer}" for f in report.errors], [])
                fixture = load_fixture(server)
                if live["server"] == fixture["server"]:
                    lock = Lockfile.from_surfaces([(server.name, fixture["tools"])])
                    drifted = [tool["name"] for tool in live["tools"] if not lock.verdict(tool).matches]
                    self.assertEqual(drifted, [])

    def test_our_client_and_the_official_sdk_client_read_the_same_tools(self) -> None:
        for server in SERVERS:
            with self.subTest(server=server.name):
                reason = missing_reason(server, sdk=True)
                if reason is not None:
                    self.skipTest(reason)
                ours, theirs = listing(server), capture(server)
                self.assertEqual(ours["server"], theirs["server"])
                self.assertEqual(ours["tools"], theirs["tools"])


class HostileServerLiveTest(unittest.TestCase):
    def listing(self, variant: str) -> list[Any]:
        with connect(f"{sys.executable} {HOSTILE_SERVER} {variant}", timeout_s=30) as client:
            return client.list_tools()

    def test_the_hostile_listing_is_caught_and_the_clean_one_is_not(self) -> None:
        hostile = {f.rule for f in lint_catalog(definitions_from_mcp(self.listing("hostile")))}
        self.assertTrue({"AL104", "AL205", "AL206", "AL207", "AL303", "AL304", "AL308"} <= hostile)
        clean = lint_catalog(definitions_from_mcp(self.listing("clean")))
        self.assertEqual([f.rule for f in clean if f.severity.value == "error"], [])

    def test_a_rug_pull_between_lock_and_lint_is_caught(self) -> None:
        lock = Lockfile.from_surfaces([("hostile-fixture", self.listing("reviewed"))])
        report = lint_surfaces([("hostile-fixture", definitions_from_mcp(self.listing("pulled")))], lock=lock)
        self.assertTrue({"AL601", "AL602", "AL604", "AL606"} <= {f.rule for f in report.errors})


if __name__ == "__main__":
    unittest.main()
