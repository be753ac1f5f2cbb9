"""Receipt store throughput: reserve + complete per second, against raw SQL writing the same rows.

A receipt costs the registry two store calls, each its own transaction: `reserve` (the key becomes
in flight) and `complete` (the record is stored). The raw baseline writes the same row the cheapest
honest way with the same durability: an INSERT, then an UPDATE, each its own (autocommitted)
transaction, on a table of the same shape and indexes.

  * SQLite: `SqliteReceiptStore` against raw sqlite3 on the store's own table (same columns, checks,
    primary key, WITHOUT ROWID), both in WAL mode with the same `synchronous` level, in one process
    and in `--processes` processes (spawned; each opens its own connection to one shared file, writes
    its own keys and times its own loop; all start together, and the slowest loop is the wall time).
    Store and raw alternate which goes first from round to round; each round uses fresh files. The
    figures `stores.sqlite_1proc_vs_raw` and `stores.sqlite_<N>proc_vs_raw` are the store's time per
    receipt over raw's (median of the per-round ratios, and their spread); target <= 1.25, i.e. at
    least 0.8x raw's throughput.
  * PostgreSQL, only when a server is given (`--postgres-dsn` or AGENT_LAB_BENCH_POSTGRES_DSN, a libpq
    connection string) and psycopg is installed: `PostgresReceiptStore` (one per process, a pool of
    `--writers` connections) against raw psycopg with one autocommit connection per writer (threads),
    on the store's own tables (made by the store: same columns, checks, primary key and indexes), both
    under the server's own durability and isolation settings (shown), with 1 writer and `--writers`.
    Each round uses fresh schemas (dropped afterwards), and within it the store and raw take turns in
    10 slices, all writers on one kind at a time, so a slow stretch of a shared machine (another job's
    fsyncs) falls on both alike. The figures `stores.postgres_1writer_vs_raw` and
    `stores.postgres_<N>writers_vs_raw` are the store's throughput over raw's (median of the per-round
    ratios, and their spread); target >= 0.7.

Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..fingerprint import fingerprint
from ..stores import sqlite as sqlite_store
from ..stores import ReceiptKey, SqliteReceiptStore
from ..stores.postgres import PostgresReceiptStore
from . import _figures

__all__ = ["main"]

DSN_VARIABLE = "AGENT_LAB_BENCH_POSTGRES_DSN"
RECORD = {"ok": True, "outcome": "succeeded", "tool": "record_ticket_followup",
          "output": {"followup_id": "F-1", "ticket_id": "T-1001"}, "error": None, "fingerprint": "hmac-sha256:0"}
RECORD_TEXT = json.dumps(RECORD, sort_keys=True, separators=(",", ":"))
ARGUMENTS = {"ticket_id": "T-1001", "note": "Called back.", "action_id": "a-1"}

# One writer's job: write receipt number `index` (its own keys); and what to close afterwards.
Writer = Tuple[Callable[[int], None], Callable[[], None]]

SLICES = 10
"""PostgreSQL: how many turns the store and raw psycopg take within each round (see `alternating_writers`)."""


def alternating_writers(writers: int, receipts_per_writer: int, kinds: Mapping[str, Callable[[int], Writer]],
                        slices: int) -> Dict[str, float]:
    """Seconds each kind of writer took for `writers` threads to write `receipts_per_writer` receipts
    each, the kinds taking turns in `slices` slices: in each, every thread writes its share of one kind,
    all starting together, then of the next kind (the first kind alternates from slice to slice), so
    a slow stretch of a shared machine falls on every kind alike. Each writer warms up first
    (connections opened, statements prepared); all are closed at the end."""
    jobs: Dict[str, List[Writer]] = {}
    try:
        for kind, make_writer in kinds.items():
            jobs[kind] = [make_writer(index) for index in range(writers)]
        warm_up = max(1, min(20, receipts_per_writer // 10))
        for kind_jobs in jobs.values():
            for write, _ in kind_jobs:
                for index in range(warm_up):
                    write(-1 - index)
        bounds = [receipts_per_writer * number // slices for number in range(slices + 1)]
        names = list(jobs)
        plan = [(kind, bounds[number], bounds[number + 1]) for number in range(slices)
                for kind in (names if number % 2 == 0 else names[::-1])]
        turn = threading.Barrier(writers + 1)
        failures: List[BaseException] = []

        def run(writer: int) -> None:
            for kind, low, high in plan:
                turn.wait()
                try:
                    if not failures:
                        write = jobs[kind][writer][0]
                        for index in range(low, high):
                            write(index)
                except BaseException as error:  # noqa: BLE001 - reported below, after every thread has stopped
                    failures.append(error)
                turn.wait()

        threads = [threading.Thread(target=run, args=(writer,)) for writer in range(writers)]
        for thread in threads:
            thread.start()
        spent = dict.fromkeys(names, 0.0)
        for kind, _, _ in plan:
            turn.wait()
            started = time.perf_counter()
            turn.wait()
            spent[kind] += time.perf_counter() - started
        for thread in threads:
            thread.join()
    finally:
        for kind_jobs in jobs.values():
            for _, close in kind_jobs:
                close()
    if failures:
        raise RuntimeError(f"a writer failed: {type(failures[0]).__name__}: {failures[0]}")
    return spent


# -- SQLite -----------------------------------------------------------------------------------------

def sqlite_figures(directory: str, receipts: int, processes: int, synchronous: str,
                   rounds: int) -> List[Tuple[str, str, List[float], List[float]]]:
    """(label, figure name, store seconds per receipt, raw seconds per receipt), one value per round,
    for one process and for `processes` processes. The store and raw sqlite3 alternate which goes
    first from round to round (`_figures.interleave`), each round on fresh files."""
    measured = []
    for count in (1, processes):
        def store_round(count: int = count) -> float:
            return _sqlite_round(directory, "store", count, receipts, synchronous)

        def raw_round(count: int = count) -> float:
            return _sqlite_round(directory, "raw", count, receipts, synchronous)

        samples = _figures.interleave({"store": store_round, "raw": raw_round}, rounds)
        label = "1 process" if count == 1 else f"{count} processes"
        name = "stores.sqlite_1proc_vs_raw" if count == 1 else f"stores.sqlite_{count}proc_vs_raw"
        measured.append((label, name, samples["store"], samples["raw"]))
    return measured


def _sqlite_round(directory: str, kind: str, processes: int, receipts: int, synchronous: str) -> float:
    """Seconds per receipt for `processes` processes writing `receipts` receipts each (their own
    keys) into one new file: the slowest process's loop time over all receipts written. One process
    runs here; several are spawned, each opens its own connection, and all start their loops together."""
    path = os.path.join(directory, f"{kind}-{processes}-{uuid.uuid4().hex[:8]}.sqlite3")
    _create_sqlite_file(kind, path, synchronous)
    if processes == 1:
        return _sqlite_loop(kind, path, synchronous, receipts, 0, None) / receipts
    context = multiprocessing.get_context("spawn")  # a store is never used across fork
    start = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=_sqlite_process, args=(kind, path, synchronous, receipts, index, start, results))
               for index in range(processes)]
    for worker in workers:
        worker.start()
    try:
        elapsed = [results.get(timeout=600) for _ in workers]
    finally:
        for worker in workers:
            worker.join(60)
    failures = [value for value in elapsed if isinstance(value, str)]
    if failures:
        raise RuntimeError(f"a writer process failed: {failures[0]}")
    return max(elapsed) / (receipts * processes)


def _sqlite_process(kind: str, path: str, synchronous: str, receipts: int, index: int, start: Any, results: Any) -> None:
    try:
        results.put(_sqlite_loop(kind, path, synchronous, receipts, index, start))
    except BaseException as error:  # noqa: BLE001 - reported by the parent
        results.put(f"{type(error).__name__}: {error}")
        raise


def _sqlite_loop(kind: str, path: str, synchronous: str, receipts: int, index: int, start: Any) -> float:
    """Open one connection (a store, or raw sqlite3), warm it up, wait for the others, time the loop."""
    write, close = (_store_writer if kind == "store" else _raw_sqlite_writer)(path, synchronous, index)
    try:
        for warm_up in range(20):
            write(-1 - warm_up)
        if start is not None:
            start.wait()
        started = time.perf_counter()
        for number in range(receipts):
            write(number)
        return time.perf_counter() - started
    finally:
        close()


def _create_sqlite_file(kind: str, path: str, synchronous: str) -> None:
    """The store makes its own file; raw sqlite3 gets the store's own table (same columns, checks,
    primary key, WITHOUT ROWID) in a file in WAL mode."""
    if kind == "store":
        SqliteReceiptStore(path, synchronous=synchronous).close()
        return
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(sqlite_store._CREATE_TABLE)  # the store's own DDL
    finally:
        connection.close()


def _store_writer(path: str, synchronous: str, writer: int) -> Writer:
    """reserve + complete through `SqliteReceiptStore`, as the registry calls them."""
    store = SqliteReceiptStore(path, synchronous=synchronous)
    call_fingerprint = fingerprint("record_ticket_followup", ARGUMENTS, key=store.fingerprint_key)
    prefix = uuid.uuid4().hex[:8]

    def write(index: int) -> None:
        key = ReceiptKey("bench", "record_ticket_followup", f"{prefix}-{writer}-{index}")
        owner = store.reserve(key, call_fingerprint).owner
        if owner is None or not store.complete(key, owner, RECORD):
            raise RuntimeError("the store did not reserve and complete a fresh key")

    return write, store.close


def _raw_sqlite_writer(path: str, synchronous: str, writer: int) -> Writer:
    """The same two transactions by hand: an INSERT (the reservation), then an UPDATE (the receipt),
    each autocommitted, with the record text encoded once beforehand; rows as large as the store's (a
    real fingerprint, a 32-digit owner token)."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    connection.execute(f"PRAGMA synchronous = {synchronous}")  # checked against a fixed list by main()
    prefix = uuid.uuid4().hex[:8]
    call_fingerprint = fingerprint("record_ticket_followup", ARGUMENTS, key=b"raw sqlite3 bench fingerprint key")
    owner = uuid.uuid4().hex
    insert = "INSERT INTO receipts VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, 'unknown')"
    update = ("UPDATE receipts SET state = 'completed', record = ?, expires_at = ?, owner = NULL"
              " WHERE tenant = ? AND tool = ? AND key = ? AND state = 'in_flight' AND owner = ?")

    def write(index: int) -> None:
        key = f"{prefix}-{writer}-{index}"
        now = time.time()
        connection.execute(insert, ("bench", "record_ticket_followup", key, call_fingerprint, now + 300, owner))
        connection.execute(update, (RECORD_TEXT, now + 86400, "bench", "record_ticket_followup", key, owner))

    return write, connection.close


# -- PostgreSQL -------------------------------------------------------------------------------------

def _pooled_store_writer(store: Any, writer: int, close: Callable[[], None]) -> Writer:
    """One of several threads sharing one store (its connection pool)."""
    call_fingerprint = fingerprint("record_ticket_followup", ARGUMENTS, key=store.fingerprint_key)
    prefix = uuid.uuid4().hex[:8]

    def write(index: int) -> None:
        key = ReceiptKey("bench", "record_ticket_followup", f"{prefix}-{writer}-{index}")
        owner = store.reserve(key, call_fingerprint).owner
        if owner is None or not store.complete(key, owner, RECORD):
            raise RuntimeError("the store did not reserve and complete a fresh key")

    return write, (close if writer == 0 else lambda: None)


def postgres_figures(dsn: str, receipts: int, writers: int,
                     rounds: int) -> Tuple[str, List[Tuple[str, str, List[float], List[float]]]]:
    """The server's durability settings, and (label, figure name, store receipts/s, raw receipts/s), one
    value per round, for 1 writer and for `writers` writers. Each round uses fresh schemas, and the
    store and raw psycopg take turns in `SLICES` slices (`alternating_writers`), the first of them
    alternating from round to round."""
    import psycopg  # a benchmark-only peer: the library itself never imports a driver

    with psycopg.connect(dsn, autocommit=True) as admin:
        settings = admin.execute("SELECT current_setting('synchronous_commit'), current_setting('fsync'),"
                                 " current_setting('default_transaction_isolation'),"
                                 " current_setting('server_version')").fetchone() or ("?", "?", "?", "?")
    durability = (f"PostgreSQL {settings[3]}, synchronous_commit={settings[0]}, fsync={settings[1]}, "
                  f"isolation {settings[2]}")
    measured = []
    with _scratch_schemas(dsn) as new_schema:
        for count in (1, writers):
            per_writer = max(1, receipts // count)
            samples: Dict[str, List[float]] = {"store": [], "raw": []}
            for round_number in range(max(1, rounds)):
                store_connect = functools.partial(psycopg.connect, dsn, options=f"-c search_path={new_schema()}")
                raw_connect = functools.partial(psycopg.connect, dsn, options=f"-c search_path={new_schema()}")
                PostgresReceiptStore(raw_connect).close()  # the store's own tables, checks and indexes, empty
                store = PostgresReceiptStore(store_connect, pool_size=count)
                kinds = {"store": lambda writer: _pooled_store_writer(store, writer, store.close),
                         "raw": lambda writer: _raw_postgres_writer(raw_connect, writer)}
                if round_number % 2:
                    kinds = dict(reversed(list(kinds.items())))
                spent = alternating_writers(count, per_writer, kinds, SLICES)
                for kind, seconds in spent.items():
                    samples[kind].append(per_writer * count / seconds)
            label = "1 writer" if count == 1 else f"{count} writers"
            name = "stores.postgres_1writer_vs_raw" if count == 1 else f"stores.postgres_{count}writers_vs_raw"
            measured.append((label, name, samples["store"], samples["raw"]))
    return durability, measured


class _scratch_schemas:
    """`with _scratch_schemas(dsn) as new_schema:` new schemas on demand, all dropped at the end."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._schemas: List[str] = []

    def __enter__(self) -> Callable[[], str]:
        return self._new

    def _new(self) -> str:
        import psycopg

        name = "agent_lab_bench_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self._dsn, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {name}")
        self._schemas.append(name)
        return name

    def __exit__(self, *exc_info: object) -> None:
        import psycopg

        with psycopg.connect(self._dsn, autocommit=True) as admin:
            for name in self._schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _raw_postgres_writer(connect: Callable[[], Any], writer: int) -> Writer:
    """The same two transactions by hand, on the store's own table: an INSERT (the reservation), then
    an UPDATE fenced by the owner token (the receipt), each autocommitted on a connection of its own,
    with rows as large as the store's (the same tool name, a real fingerprint, a 32-digit owner token,
    the same record text) and the same default isolation and synchronous_commit."""
    connection = connect()
    connection.autocommit = True
    prefix = uuid.uuid4().hex[:8]
    call_fingerprint = fingerprint("record_ticket_followup", ARGUMENTS, key=b"raw psycopg bench fingerprint key")
    owner = uuid.uuid4().hex
    insert = ("INSERT INTO agent_lab_receipts (tenant, tool, key, fingerprint, state, record, expires_at, owner, lapse)"
              " VALUES (%s, %s, %s, %s, 'in_flight', NULL, %s, %s, 'unknown')")
    update = ("UPDATE agent_lab_receipts SET state = 'completed', record = %s, expires_at = %s"
              " WHERE tenant = %s AND tool = %s AND key = %s AND state = 'in_flight' AND owner = %s")

    def write(index: int) -> None:
        key = f"{prefix}-{writer}-{index}"
        now = time.time()
        connection.execute(insert, ("bench", "record_ticket_followup", key, call_fingerprint, now + 300, owner))
        connection.execute(update, (RECORD_TEXT, now + 86400, "bench", "record_ticket_followup", key, owner))

    return write, connection.close


# -- output -----------------------------------------------------------------------------------------

def print_postgres(title: str, measured: List[Tuple[str, str, List[float], List[float]]]) -> None:
    """Per writer count: raw and store receipts per second (medians), and the store's throughput over
    raw's (median of the per-round ratios, with their spread); each also reported as a figure."""
    rows = []
    for label, name, store, raw in measured:
        figure = _figures.report(
            name, unit="receipts/s", ours=store, peer=raw, target=">= 0.7", better="higher",
            note=f"reserve + complete against raw psycopg INSERT + UPDATE on the store's table, {label}")
        rows.append((label, f"{statistics.median(raw):,.0f}/s", f"{figure.ours:,.0f}/s",
                     f"{figure.ratio:.2f}x" if figure.ratio is not None else "-", f"{figure.spread:.2f}",
                     f"{figure.target}: {figure.verdict}"))
    print(title)
    print(_figures.table(("writers", "raw psycopg", "PostgresReceiptStore", "throughput vs raw", "spread",
                          "target"), rows))


def print_sqlite(title: str, measured: List[Tuple[str, str, List[float], List[float]]], synchronous: str) -> None:
    """Per setting: raw and store seconds per receipt (medians), and the store's time over raw's
    (median of the per-round ratios, with their spread); each also reported as a figure."""
    rows = []
    for label, name, store, raw in measured:
        figure = _figures.report(
            name, unit="s/receipt", ours=store, peer=raw, target="<= 1.25", better="lower",
            note=f"reserve + complete against raw sqlite3 INSERT + UPDATE, WAL, synchronous={synchronous}, {label}")
        rows.append((label, f"{statistics.median(raw) * 1e6:.1f}us", f"{figure.ours * 1e6:.1f}us",
                     f"{figure.ratio:.2f}x" if figure.ratio is not None else "-", f"{figure.spread:.2f}",
                     f"{1 / figure.ratio:.2f}x" if figure.ratio else "-", f"{figure.target}: {figure.verdict}"))
    print(title)
    print(_figures.table(("writers", "raw sqlite3", "SqliteReceiptStore", "time vs raw", "spread",
                          "throughput vs raw", "target"), rows))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="store_bench", description="Receipt store throughput against raw SQL")
    parser.add_argument("--receipts", type=int, default=2000,
                        help="receipts per measurement (SQLite: per process; default 2000)")
    parser.add_argument("--processes", type=int, default=4, help="SQLite: concurrent writer processes (default 4)")
    parser.add_argument("--writers", type=int, default=8, help="PostgreSQL: concurrent writer threads (default 8)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds (the median and spread are reported; default 5)")
    parser.add_argument("--synchronous", default="NORMAL", choices=["OFF", "NORMAL", "FULL"],
                        help="SQLite synchronous level for the store and raw sqlite3 (default NORMAL)")
    parser.add_argument("--postgres-dsn", default=os.environ.get(DSN_VARIABLE),
                        help=f"a libpq connection string; default ${DSN_VARIABLE} (no DSN: PostgreSQL is skipped)")
    parser.add_argument("--quick", action="store_true", help="200 receipts, 1 round: a smoke run")
    args, _unknown = parser.parse_known_args(argv)
    receipts, rounds = (200, 1) if args.quick else (max(1, args.receipts), max(1, args.rounds))
    processes, writers = max(2, args.processes), max(2, args.writers)
    with tempfile.TemporaryDirectory() as directory:
        measured = sqlite_figures(directory, receipts, processes, args.synchronous, rounds)
    print_sqlite(f"SQLite receipts: reserve + complete against the same two transactions in raw sqlite3 "
                 f"(medians of {rounds} interleaved rounds of {receipts} receipts per process, WAL, "
                 f"synchronous={args.synchronous})", measured, args.synchronous)
    print()
    if not args.postgres_dsn:
        print(f"PostgreSQL receipts: skipped (no server: pass --postgres-dsn or set {DSN_VARIABLE})")
        return 0
    try:
        import psycopg  # noqa: F401
    except ImportError:
        print("PostgreSQL receipts: skipped (psycopg is not installed: pip install 'psycopg[binary]')")
        return 0
    durability, measured = postgres_figures(args.postgres_dsn, receipts, writers, rounds)
    print_postgres(f"PostgreSQL receipts: reserve + complete against the same two autocommitted statements in raw "
                   f"psycopg (medians of {rounds} rounds of {receipts} receipts over all writers, each round "
                   f"interleaved in {SLICES} slices; {durability})", measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
