"""Receipt stores: where idempotency receipts and reservations live, behind one protocol.

``protocol`` says what every store promises (owner tokens, renewed leases, fencing, ``unknown`` after
a lapse, deadline-bounded calls, single-use approvals); ``memory``, ``sqlite`` (one host) and
``postgres`` (many hosts, on any DB-API driver the application brings) are the stores this package
ships. A new store implements ``ReceiptStore`` and passes the conformance suite in
tests/store_conformance.py.
"""

from .memory import InMemoryReceiptStore
from .postgres import PostgresReceiptStore
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
from .sqlite import BUSY_TIMEOUT_MS, SCHEMA_VERSION, SWEEP_CHUNK, SWEEP_EVERY, SqliteReceiptStore

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
