"""Where a run's settings come from: command-line flags, then `[tool.agent-lab]`, then the lab's defaults.

A project configures its gate once, in the `pyproject.toml` of the directory the command runs in:

    [tool.agent-lab]
    lab = "mypackage.lab:lab"          # MODULE:ATTR or path/to/file.py:ATTR
    cases = ["tests/tool-cases.jsonl"] # a path or a list of paths
    out = "reports"
    junit = "reports/junit.xml"
    jobs = 4                           # replays at once (default: the core count + 4; 1: serial)
    # or, instead of lab, MCP servers (a command line or a URL, or a list), the policy for their tools,
    # and the contract lockfile their tools are checked against (written by `agent-lab lock`):
    # mcp = "npx -y @modelcontextprotocol/server-memory"
    # policy = "mcp-policy.toml"
    # lock = "agent-lab.lock.json"

so CI runs plain `agent-lab tool-eval`. A flag given on the command line replaces the table's value
(`--cases` replaces the whole list). `policy` and `lock` go with the servers a command gates, from `mcp`
or `--mcp` (`--policy` and `--lock` replace them); a lab names its own in code (`Surface.from_mcp`). With no lab anywhere, the built-in ticket lab runs; with no cases
anywhere, the lab's own case files (`Lab.cases`) do. The table's `cases` go with the table's `lab` (the
built-in lab when it names none): a `--lab` naming another lab runs its own cases, and the run says why
the table's were set aside. Paths are relative to the current directory.

The `[tool.agent-lab.lint]` sub-table configures the lint rules (`agent_lab.lint.config`); `lint_config`
reads it, and both `agent-lab lint` and the tool-eval gate use what it returns, so one table decides
which findings fail either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

from ..lint.config import TABLE_KINDS, LintConfig, LintConfigError
from .definition import Lab, LabError
from .loader import BUILTIN_LAB, default_lab, load_lab
from .pyproject import LINT_TABLE_NAME, TABLE_NAME, ConfigError, read_agent_lab_table, read_lint_table

__all__ = [
    "KNOWN_KEYS",
    "PYPROJECT",
    "ConfigError",
    "LabSource",
    "ToolEvalSettings",
    "configured_lab",
    "lab_source",
    "lint_config",
    "project_table",
    "tool_eval_settings",
]

PYPROJECT = "pyproject.toml"
KNOWN_KEYS = ("lab", "cases", "out", "junit", "jobs", "mcp", "policy", "lock")  # sub-tables ([tool.agent-lab.x]) belong to other commands
DEFAULT_OUT = "reports"


@dataclass(frozen=True)
class ToolEvalSettings:
    """What one tool-eval run uses. `lab_reference` None means the built-in lab."""

    lab_reference: str | None
    cases: tuple[str, ...]  # empty: the lab's own case files
    out: str
    junit: str | None
    jobs: int | None = None  # replays at once (None: the core count's default)
    lint: LintConfig = field(default_factory=LintConfig)  # the project's [tool.agent-lab.lint], for the gate
    servers: tuple[str, ...] = ()  # MCP servers to gate instead of a lab (see agent_lab.mcp_client.surfaces)
    policy: str | None = None  # the policy file for the servers' tools
    lock: str | None = None  # the contract lockfile the servers' tools are checked against
    set_aside: tuple[str, ...] = ()  # the table's cases, not used because --lab or --mcp names another surface
    table_lab: str | None = None  # the lab the table names (None: the built-in lab), for messages

    @property
    def lab_name(self) -> str:
        """The reference as messages show it."""
        if self.lab_reference is None and self.servers:
            return "mcp"
        return self.lab_reference or BUILTIN_LAB

    def load_lab(self) -> Lab:
        """The lab (LabError when it cannot be loaded)."""
        return configured_lab(self.lab_reference, self.servers, self.policy, self.lock)

    def case_files(self, lab: Lab) -> tuple[str, ...]:
        """The case files to run: the configured ones, else the lab's own (ConfigError when neither)."""
        if self.cases:
            return self.cases
        if lab.cases:
            return tuple(lab.cases)
        if self.set_aside:
            raise ConfigError(f"lab {lab.name!r} ships no case files: name them with --cases FILE ({self.set_aside_note})")
        raise ConfigError(f"lab {lab.name!r} ships no case files: name them with --cases FILE or with cases "
                          f"in {TABLE_NAME} of {PYPROJECT}")

    @property
    def set_aside_note(self) -> str:
        """Why the table's cases are not run: they belong to another lab than the one --lab names."""
        owner = self.table_lab or f"the built-in lab {BUILTIN_LAB}"
        return (f"the cases in {TABLE_NAME} of {PYPROJECT}, {', '.join(self.set_aside)}, go with {owner}, "
                f"not with --lab {self.lab_reference}")


def configured_lab(lab: str | None, servers: Sequence[str] = (), policy: str | None = None,
                   lock: str | None = None) -> Lab:
    """The lab named `lab`; else a lab of the MCP `servers` (their tools imported under `policy`, checked
    against the contract lockfile `lock`); else the built-in lab. LabError when it cannot be loaded."""
    if lab is not None:
        return load_lab(lab)
    if servers:
        from ..mcp_client.surfaces import server_lab
        from ..mcp_client.tool_policy import PolicyError

        try:
            return server_lab(list(servers), policy=policy, lock=lock)
        except (PolicyError, ValueError) as error:  # LockfileError is a ValueError
            raise LabError(str(error)) from None
    return default_lab()


def project_table(directory: Path | None = None) -> dict[str, Any]:
    """The checked `[tool.agent-lab]` table of `directory`'s pyproject.toml ({} when there is none)."""
    path = (directory or Path.cwd()) / PYPROJECT
    where = PYPROJECT if directory is None else str(path)
    table = read_agent_lab_table(path, where=where)
    checked: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            continue
        if key not in KNOWN_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in {TABLE_NAME} (known: {', '.join(KNOWN_KEYS)})")
        checked[key] = _checked_value(where, key, value)
    return checked


def lint_config(directory: Path | None = None) -> LintConfig:
    """The lint configuration of `directory`'s pyproject.toml (`[tool.agent-lab.lint]`; defaults when
    there is no such table). ConfigError, naming the file (and on Python 3.10 the line), otherwise."""
    path = (directory or Path.cwd()) / PYPROJECT
    where = PYPROJECT if directory is None else str(path)
    table = read_lint_table(path, kinds=TABLE_KINDS, where=where)
    try:
        return LintConfig.from_mapping(table, where=f"{where}: {LINT_TABLE_NAME}")
    except LintConfigError as error:
        raise ConfigError(str(error)) from None


def _checked_value(where: str, key: str, value: Any) -> Any:
    texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    if any(isinstance(text, str) and "\0" in text for text in texts):  # TOML's "\u0000": open() raised ValueError
        raise ConfigError(f"{where}: {TABLE_NAME} {key} holds a NUL character (\\u0000), which no path or command "
                          "line can")
    if key == "cases":
        paths = [value] if isinstance(value, str) else value
        if not isinstance(paths, list) or not paths or not all(isinstance(path, str) and path for path in paths):
            raise ConfigError(f"{where}: {TABLE_NAME} cases must be a path or a list of paths (non-empty strings)")
        return tuple(paths)
    if key == "mcp":
        servers = [value] if isinstance(value, str) else value
        if not isinstance(servers, list) or not servers or not all(isinstance(item, str) and item for item in servers):
            raise ConfigError(f"{where}: {TABLE_NAME} mcp must be a server (a command line or a URL) or a list of them")
        return tuple(servers)
    if key == "jobs":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: {TABLE_NAME} jobs must be a whole number of at least 1 (1: one case at a time)")
        return value
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {TABLE_NAME} {key} must be a non-empty string")
    return value


class LabSource(NamedTuple):
    """What a command works on: a lab reference, or MCP servers with their policy and lock files."""

    lab: str | None
    servers: tuple[str, ...]
    policy: str | None
    lock: str | None


def lab_source(table: Mapping[str, Any], *, lab: str | None = None, mcp: Sequence[str] | None = None,
               policy: str | None = None, lock: str | None = None, where: str = PYPROJECT) -> LabSource:
    """The lab reference, or the MCP servers with their policy and lock files: a flag (`--lab`, or `--mcp`
    with `--policy` and `--lock`) beats the table, whose `lab` and `mcp` keys exclude each other."""
    if table.get("lab") is not None and table.get("mcp"):
        raise ConfigError(f"{where}: {TABLE_NAME} names both lab and mcp; keep one (a lab can hold server "
                          "surfaces: Surface.from_mcp)")
    if lab is not None:
        return LabSource(lab, (), None, None)
    if not mcp and table.get("lab") is not None:
        return LabSource(table["lab"], (), None, None)
    servers = tuple(mcp) if mcp else tuple(table.get("mcp", ()))
    return LabSource(None, servers, policy if policy is not None else table.get("policy"),
                     lock if lock is not None else table.get("lock"))


def tool_eval_settings(*, lab: str | None = None, cases: Sequence[str] | None = None, out: str | None = None,
                       junit: str | None = None, jobs: int | None = None, mcp: Sequence[str] | None = None,
                       policy: str | None = None, lock: str | None = None,
                       directory: Path | None = None) -> ToolEvalSettings:
    """Flags (None: not given) laid over the project's table, laid over the defaults. The table's cases
    are another lab's when `--lab` (or `--mcp`) names what the table does not: they are set aside, not run."""
    table = project_table(directory)
    lab_reference, servers, policy_file, lock_file = lab_source(table, lab=lab, mcp=mcp, policy=policy, lock=lock)
    table_cases = tuple(table.get("cases", ()))
    theirs = (lab is not None and lab != table.get("lab")) or (mcp is not None and bool(mcp)
                                                                 and tuple(mcp) != tuple(table.get("mcp", ())))
    return ToolEvalSettings(
        lab_reference=lab_reference,
        servers=servers,
        policy=policy_file,
        lock=lock_file,
        cases=tuple(cases) if cases else (() if theirs else table_cases),
        out=out if out is not None else table.get("out", DEFAULT_OUT),
        junit=junit if junit is not None else table.get("junit"),
        jobs=jobs if jobs is not None else table.get("jobs"),
        lint=lint_config(directory),
        set_aside=table_cases if theirs and not cases else (),
        table_lab=table.get("lab"),
    )
