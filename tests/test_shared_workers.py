"""Registries borrow their worker threads from one reservoir (agent_lab.workers), and each still
behaves like a thread pool of its own: bounded, its queue dropped on shutdown, its running jobs
waited for, and handlers still running at interpreter exit finish first."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab import workers
from agent_lab.workers import BoundedExecutor

CHECKOUT = Path(__file__).resolve().parents[1]
READER = Actor(id="u", tenant="t", permissions=set())
WAIT_S = 10.0


def echo_spec() -> ToolSpec:
    return ToolSpec(name="echo", description="Echo.", input_schema={"type": "object"})


class SharedWorkersTest(unittest.TestCase):
    def test_registries_one_after_another_reuse_the_same_threads(self) -> None:
        reservoir = workers._shared()
        before = set(reservoir._threads)
        names: set[str] = set()
        for _ in range(20):
            with Registry() as registry:
                registry.register(echo_spec(), lambda arguments: {"thread": threading.current_thread().name})
                result = registry.invoke(ToolCall("echo", {}), actor=READER)
                names.add(result.output["thread"])
        # A worker is back in the reservoir once its queue is empty: at most one thread was started
        # (none when an earlier test left one idle).
        self.assertLessEqual(len(set(reservoir._threads) - before), 1)
        self.assertTrue(all(name.startswith("agent-lab-tool") for name in names))

    def test_an_executor_runs_at_most_max_workers_jobs_at_once_and_queues_the_rest(self) -> None:
        executor = BoundedExecutor(2)
        release, running, peak, lock = threading.Event(), [0], [0], threading.Lock()

        def job() -> None:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            release.wait(WAIT_S)
            with lock:
                running[0] -= 1

        futures = [executor.submit(job) for _ in range(5)]
        deadline = time.monotonic() + WAIT_S
        while running[0] < 2 and time.monotonic() < deadline:  # the two workers take their first jobs
            time.sleep(0.005)
        time.sleep(0.05)  # (a third would have started by now if the bound let it)
        self.assertEqual((running[0], executor._work_queue.qsize()), (2, 3))
        release.set()
        for future in futures:
            future.result(WAIT_S)
        self.assertEqual(peak[0], 2)
        executor.shutdown(wait=True)

    def test_shutdown_cancels_queued_jobs_waits_for_running_ones_and_refuses_new_ones(self) -> None:
        executor = BoundedExecutor(1)
        started, release = threading.Event(), threading.Event()
        running = executor.submit(lambda: started.set() or release.wait(WAIT_S))
        queued = executor.submit(lambda: "never")
        self.assertTrue(started.wait(WAIT_S))
        threading.Timer(0.05, release.set).start()
        executor.shutdown(wait=True, cancel_futures=True)
        self.assertTrue(running.done())
        self.assertTrue(queued.cancelled())
        with self.assertRaises(RuntimeError):
            executor.submit(lambda: None)

    def test_a_job_that_raises_hands_the_exception_to_its_future_and_the_worker_goes_on(self) -> None:
        executor = BoundedExecutor(1)
        failing = executor.submit(lambda: 1 / 0)
        fine = executor.submit(lambda: "ok")
        with self.assertRaises(ZeroDivisionError):
            failing.result(WAIT_S)
        self.assertEqual(fine.result(WAIT_S), "ok")
        executor.shutdown(wait=True)

    def test_shutdown_waiting_from_one_of_its_own_jobs_raises_instead_of_waiting_forever(self) -> None:
        executor = BoundedExecutor(1)
        future = executor.submit(lambda: executor.shutdown(wait=True))
        with self.assertRaises(RuntimeError):
            future.result(WAIT_S)

    def test_a_handler_still_running_at_interpreter_exit_finishes_before_the_process_ends(self) -> None:
        source = """
import threading, time
from agent_lab import Actor, Registry, ToolCall, ToolSpec
def slow(arguments):
    time.sleep(0.3)
    print("handler finished", flush=True)
    return {}
registry = Registry()
registry.register(ToolSpec(name="slow", description="Slow.", input_schema={"type": "object"}, timeout_ms=20), slow)
result = registry.invoke(ToolCall("slow", {}), actor=Actor(id="u", tenant="t", permissions=set()))
print(result.error.code, flush=True)
"""
        done = subprocess.run([sys.executable, "-c", source], cwd=CHECKOUT, capture_output=True, text=True,
                              timeout=60, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split(), ["tool_timeout", "handler", "finished"])


if __name__ == "__main__":
    unittest.main()
