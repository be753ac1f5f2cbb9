"""Receipt stores: where idempotency receipts and reservations live, behind one protocol.

``protocol`` says what every store promises (owner tokens, renewed leases, fencing, ``unknown`` after
a lapse, deadline-bounded calls, single-use approvals); ``memory``, ``sqlite`` (one host) and
``postgres`` (many hosts, on any DB-API driver the application brings) are the stores this package
ships. A new store implements ``ReceiptStore`` and passes the conformance suite in
tests/store_conformance.py.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

from .memory import InMemoryReceiptStore
from .protocol import (
    PURGE_LIMIT,
    STORE_TIMEOUT_S,
    Lapse,
    ReceiptKey,
    ReceiptStore,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
)

if TYPE_CHECKING:  # at run time the SQLite and PostgreSQL stores are imported on first use (sqlite3 is not light)
    from .postgres import PostgresReceiptStore
    from .sqlite import BUSY_TIMEOUT_MS, SCHEMA_VERSION, SWEEP_CHUNK, SWEEP_EVERY, SqliteReceiptStore

_EXPORTS = {
    "PostgresReceiptStore": "postgres",
    "BUSY_TIMEOUT_MS": "sqlite",
    "SCHEMA_VERSION": "sqlite",
    "SWEEP_CHUNK": "sqlite",
    "SWEEP_EVERY": "sqlite",
    "SqliteReceiptStore": "sqlite",
}

__all__ = [
    "BUSY_TIMEOUT_MS",
    "PURGE_LIMIT",
    "SCHEMA_VERSION",
    "STORE_TIMEOUT_S",
    "SWEEP_CHUNK",
    "SWEEP_EVERY",
    "InMemoryReceiptStore",
    "Lapse",
    "PostgresReceiptStore",
    "ReceiptKey",
    "ReceiptStore",
    "ReceiptStoreUnavailable",
    "Reservation",
    "ReservationStatus",
    "SqliteReceiptStore",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
