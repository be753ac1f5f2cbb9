"""One output file written whole (`agent_lab.atomicfile.write_text`): what `lint --output`, `lock
--output`, `bench --json` and `Lockfile.write` promise about the file they leave."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.atomicfile import write_text
from agent_lab.lab.reports import ReportWriteError, check_report_targets


class WriteTextTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.directory = Path(directory.name)
        self.target = self.directory / "report.json"

    def leftovers(self) -> list[str]:
        return sorted(name for name in os.listdir(self.directory) if name != self.target.name and
                      not name.startswith("keep"))

    def test_a_replaced_file_has_the_new_text_and_keeps_its_own_mode(self) -> None:
        self.target.write_text("old")
        os.chmod(self.target, 0o640)
        write_text(self.target, "new")
        self.assertEqual(self.target.read_text(), "new")
        self.assertEqual(stat.S_IMODE(os.stat(self.target).st_mode), 0o640)
        self.assertEqual(self.leftovers(), [])

    @unittest.skipIf(sys.platform == "win32", "POSIX modes")
    def test_a_new_file_gets_the_mode_the_umask_allows_not_0600(self) -> None:
        # tempfile.mkstemp made every output 0600: a report written by one CI step was unreadable to the next.
        previous = os.umask(0o022)
        try:
            write_text(self.target, "text")
        finally:
            os.umask(previous)
        self.assertEqual(stat.S_IMODE(os.stat(self.target).st_mode), 0o644)

    def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(self) -> None:
        self.target.write_text("old")
        with mock.patch("agent_lab.atomicfile.os.replace", side_effect=OSError(28, "No space left on device")):
            with self.assertRaises(OSError):
                write_text(self.target, "new")
        self.assertEqual(self.target.read_text(), "old")
        self.assertEqual(self.leftovers(), [])

    def test_text_that_cannot_be_encoded_changes_nothing(self) -> None:
        self.target.write_text("old")
        with self.assertRaises(UnicodeEncodeError):
            write_text(self.target, "lone \ud800")
        self.assertEqual(self.target.read_text(), "old")
        self.assertEqual(self.leftovers(), [])

    @unittest.skipUnless(hasattr(os, "mkfifo"), "named pipes")
    def test_a_named_pipe_is_written_to_not_replaced(self) -> None:
        # A rename over a device or a pipe replaced it with a regular file (as root: /dev/null itself).
        pipe = self.directory / "keep.fifo"
        os.mkfifo(pipe)
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
        reader.start()
        write_text(pipe, "through the pipe")
        reader.join(30)
        self.assertEqual(received, [b"through the pipe"])
        self.assertTrue(stat.S_ISFIFO(os.stat(pipe).st_mode))
        self.assertEqual(self.leftovers(), [])

    def test_a_directory_is_refused(self) -> None:
        with self.assertRaises(IsADirectoryError):
            write_text(self.directory, "text")


class ReportTargetsTest(unittest.TestCase):
    @unittest.skipUnless(hasattr(os, "mkfifo"), "named pipes")
    def test_a_report_aimed_at_a_device_or_a_pipe_is_refused_before_anything_is_written(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            pipe = Path(directory) / "junit.xml"
            os.mkfifo(pipe)
            with self.assertRaisesRegex(ReportWriteError, "not a regular file"):
                check_report_targets([pipe])
            self.assertTrue(stat.S_ISFIFO(os.stat(pipe).st_mode))

    @unittest.skipUnless(hasattr(os, "mkfifo"), "named pipes")
    def test_a_pipe_put_in_place_of_a_report_while_they_are_written_is_refused_without_waiting(self) -> None:
        # The targets pass their check; then, while the reports are written, someone who may write in
        # the directory puts a named pipe at one of their names. Reading it to keep its old content
        # waited for a writer for ever.
        from agent_lab.lab import reports
        from agent_lab.redaction import NO_SECRETS

        with tempfile.TemporaryDirectory() as directory:
            target = Path(directory) / "tool-comparison.md"
            made = reports._temporary_beside

            def planting(path: Path) -> Path:
                if not target.exists():
                    os.mkfifo(target)
                return made(path)

            outcome: list[BaseException] = []

            def write() -> None:
                try:
                    reports.write_files({target: "report"}, mask=NO_SECRETS)
                except BaseException as error:  # noqa: BLE001 - kept for the assertions
                    outcome.append(error)

            with mock.patch.object(reports, "_temporary_beside", planting):
                writer = threading.Thread(target=write, daemon=True)
                writer.start()
                writer.join(10)
            if writer.is_alive():  # the old code: give the read its end of file, so the thread ends
                os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
                writer.join(10)
                self.fail("the write waited on the pipe")
            self.assertEqual(len(outcome), 1)
            self.assertIsInstance(outcome[0], ReportWriteError)
            self.assertIn("not a regular file", str(outcome[0]))
            self.assertTrue(stat.S_ISFIFO(os.stat(target).st_mode))  # left as it was
            self.assertEqual(sorted(os.listdir(directory)), ["tool-comparison.md"])  # no temporary left


if __name__ == "__main__":
    unittest.main()
