"""The files a run reads, so that nothing the run writes can replace one of them.

A mistyped `--junit pyproject.toml`, `junit = "tests/cases.jsonl"` in `[tool.agent-lab]`, a `--out`
directory that holds a case file named like a report, a SARIF `--output` aimed at the lab's own module,
a model-eval `--junit` on the cassette it replays: each used to overwrite the run's own input. Every
command that writes files checks its targets against `run_inputs()` before any work, and refuses (bad
input, exit 2) a target that is one of them, however it is spelled: relative or absolute, through `..`,
through a symbolic link, or as another hard link to the same file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable, Mapping, Optional, Tuple, Union

__all__ = ["input_overwritten", "run_inputs"]

PathLike = Union[str, Path]


def run_inputs(case_files: Iterable[PathLike] = (), *, task_files: Iterable[PathLike] = (),
               cassettes: Iterable[PathLike] = (), directory: Optional[Path] = None) -> dict[Path, str]:
    """Every file the run reads, each with what it is: its case and task files, the cassettes it
    replays, the project's `pyproject.toml` (in `directory`, default the current one), and the source
    file of every Python module the process has loaded by now (the lab's module and what it imports,
    this library itself)."""
    inputs: dict[Path, str] = {}
    for module in list(sys.modules.values()):
        try:
            namespace = getattr(module, "__dict__", None)  # never a module's own __getattr__
        except Exception:  # noqa: BLE001 - sys.modules may hold any object
            continue
        source = namespace.get("__file__") if type(namespace) is dict else None
        if isinstance(source, str) and source:
            inputs[Path(source)] = "a Python module this run loaded"
    inputs[(directory or Path.cwd()) / "pyproject.toml"] = "the project's pyproject.toml"
    for paths, what in ((cassettes, "a cassette this run replays"), (task_files, "a task file of this run"),
                        (case_files, "a case file of this run")):
        for path in paths:
            inputs[Path(path)] = what
    return inputs


_Input = Tuple[Path, str, Optional[Tuple[int, int]], Optional[Path]]  # path, kind, inode, where it leads


def input_overwritten(targets: Iterable[PathLike], inputs: Mapping[Path, str]) -> Optional[Tuple[Path, str]]:
    """The first of `targets` that is one of `inputs` (the same file, however spelled), and what that
    input is; None when none is.

    A target is an input when both lead to one place (symbolic links and `..` resolved) or, for a file
    that exists, when both are the same file (device and inode: a hard link). The first input (in the
    order given) that leads where the target does says what it is, else the first that is its file.
    A run has hundreds of inputs (every module it loaded) and a handful of targets, so an input is
    only looked at through `os.stat` (cheap) until it could be the target: an input that exists
    leads where a target does only if it is the target's file, so only those, and the inputs that
    cannot be found as spelled, are resolved."""
    entries: list[_Input] = []
    for path, kind in inputs.items():
        inode = _inode(path)
        if inode is None:  # not found as spelled: where it leads decides, and what is there
            resolved, inode = _identity(path)
            entries.append((path, kind, inode, resolved))
        else:
            entries.append((path, kind, inode, None))  # resolved only if it is some target's file
    for target in targets:
        resolved, inode = _identity(Path(target))
        found = _same_place(entries, resolved, inode)
        if found is None and inode is not None:
            found = next((kind for _, kind, its_inode, _ in entries if its_inode == inode), None)
        if found is not None:
            return Path(target), found
    return None


def _same_place(entries: list[_Input], resolved: Path, inode: Optional[Tuple[int, int]]) -> Optional[str]:
    """What the first input that leads to `resolved` is (a target's place, `inode` its file's)."""
    for path, kind, its_inode, its_place in entries:
        if its_place is None:
            if inode is None or its_inode != inode:  # an existing file is at the target's place only if it is the target
                continue
            its_place = _identity(path)[0]
        if its_place == resolved:
            return kind
    return None


def _inode(path: Path) -> Optional[Tuple[int, int]]:
    """The device and inode of the file `path` names as spelled (links followed), None if there is none."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


def _identity(path: Path) -> Tuple[Path, Optional[Tuple[int, int]]]:
    """Where `path` leads (symbolic links and `..` resolved) and, for an existing file, its device and
    inode (what two hard links share)."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compared as written
        resolved = Path(os.path.abspath(path))
    try:
        status = os.stat(resolved)
    except (OSError, ValueError):
        return resolved, None
    return resolved, (status.st_dev, status.st_ino)
