"""Start `run_lab.py serve-mcp ... --http 127.0.0.1:0` as a real process and learn its URL from the one
line it prints on stderr; the rest of stderr is drained on a thread (so a chatty server never blocks on
a full pipe) and kept for the test to read."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_LINES = 200  # lines a server may log before its URL (an upstream's warnings)
URL_LINE = re.compile(r"^agent-lab mcp: serving on (http://\S+)$")


class RunningServer:
    def __init__(self, process: subprocess.Popen[str], url: str, log: list[str]) -> None:
        self.process = process
        self.url = url
        self.log = log


@contextlib.contextmanager
def http_server(args: list[str], *, env: dict[str, str] | None = None, wait_s: float = 60.0) -> Iterator[RunningServer]:
    """`python run_lab.py serve-mcp ARGS --http 127.0.0.1:0`, stopped (SIGTERM) on exit."""
    process = subprocess.Popen([sys.executable, "run_lab.py", "serve-mcp", *args, "--http", "127.0.0.1:0"],
                               cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=env if env is not None else dict(os.environ))
    log: list[str] = []
    drain: threading.Thread | None = None
    try:
        assert process.stderr is not None
        url = None
        for _ in range(STARTUP_LINES):
            line = process.stderr.readline()
            if not line:
                break
            match = URL_LINE.match(line.rstrip("\n"))
            if match:
                url = match.group(1)
                break
            log.append(line)
        if url is None:
            raise AssertionError("serve-mcp --http printed no URL:\n" + "".join(log))
        drain = threading.Thread(target=lambda: log.extend(process.stderr or ()), daemon=True)
        drain.start()
        yield RunningServer(process, url, log)
    finally:
        process.terminate()
        try:
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(wait_s)
        if drain is not None:
            drain.join(wait_s)
        if process.stderr is not None:
            process.stderr.close()
