"""Worker threads shared by every registry of a process, and the bounded executor each registry's
`WorkerPool` (`agent_lab.execution`) hands its jobs to.

Starting a thread costs about a fifth of a millisecond of CPU. A lab run builds a registry per case and
surface (about sixty), and each used to start threads of its own for a call or two: some 10 ms of a
gate run's CPU. A `BoundedExecutor` now borrows its workers from one process-wide reservoir of threads
and gives each back as soon as it finds the executor's queue empty, so a process starts about as many
threads as ever run handlers at once, not as many as it has registries.

What a registry sees is what a `ThreadPoolExecutor(max_workers)` of its own gave it: at most
`max_workers` of its jobs run at a time and more wait in its own queue (`_work_queue`), `shutdown`
refuses new jobs, drops (cancels) queued ones with `cancel_futures` and with `wait` waits for those
running, and a handler that overruns keeps its thread until it returns (the reservoir starts another
for whoever needs one meanwhile). At interpreter exit, handlers still running finish before the process
ends, as a thread pool's workers did, and so do the checks of what async handlers returned
(`run_detached`: a late write's real result is then stored; one stuck for good in handler code holds the
exit up as a handler that never returns does); the reservoir's threads are daemons so that idle ones never hold
the exit up.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextvars
import itertools
import os
import queue
import threading
from typing import Any, Callable, Optional

__all__ = ["BoundedExecutor", "DetachedJobs", "IDLE_S", "run_detached"]

_copy_context = contextvars.copy_context

IDLE_S = 30.0
"""A reservoir thread with no work for this long ends (a burst of calls leaves no crowd of threads)."""

THREAD_NAME = "agent-lab-tool"


class _Reservoir:
    """Idle daemon threads that run tasks (callables that never raise) handed to `run`.

    `_idle` counts the threads waiting for a task, less the tasks already handed to them: `run` claims
    one under the lock (or starts a thread), and a thread that gives up waiting looks for a task under
    the same lock before it ends, so no task is ever left without a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = 0
        self._threads: set[threading.Thread] = set()
        self._closing = False
        self._numbers = itertools.count()

    def run(self, task: Callable[[], None]) -> None:
        """Run `task` on an idle thread, or on a new one if none is idle. RuntimeError at interpreter exit
        (or when no thread can be started)."""
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            if self._idle:
                self._idle -= 1
                self._tasks.put(task)
                return
            thread = threading.Thread(target=self._serve, args=(task,), daemon=True,
                                      name=f"{THREAD_NAME}_{next(self._numbers)}")
            self._threads.add(thread)
            try:
                thread.start()
            except BaseException:
                self._threads.discard(thread)
                raise

    def _serve(self, task: Optional[Callable[[], None]]) -> None:
        try:
            while task is not None:
                task()
                task = None
                with self._lock:
                    if self._closing:
                        break
                    self._idle += 1
                try:
                    task = self._tasks.get(timeout=IDLE_S)
                except queue.Empty:
                    with self._lock:
                        try:
                            task = self._tasks.get_nowait()  # handed over just as the wait ended
                        except queue.Empty:
                            self._idle -= 1
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def close(self) -> None:
        """At interpreter exit: idle threads end, and running tasks (handlers) finish first."""
        with self._lock:
            self._closing = True
            for _ in range(self._idle):
                self._tasks.put(None)
            threads = list(self._threads)
        for thread in threads:
            thread.join()


_reservoir: Optional[_Reservoir] = None
_reservoir_lock = threading.Lock()


def _shared() -> _Reservoir:
    global _reservoir
    reservoir = _reservoir
    if reservoir is None:
        with _reservoir_lock:
            if _reservoir is None:
                _reservoir = _Reservoir()
                atexit.register(_reservoir.close)
            reservoir = _reservoir
    return reservoir


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: it starts a reservoir of its own (and counts
    no detached job as running: see `DetachedJobs`)."""
    global _reservoir, _reservoir_lock, _generation
    _reservoir = None
    _reservoir_lock = threading.Lock()
    _generation += 1


_generation = 0  # how many forks this process is from the one that imported this module


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


MAX_DETACHED = 32
"""At most this many jobs of one `DetachedJobs` run at once; more wait, in order, for one of them to
end. A job stuck for good in code it runs (an output check in a handler's tzinfo that never returns)
keeps its thread: without a bound, every call that met it again would leave one more."""


class DetachedJobs:
    """Jobs run by `run_detached`, at most `MAX_DETACHED` at once, of one group: the output checks of one
    tool of one registry (`Services.detached`). One bound for the whole process let a tool whose checks
    stick in its own code (32 calls) stop every other tool's checks, in every registry, for good: their
    reads timed out and their writes' keys stayed in progress. Per tool, a stuck tool stops only its
    own later checks, and holds at most `MAX_DETACHED` threads."""

    def __init__(self) -> None:
        self._executor: Optional[BoundedExecutor] = None
        self._generation = -1  # the fork the executor was made in: a child's never counts its parent's

    def executor(self) -> BoundedExecutor:
        executor = self._executor
        if executor is None or self._generation != _generation:
            with _reservoir_lock:  # (a lock of our own could have been held at the fork, for good in the child)
                if self._executor is None or self._generation != _generation:
                    self._executor = BoundedExecutor(MAX_DETACHED)
                    self._generation = _generation
                executor = self._executor
        return executor


def run_detached(jobs: DetachedJobs, function: Callable[..., Any], /, *arguments: Any) -> concurrent.futures.Future:
    """Run `function(*arguments)` on a thread of the reservoir, never one of a registry's pool, in a copy of
    the caller's context as `BoundedExecutor.submit` does; at most `MAX_DETACHED` jobs of `jobs` run at
    once (more wait their turn). Its future is running from the start, so nobody can call the job off
    (`cancel()` is False) whether it waits or runs: it may have to end what the caller began. For a
    short job no registry's pool should bound or delay: the check of what an async handler hands back
    (see `agent_lab.steps.run`). RuntimeError at interpreter exit (or when no thread can be started)."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()

    def job() -> None:
        try:
            result = function(*arguments)
        except BaseException as exception:  # noqa: BLE001 - the future carries it, as a pool's does
            future.set_exception(exception)
        else:
            future.set_result(result)

    jobs.executor().submit(job)  # (in a copy of this, the caller's, context)
    return future


class BoundedExecutor:
    """A thread pool of at most `max_workers` workers, borrowed from the process's reservoir: the
    subset of `concurrent.futures.ThreadPoolExecutor` that `WorkerPool` uses (`submit`, `shutdown`)."""

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._work_queue: queue.SimpleQueue = queue.SimpleQueue()  # (future, function, arguments)
        self._lock = threading.Condition(threading.Lock())
        self._workers = 0
        self._running_on: set[int] = set()  # the idents of the threads draining the queue now
        self._shutdown = False

    def submit(self, function: Callable[..., Any], /, *arguments: Any) -> concurrent.futures.Future:
        """Queue `function(*arguments)`, starting a worker if fewer than `max_workers` run. RuntimeError
        after `shutdown` (or at interpreter exit).

        The job runs in a copy of the submitting caller's context (`contextvars`), as `asyncio.to_thread`
        runs one: it sees the caller's context variables (a request id, a tracing span), and what it
        sets stays in its own job. In the thread's own context the next job on that thread would inherit
        it, and the threads serve every registry of the process: one tenant's handler would leave its
        values to another's."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        job = (future, _copy_context().run, (function, *arguments))
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._workers < self._max_workers:
                _shared().run(self._drain)  # it takes the lock before it looks at the queue
                self._workers += 1
            self._work_queue.put(job)
        return future

    def _drain(self) -> None:
        """A worker: run queued jobs until none is left, then give the thread back."""
        me = threading.get_ident()
        with self._lock:
            self._running_on.add(me)
        while True:
            with self._lock:
                try:
                    future, function, arguments = self._work_queue.get_nowait()
                except queue.Empty:
                    self._workers -= 1
                    self._running_on.discard(me)
                    self._lock.notify_all()
                    return
            if future.set_running_or_notify_cancel():
                try:
                    result = function(*arguments)
                except BaseException as exception:  # noqa: BLE001 - the future carries it, as a pool's does
                    future.set_exception(exception)
                    del exception
                else:
                    future.set_result(result)
                    del result
            del future, function, arguments  # nothing of a finished job is kept while the next one runs

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new jobs; with `cancel_futures` cancel the queued ones; with `wait` wait until the
        running ones end (RuntimeError when called from one of them: it would wait for itself)."""
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        future, _, _ = self._work_queue.get_nowait()
                    except queue.Empty:
                        break
                    future.cancel()
            if wait:
                if threading.get_ident() in self._running_on:
                    raise RuntimeError("cannot join current thread")
                while self._workers:
                    self._lock.wait()
