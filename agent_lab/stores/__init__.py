"""Receipt stores: where idempotency receipts and reservations live, behind one protocol.

``protocol`` says what every store promises (owner tokens, renewed leases, fencing, ``unknown`` after
a lapse, deadline-bounded calls); ``memory`` and ``sqlite`` are the stores this package ships. A new
store implements ``ReceiptStore`` and passes the conformance suite in tests/store_conformance.py.
"""

from .memory import InMemoryReceiptStore
from .protocol import (
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
    "SCHEMA_VERSION",
    "STORE_TIMEOUT_S",
    "SWEEP_CHUNK",
    "SWEEP_EVERY",
    "InMemoryReceiptStore",
    "Lapse",
    "ReceiptKey",
    "ReceiptStore",
    "ReceiptStoreUnavailable",
    "Reservation",
    "ReservationStatus",
    "SqliteReceiptStore",
]
