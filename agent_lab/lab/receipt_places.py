"""Where one replay keeps its receipts: the store a case names, fresh for every case and surface.

- `memory`: an in-memory store (gone with the process; a crash case cannot use it);
- `sqlite`: a new file in a private temporary directory, shared by a `restart` and a crash child;
- `postgres`: a new schema on the server `AGENT_LAB_POSTGRES_DSN` names (a libpq connection string),
  dropped afterwards, reached with psycopg 3 (an optional dependency: `pip install "psycopg[binary]"`).

Every store is opened with the lab's fingerprint key and the replay's clocks (`LabClocks`), so the
registry, a restarted registry and a crash child all fingerprint alike and read the same time. A
`ReceiptPlace` can be described as plain JSON (`description`) for a crash child to open the same store
(the description holds the DSN: it travels on the child's stdin, never in a report or a log).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ..stores.memory import InMemoryReceiptStore
from .clocks import LabClocks
from .definition import LabError

__all__ = ["LAB_FINGERPRINT_KEY", "POSTGRES_DSN_VARIABLE", "ReceiptPlace", "postgres_problem", "receipt_place",
           "replay_directory"]

LAB_FINGERPRINT_KEY = b"agent-lab tool-eval fingerprint key (fixed so reports are reproducible)"
POSTGRES_DSN_VARIABLE = "AGENT_LAB_POSTGRES_DSN"
CONNECT_TIMEOUT_S = 10
# A password in a libpq connection string: `password=...` (keyword form) or `user:...@` (URI form).
_PASSWORDS = re.compile(r"password\s*=\s*'?([^'\s]+)|//[^:/@\s]+:([^@\s]+)@")


@dataclass(frozen=True)
class ReceiptPlace:
    """One replay's receipt store, as a place that can be opened again (a restart, a crash child)."""

    kind: str
    path: Optional[str] = None  # sqlite
    dsn: Optional[str] = field(default=None, repr=False)  # postgres: may hold a password
    schema: Optional[str] = None  # postgres

    def open(self, clocks: LabClocks) -> Any:
        """A new store on this place, reading `clocks`."""
        options: dict[str, Any] = {"fingerprint_key": LAB_FINGERPRINT_KEY, "clock": clocks.wall,
                                   "monotonic": clocks.monotonic}
        if self.kind == "sqlite":  # each store's module is loaded when a case asks for that store
            from ..stores.sqlite import SqliteReceiptStore

            return SqliteReceiptStore(str(self.path), **options)
        if self.kind == "postgres":
            import psycopg  # the optional driver: postgres_problem() said so if it is missing

            from ..stores.postgres import PostgresReceiptStore

            connect = functools.partial(psycopg.connect, self.dsn or "", options=f"-c search_path={self.schema}",
                                        connect_timeout=CONNECT_TIMEOUT_S, application_name="agent-lab tool-eval")
            return PostgresReceiptStore(connect, **options)
        return InMemoryReceiptStore(**options)

    def secrets(self) -> frozenset[str]:
        """What must never show in a message about this place: the DSN, and the password inside it."""
        if not self.dsn:
            return frozenset()
        found = {self.dsn, *(part for groups in _PASSWORDS.findall(self.dsn) for part in groups if part)}
        return frozenset(value for value in found if len(value) >= 4)

    def description(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "dsn": self.dsn, "schema": self.schema}

    @classmethod
    def described(cls, description: Mapping[str, Any]) -> ReceiptPlace:
        return cls(kind=description["kind"], path=description.get("path"), dsn=description.get("dsn"),
                   schema=description.get("schema"))


def postgres_problem() -> Optional[str]:
    """Why `postgres` receipts cannot be used here (None: they can)."""
    if not os.environ.get(POSTGRES_DSN_VARIABLE):
        return (f"set {POSTGRES_DSN_VARIABLE} to a libpq connection string of a PostgreSQL server where each "
                "replay may create (and drop) a schema of its own")
    if importlib.util.find_spec("psycopg") is None:
        return "the psycopg package is not installed (pip install \"psycopg[binary]\")"
    return None


@contextlib.contextmanager
def receipt_place(kind: str, directory: Optional[Path]) -> Iterator[ReceiptPlace]:
    """A fresh place of `kind` for one replay, removed afterwards. `directory` is the replay's private
    temporary directory (needed for `sqlite`)."""
    if kind == "sqlite":
        if directory is None:
            raise ValueError("sqlite receipts need the replay's directory")
        yield ReceiptPlace("sqlite", path=str(directory / "receipts.sqlite3"))
    elif kind == "postgres":
        with _postgres_schema() as place:
            yield place
    else:
        yield ReceiptPlace("memory")


@contextlib.contextmanager
def _postgres_schema() -> Iterator[ReceiptPlace]:
    import uuid  # (and the platform module it loads) only for a case with postgres receipts

    dsn = os.environ.get(POSTGRES_DSN_VARIABLE, "")
    schema = "agent_lab_case_" + uuid.uuid4().hex[:16]
    _administer(dsn, f"CREATE SCHEMA {schema}")
    try:
        yield ReceiptPlace("postgres", dsn=dsn, schema=schema)
    finally:
        _administer(dsn, f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _administer(dsn: str, statement: str) -> None:
    """Run one statement on a connection of its own (autocommit); a server that cannot be used is a
    LabError naming the variable, never the DSN (it may hold a password)."""
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as admin:
            admin.execute(statement)  # noqa: S608 - a schema name this module made (hex digits)
    except Exception as error:  # noqa: BLE001 - the driver's errors, an unreachable server
        # Only the error's type: libpq's messages may quote the connection string, password and all.
        raise LabError(f"receipts postgres: the server {POSTGRES_DSN_VARIABLE} names could not be used "
                       f"({type(error).__name__})") from None


@contextlib.contextmanager
def replay_directory(needed: bool) -> Iterator[Optional[Path]]:
    """A private temporary directory for one replay (its SQLite receipts, a crash case's world),
    removed afterwards; None when the replay needs none (most: no directory to make and remove)."""
    if not needed:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="agent-lab-") as workdir:
        yield Path(workdir)
