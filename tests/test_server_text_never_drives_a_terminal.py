"""A server's own text, printed for a reviewer, can never drive their terminal.

`inspect --mcp` printed a server's version (serverInfo.version) as the server sent it (main at 6dd0a37):
an ESC in it reached the terminal, so a server could hide text (`ESC[8m`), rewrite what the reviewer sees,
or ask the terminal to set the clipboard (OSC 52). Its name was already quoted; its version now is too,
where every report takes it from (`Provenance`).
"""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

from agent_lab import Provenance

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class AServersVersionIsShownNotObeyedTest(unittest.TestCase):
    def test_inspect_prints_no_escape_sequence_a_server_sent(self) -> None:
        server = f"{sys.executable} {HERE / 'mcp_leaky_server.py'} ansi-version"
        shown = subprocess.run([sys.executable, str(ROOT / "run_lab.py"), "inspect", "--mcp", server],
                               capture_output=True, text=True, timeout=120, cwd=ROOT)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("leaky", shown.stdout)
        self.assertNotIn("\x1b", shown.stdout + shown.stderr)
        self.assertIn("\\u001B]52", shown.stdout)  # shown, escaped, for the reviewer to see

    def test_a_provenance_keeps_a_version_printable_and_short(self) -> None:
        provenance = Provenance(server="leaky", server_version="2.0\x1b[2K\u202e" + "9" * 200, transport="stdio",
                                address="python server.py", protocol_version="2025-11-25",
                                contract_hash="sha256:" + "0" * 64)
        self.assertTrue(provenance.server_version.startswith("2.0\\u001B[2K\\u202E"))
        self.assertLessEqual(len(provenance.server_version), 64)
        self.assertEqual(provenance.to_dict()["server_version"], provenance.server_version)


if __name__ == "__main__":
    unittest.main()
