"""Argument fingerprints and idempotency receipt stores, in one import.

The pieces live in their own modules: ``agent_lab.fingerprint`` (canonical JSON and the keyed
fingerprint) and the ``agent_lab.stores`` package (the ``ReceiptStore`` protocol, the in-memory and
SQLite stores). This module re-exports them, so ``from agent_lab.idempotency import ...`` keeps working.
"""

from __future__ import annotations

from .fingerprint import (
    FINGERPRINT_PREFIX,
    MAX_CANONICAL_DEPTH,
    MAX_INTEGER_BITS,
    NotCanonicalJSON,
    canonical_json,
    fingerprint,
    new_fingerprint_key,
)
from .stores import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    STORE_TIMEOUT_S,
    SWEEP_CHUNK,
    SWEEP_EVERY,
    InMemoryReceiptStore,
    Lapse,
    ReceiptKey,
    ReceiptStore,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
    SqliteReceiptStore,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "FINGERPRINT_PREFIX",
    "MAX_CANONICAL_DEPTH",
    "MAX_INTEGER_BITS",
    "SCHEMA_VERSION",
    "STORE_TIMEOUT_S",
    "SWEEP_CHUNK",
    "SWEEP_EVERY",
    "InMemoryReceiptStore",
    "Lapse",
    "NotCanonicalJSON",
    "ReceiptKey",
    "ReceiptStore",
    "ReceiptStoreUnavailable",
    "Reservation",
    "ReservationStatus",
    "SqliteReceiptStore",
    "canonical_json",
    "fingerprint",
    "new_fingerprint_key",
]
