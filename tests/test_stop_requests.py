"""Whose stop request is it? A handler's sys.exit is a failed call; the caller's Ctrl-C still stops.

Code declared on a tool (its handler, what the handler returns, its resource guard, its approval
condition) may raise anything, SystemExit, KeyboardInterrupt and GeneratorExit included: `invoke`
turns it into a result, like any other exception, so it can never end a run or make a gate pass with
nothing checked. What passes through `invoke` is a real Ctrl-C delivered to the calling (main) thread;
how it is told apart is `agent_lab.interrupts`' rule, tested here with real signals
(`signal.pthread_kill` of SIGINT to the main thread, exactly what a terminal's Ctrl-C does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import unittest
from typing import Any, Callable, Iterator

from agent_lab import Actor, ApprovalPolicy, Execution, Registry, ToolCall, ToolSpec
from agent_lab.errors import NextAction, Outcome
from agent_lab.interrupts import stop_request, tracking_interrupts

from test_registry_fixtures import READER

OPEN = {"type": "object"}
KEYED = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
WAIT_S = 10.0  # a generous bound on waiting for a handler to start; never reached when all is well


class CustomBaseException(BaseException):
    pass


def user_exits() -> list[BaseException]:
    """What code under test raises to stop: each must be a failed call, never an exception."""
    return [SystemExit(0), SystemExit(3), SystemExit("bye"), KeyboardInterrupt(), GeneratorExit(),
            CustomBaseException()]


@contextlib.contextmanager
def default_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handler, whatever the test runner installed (restored afterwards)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ctrl_c_once(started: threading.Event) -> threading.Thread:
    """A thread that sends SIGINT to the main thread once `started` is set (a terminal's Ctrl-C)."""
    main = threading.main_thread().ident

    def press() -> None:
        if started.wait(WAIT_S):
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    return thread


class StopRequestTestCase(unittest.TestCase):
    def setUp(self) -> None:
        logging.disable(logging.CRITICAL)  # contained exceptions are logged on purpose
        self.addCleanup(logging.disable, logging.NOTSET)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own Ctrl-C handler
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.effects: list[str] = []

    def registry(self, **options: Any) -> Registry:
        registry = Registry(**options)
        self.addCleanup(registry.close)
        return registry

    def invoke(self, registry: Registry, name: str, arguments: Any = None) -> Any:
        """invoke, failing the test (instead of ending the run) if anything escapes it."""
        try:
            return registry.invoke(ToolCall(name, arguments or {}), actor=READER)
        except BaseException as escaped:  # noqa: BLE001 - that is the defect under test
            self.fail(f"invoke raised {type(escaped).__name__}")

    def ainvoke(self, registry: Registry, name: str, arguments: Any = None) -> Any:
        try:
            return asyncio.run(registry.ainvoke(ToolCall(name, arguments or {}), actor=READER))
        except BaseException as escaped:  # noqa: BLE001
            self.fail(f"ainvoke raised {type(escaped).__name__}")

    def writer(self, exception: BaseException) -> Callable[[Any], Any]:
        def write(arguments: Any) -> Any:
            self.effects.append(arguments["key"])
            raise exception

        return write


class HandlerExitsAreFailedCallsTest(StopRequestTestCase):
    """Every way a handler can run: on the pool, inline, async on the registry's loop, async awaited."""

    def test_a_pooled_handlers_exit_is_a_failed_call_and_the_pool_keeps_working(self) -> None:
        registry = self.registry()
        registry.register(ToolSpec(name="fine", description="d", input_schema=OPEN), lambda arguments: {"ok": 1})
        for index, exception in enumerate(user_exits()):
            with self.subTest(exception=repr(exception)):
                registry.register(ToolSpec(name=f"exits_{index}", description="d", input_schema=OPEN),
                                  _raising(exception))
                result = self.invoke(registry, f"exits_{index}")
                self.assertEqual((result.error.code, result.outcome), ("handler_exception", Outcome.FAILED))
                self.assertEqual(self.invoke(registry, "fine").output, {"ok": 1})

    def test_an_async_handlers_exit_is_a_failed_call_on_the_tools_loop_and_under_ainvoke(self) -> None:
        registry = self.registry()

        async def fine(arguments: Any) -> Any:
            return {"ok": 1}

        registry.register(ToolSpec(name="fine", description="d", input_schema=OPEN), fine)
        for index, exception in enumerate(user_exits()):
            registry.register(ToolSpec(name=f"exits_{index}", description="d", input_schema=OPEN),
                              _async_raising(exception))
            with self.subTest(exception=repr(exception), via="invoke"):
                result = self.invoke(registry, f"exits_{index}")
                self.assertEqual((result.error.code, result.outcome), ("handler_exception", Outcome.FAILED))
                self.assertEqual(self.invoke(registry, "fine").output, {"ok": 1})  # the loop survived
            if isinstance(exception, KeyboardInterrupt):
                continue  # awaited on the main thread without tracking: taken for Ctrl-C (see below)
            with self.subTest(exception=repr(exception), via="ainvoke"):
                result = self.ainvoke(registry, f"exits_{index}")
                self.assertEqual((result.error.code, result.outcome), ("handler_exception", Outcome.FAILED))

    def test_an_inline_handlers_exit_is_a_failed_call_on_the_main_thread_while_tracking(self) -> None:
        registry = self.registry()
        for index, exception in enumerate(user_exits()):
            registry.register(ToolSpec(name=f"exits_{index}", description="d", input_schema=OPEN,
                                       execution=Execution.INLINE), _raising(exception))
            with self.subTest(exception=repr(exception)), tracking_interrupts() as tracking:
                self.assertTrue(tracking)
                result = self.invoke(registry, f"exits_{index}")
                self.assertEqual((result.error.code, result.outcome), ("handler_exception", Outcome.FAILED))

    def test_an_inline_handlers_exit_is_a_failed_call_off_the_main_thread(self) -> None:
        registry = self.registry(run_inline=True)
        for index, exception in enumerate(user_exits()):
            registry.register(ToolSpec(name=f"exits_{index}", description="d", input_schema=OPEN), _raising(exception))
        results: dict[int, Any] = {}

        def call_each() -> None:
            for index in range(len(user_exits())):
                results[index] = registry.invoke(ToolCall(f"exits_{index}", {}), actor=READER)

        worker = threading.Thread(target=call_each)
        worker.start()
        worker.join(WAIT_S)
        self.assertEqual([result.error.code for result in results.values()], ["handler_exception"] * len(user_exits()))

    def test_without_tracking_sys_exit_in_an_inline_handler_is_its_own_but_keyboard_interrupt_is_ctrl_c(self) -> None:
        registry = self.registry(run_inline=True)
        registry.register(ToolSpec(name="exits", description="d", input_schema=OPEN), _raising(SystemExit(0)))
        registry.register(ToolSpec(name="closes", description="d", input_schema=OPEN), _raising(GeneratorExit()))
        registry.register(ToolSpec(name="interrupts", description="d", input_schema=OPEN), _raising(KeyboardInterrupt()))
        self.assertEqual(self.invoke(registry, "exits").error.code, "handler_exception")
        self.assertEqual(self.invoke(registry, "closes").error.code, "handler_exception")
        with self.assertRaises(KeyboardInterrupt):  # nothing can tell it from a terminal's Ctrl-C here
            registry.invoke(ToolCall("interrupts", {}), actor=READER)

    def test_a_write_whose_handler_exits_is_unknown_and_its_retry_never_runs_it_again(self) -> None:
        for execution, tracked in (("pool", False), ("inline", True), ("async", False)):
            with self.subTest(execution=execution):
                registry = self.registry()
                handler = self.writer(SystemExit(0))
                if execution == "async":
                    sync_handler = handler

                    async def handler(arguments: Any) -> Any:  # type: ignore[no-redef]
                        return sync_handler(arguments)

                registry.register(ToolSpec(name="put", description="d", input_schema=KEYED, effect="write",
                                           idempotency_key="key", execution="inline" if execution == "inline" else "pool"),
                                  handler)
                self.effects.clear()
                with tracking_interrupts() if tracked else contextlib.nullcontext():
                    first = self.invoke(registry, "put", {"key": "k-1"})
                    again = self.invoke(registry, "put", {"key": "k-1"})
                self.assertEqual((first.error.code, first.outcome, first.error.next_action),
                                 ("handler_exception", Outcome.UNKNOWN, NextAction.LOOKUP_STATUS))
                self.assertTrue(again.replayed)
                self.assertEqual(again.outcome, Outcome.UNKNOWN)
                self.assertEqual(self.effects, ["k-1"])  # one effect: the retry replayed "unknown"


class HooksAndOutputsTest(StopRequestTestCase):
    """Code declared on a tool other than its handler, and what the handler hands back."""

    def test_a_resource_guard_or_approval_condition_that_exits_refuses_the_call_and_nothing_runs(self) -> None:
        for index, exception in enumerate(user_exits()):
            registry = self.registry()
            registry.register(ToolSpec(name="guarded", description="d", input_schema=OPEN,
                                       resource_guard=_raising_hook(exception)), self.writer(SystemExit(0)))
            registry.register(ToolSpec(name="approved", description="d", input_schema=OPEN, effect="write",
                                       approval=ApprovalPolicy.CONDITIONAL,
                                       approval_condition=_raising_hook(exception)), self.writer(SystemExit(0)))
            for name in ("guarded", "approved"):
                with self.subTest(exception=repr(exception), hook=name), tracking_interrupts():
                    result = self.invoke(registry, name)
                    self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
        self.assertEqual(self.effects, [])

    def test_an_output_whose_reading_exits_is_an_internal_error_wherever_it_is_checked(self) -> None:
        class ExitsWhenRead:
            @property
            def __class__(self):  # type: ignore[override]  # what isinstance() asks of an unknown object
                raise SystemExit(0)

        for returned in ("inside a dict", "itself"):
            def output() -> Any:
                return {"value": ExitsWhenRead()} if returned == "inside a dict" else ExitsWhenRead()

            async def async_returns(arguments: Any) -> Any:
                return output()

            for execution in ("pool", "inline", "async", "ainvoke"):
                with self.subTest(execution=execution, returned=returned):
                    registry = self.registry()
                    handler = async_returns if execution in ("async", "ainvoke") else (lambda arguments: output())
                    registry.register(ToolSpec(name="odd", description="d", input_schema=OPEN, effect="write",
                                               execution="inline" if execution == "inline" else "pool"), handler)
                    result = self.ainvoke(registry, "odd") if execution == "ainvoke" else self.invoke(registry, "odd")
                    self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.UNKNOWN))

    def test_a_task_an_async_handler_leaves_behind_that_exits_does_not_stop_the_tools_loop(self) -> None:
        async def spawns_an_exiting_task(arguments: Any) -> Any:
            async def exits() -> None:
                raise SystemExit(9)  # asyncio lets this out of the event loop itself

            asyncio.ensure_future(exits())
            await asyncio.sleep(0.05)  # the loop runs the task meanwhile
            return {"ok": True}

        async def fine(arguments: Any) -> Any:
            return {"ok": True}

        registry = self.registry()
        registry.register(ToolSpec(name="spawns", description="d", input_schema=OPEN), spawns_an_exiting_task)
        registry.register(ToolSpec(name="fine", description="d", input_schema=OPEN), fine)
        self.assertEqual(self.invoke(registry, "spawns").output, {"ok": True})  # its own call still answers
        self.assertEqual(self.invoke(registry, "fine").output, {"ok": True})

    def test_an_exception_whose_message_or_class_name_exits_when_read_is_still_contained(self) -> None:
        class NameExits(type):
            @property
            def __name__(cls):  # type: ignore[override]
                raise SystemExit(0)

        class StrExits(Exception, metaclass=NameExits):
            def __str__(self) -> str:
                raise SystemExit(0)

        logging.disable(logging.NOTSET)  # so the debug description (which reads the message) is written
        logger = logging.getLogger("agent_lab.execution")
        previous = logger.level
        logger.setLevel(logging.DEBUG)
        self.addCleanup(logger.setLevel, previous)
        registry = self.registry()
        registry.register(ToolSpec(name="odd", description="d", input_schema=OPEN), _raising(StrExits()))
        with self.assertLogs("agent_lab.execution", logging.DEBUG) as logs:
            result = self.invoke(registry, "odd")
        self.assertEqual(result.error.code, "handler_exception")
        self.assertIn("[message unreadable]", "\n".join(logs.output))


class CallersCtrlCTest(StopRequestTestCase):
    """A real Ctrl-C (SIGINT delivered to the main thread) still stops the caller."""

    def blocking(self, started: threading.Event, release: threading.Event) -> Callable[[Any], Any]:
        def handler(arguments: Any) -> Any:
            started.set()
            _wait_interruptibly(release)
            return {"done": True}

        return handler

    def test_ctrl_c_while_invoke_waits_for_a_pooled_or_async_handler_stops_the_caller(self) -> None:
        for execution in ("pool", "async"):
            with self.subTest(execution=execution):
                started, release = threading.Event(), threading.Event()
                self.addCleanup(release.set)
                registry = self.registry()
                handler = self.blocking(started, release)
                if execution == "async":
                    async def handler(arguments: Any) -> Any:  # type: ignore[no-redef]
                        started.set()
                        await asyncio.get_running_loop().run_in_executor(None, release.wait, WAIT_S)
                        return {"done": True}
                # The caller waits in one blocking wait; should the signal land just before it starts,
                # it is handled when the wait ends, at the deadline: still before invoke returns.
                registry.register(ToolSpec(name="slow", description="d", input_schema=OPEN, timeout_ms=2000),
                                  handler)
                ctrl_c_once(started)
                with self.assertRaises(KeyboardInterrupt):
                    registry.invoke(ToolCall("slow", {}), actor=READER)

    def test_ctrl_c_during_an_inline_handler_stops_the_caller_with_or_without_tracking(self) -> None:
        for tracked in (False, True):
            with self.subTest(tracked=tracked):
                started, release = threading.Event(), threading.Event()
                self.addCleanup(release.set)
                registry = self.registry(run_inline=True)
                registry.register(ToolSpec(name="slow", description="d", input_schema=OPEN, timeout_ms=WAIT_S * 1000),
                                  self.blocking(started, release))
                ctrl_c_once(started)
                with tracking_interrupts() if tracked else contextlib.nullcontext(), \
                        self.assertRaises(KeyboardInterrupt):
                    registry.invoke(ToolCall("slow", {}), actor=READER)

    def test_ctrl_c_a_handler_turns_into_another_exception_still_stops_the_caller_while_tracking(self) -> None:
        started = threading.Event()

        def swallows_ctrl_c(arguments: Any) -> Any:
            try:
                started.set()
                _wait_interruptibly(threading.Event())
            except KeyboardInterrupt:
                raise RuntimeError("interrupted") from None  # the context still names Ctrl-C
            return {}

        registry = self.registry(run_inline=True)
        registry.register(ToolSpec(name="slow", description="d", input_schema=OPEN, timeout_ms=WAIT_S * 1000),
                          swallows_ctrl_c)
        ctrl_c_once(started)
        with tracking_interrupts(), self.assertRaises(KeyboardInterrupt):
            registry.invoke(ToolCall("slow", {}), actor=READER)

    def test_ctrl_c_during_an_inline_write_leaves_its_key_to_the_stores_lease(self) -> None:
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)
        registry = self.registry(run_inline=True)

        def write(arguments: Any) -> Any:
            self.effects.append(arguments["key"])
            started.set()
            _wait_interruptibly(release)
            return {}

        registry.register(ToolSpec(name="put", description="d", input_schema=KEYED, effect="write",
                                   idempotency_key="key", timeout_ms=WAIT_S * 1000), write)
        ctrl_c_once(started)
        with tracking_interrupts(), self.assertRaises(KeyboardInterrupt):
            registry.invoke(ToolCall("put", {"key": "k-1"}), actor=READER)
        self.assertEqual(self.invoke(registry, "put", {"key": "k-1"}).error.code, "idempotency_in_progress")
        self.assertEqual(self.effects, ["k-1"])


class RuleTest(unittest.TestCase):
    """`stop_request`, the rule itself."""

    def test_off_the_main_thread_nothing_is_a_stop_request(self) -> None:
        answers: list[Any] = []
        thread = threading.Thread(target=lambda: answers.extend(
            stop_request(exception, in_user_code=False) for exception in (KeyboardInterrupt(), SystemExit(1))))
        thread.start()
        thread.join(WAIT_S)
        self.assertEqual(answers, [None, None])

    def test_on_the_main_thread_untracked_system_exit_stops_only_from_the_runtimes_own_code(self) -> None:
        with default_sigint():
            interrupt, exit_request = KeyboardInterrupt(), SystemExit(2)
            self.assertIs(stop_request(interrupt, in_user_code=True), interrupt)
            self.assertIsNone(stop_request(exit_request, in_user_code=True))
            self.assertIs(stop_request(exit_request, in_user_code=False), exit_request)
            self.assertIsNone(stop_request(GeneratorExit(), in_user_code=False))

    def test_while_tracking_only_the_interrupt_a_sigint_raised_is_a_stop_request(self) -> None:
        with default_sigint(), tracking_interrupts() as tracking:
            self.assertTrue(tracking)
            self.assertIsNone(stop_request(KeyboardInterrupt(), in_user_code=False))
            self.assertIsNone(stop_request(SystemExit(0), in_user_code=False))
            try:
                signal.raise_signal(signal.SIGINT)
                threading.Event().wait(WAIT_S)  # the handler runs before this returns
            except KeyboardInterrupt as delivered:
                self.assertIs(stop_request(delivered), delivered)
                wrapped = RuntimeError("converted")
                wrapped.__context__ = delivered
                self.assertIs(stop_request(wrapped), delivered)
            self.assertIsNot(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        with default_sigint():
            self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)

    def test_tracking_leaves_an_applications_own_sigint_handler_alone(self) -> None:
        def own(signum: int, frame: Any) -> None:
            pass

        previous = signal.signal(signal.SIGINT, own)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        with tracking_interrupts() as tracking:
            self.assertFalse(tracking)
            self.assertIs(signal.getsignal(signal.SIGINT), own)


def _wait_interruptibly(event: threading.Event) -> None:
    """Wait for `event` (up to WAIT_S) in short steps. A signal that lands just before a blocking wait
    starts is only handled once the wait ends (a race in every blocking call); between steps Python
    runs the pending handler, so a Ctrl-C interrupts this wait at once whenever it lands."""
    for _ in range(int(WAIT_S / 0.01)):
        if event.wait(0.01):
            return


def _raising(exception: BaseException) -> Callable[[Any], Any]:
    def handler(arguments: Any) -> Any:
        raise exception

    return handler


def _async_raising(exception: BaseException) -> Callable[[Any], Any]:
    async def handler(arguments: Any) -> Any:
        raise exception

    return handler


def _raising_hook(exception: BaseException) -> Callable[..., Any]:
    def hook(*arguments: Any) -> Any:
        raise exception

    return hook


if __name__ == "__main__":
    unittest.main()
