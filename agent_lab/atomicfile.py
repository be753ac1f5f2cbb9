"""Writing one output file so that a reader never sees half of it, and nothing else is harmed.

Every command that writes a file (`lint --output`, `lock --output`, `bench --json`, `Lockfile.write`)
writes through `write_text`: the whole text to a new file beside the target, then a rename over it, so
a reader sees the old file or the new one, and a failed or interrupted write leaves the old one and no
temporary file. Two things a bare temporary-and-rename got wrong are decided here once:

* the new file's mode: a replaced file keeps its own; a new one gets what the process's umask allows
  (`tempfile.mkstemp` makes 0600 files, so a report a CI job wrote was unreadable to the next job);
* a target that is not a regular file (`/dev/null`, `/dev/stdout`, a named pipe): it is written to as
  it is, never renamed over (as root, a rename replaced the system's /dev/null with a regular file).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Union

__all__ = ["write_text"]


def write_text(path: Union[str, "os.PathLike[str]"], text: str, *, encoding: str = "utf-8",
               errors: str = "strict") -> None:
    """Replace the file at `path` with `text`, atomically (see the module docstring). OSError when it
    cannot be written; the file is then as it was."""
    target = Path(path)
    data = text.encode(encoding, errors)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # a device, a pipe, a socket: no rename over it
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(target))
        with open(target, "wb") as stream:
            stream.write(data)
        return
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # O_EXCL: a new file, never one already there (or a link someone left at this name); 0o666 and
    # the umask, as any file the process opens for writing gets.
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        if mode is not None:
            os.chmod(temporary, stat.S_IMODE(mode))  # a replaced file keeps who may read it
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
