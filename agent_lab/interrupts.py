"""Whose stop request is it: the caller's Ctrl-C, or something the code under a call raised?

The registry, the lab engine and the MCP server run code they do not own: handlers, resource guards,
approval conditions, a lab's world factory, builders and readers. That code may raise anything,
`SystemExit` and `KeyboardInterrupt` included (a library that calls `sys.exit`, a retry wrapper that
re-raises Ctrl-C, a generator's `GeneratorExit` let out), and none of it may end a run or make a gate
pass with nothing checked. What may stop the run is a request delivered to the process: Ctrl-C's
`KeyboardInterrupt`, or the `SystemExit` an application's own signal handler raises. Python runs signal
handlers on the main thread only, so `stop_request` decides like this:

* On any other thread (the registry's workers and event loop, the MCP server's calls, tool-eval's
  replays) nothing is a stop request: whatever was raised is contained.
* On the main thread, while `tracking_interrupts()` is active (the command line turns it on for every
  command), the one stop request is the KeyboardInterrupt its SIGINT handler raised, found in the
  exception itself or in what it was raised from or while handling (so code that turns Ctrl-C into
  another exception does not swallow it).
* On the main thread without it, nothing can tell Ctrl-C from a `raise KeyboardInterrupt`: every
  KeyboardInterrupt is taken for Ctrl-C. A SystemExit is a stop request only where the runtime's own code
  was running (a signal handler's `sys.exit`); raised inside a handler or hook it is that code's own.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import threading
from typing import Any, Iterator, Optional

__all__ = ["Terminated", "raise_stop_request", "stop_request", "terminating_as_interrupt", "tracking_interrupts"]

_DELIVERED_KEPT = 4
"""How many Ctrl-C interrupts raised by the tracking handler are remembered (by identity)."""

_CHAIN_LIMIT = 8
"""How far along `__cause__` / `__context__` a delivered interrupt is looked for."""

_delivered: collections.deque = collections.deque(maxlen=_DELIVERED_KEPT)
_CAUSE = BaseException.__dict__["__cause__"]  # read through the C slots: a subclass's property is not asked
_CONTEXT = BaseException.__dict__["__context__"]


def _deliver(interrupt: KeyboardInterrupt) -> None:
    """Raise `interrupt` from a signal handler, remembered as delivered: `stop_request` knows it by identity."""
    _delivered.append(interrupt)
    raise interrupt


def _raise_tracked_interrupt(signum: int, frame: Any) -> None:
    """The SIGINT handler while tracking: Python's own behaviour (raise KeyboardInterrupt), remembered."""
    _deliver(KeyboardInterrupt())


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as a stop request the way Ctrl-C is (see `terminating_as_interrupt`)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    """The SIGTERM handler of `terminating_as_interrupt`."""
    _deliver(Terminated())


@contextlib.contextmanager
def _handled_by(signum: int, default: Any, handler: Any) -> Iterator[bool]:
    """`handler` for `signum` while the block runs, where `default` is in place on the main thread; the
    default comes back at the end. Yields whether `handler` is in place (an outer block's counts)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    current = signal.getsignal(signum)
    if current is handler or current is not default:  # an outer block's, or the application's own
        yield current is handler
        return
    signal.signal(signum, handler)
    try:
        yield True
    finally:
        if signal.getsignal(signum) is handler:
            signal.signal(signum, default)


@contextlib.contextmanager
def tracking_interrupts() -> Iterator[bool]:
    """Tell Ctrl-C apart from a KeyboardInterrupt that code raises itself, for as long as the block runs.

    On the main thread, with Python's default SIGINT handler in place, it installs one that behaves the
    same (raises KeyboardInterrupt) and remembers what it raised; the previous handler comes back at the
    end. Anywhere else (another thread, a SIGINT handler of the application's own) it changes nothing.
    Yields whether it tracks. While it does, a KeyboardInterrupt that a handler, hook or lab raises on
    the main thread is contained like any other exception, and a real Ctrl-C still stops the caller.
    """
    with _handled_by(signal.SIGINT, signal.default_int_handler, _raise_tracked_interrupt) as tracking:
        yield tracking


@contextlib.contextmanager
def terminating_as_interrupt() -> Iterator[bool]:
    """While the block runs, SIGTERM raises a `Terminated` interrupt on the main thread, known as a stop
    request like a tracked Ctrl-C, instead of ending the process on the spot: every `finally` under it
    runs, so a command stopped by a CI runner's SIGTERM removes its temporary files and leaves each report
    old or new, as Ctrl-C does. Changes nothing off the main thread, or where the application has a
    SIGTERM handler of its own. Yields whether it is in place. The command line's entry point uses it."""
    with _handled_by(signal.SIGTERM, signal.SIG_DFL, _raise_terminated) as terminating:
        yield terminating


def stop_request(exception: BaseException, *, in_user_code: bool = True) -> Optional[BaseException]:
    """The exception to let through (the caller's request to stop), or None to contain `exception`.

    `in_user_code`: it was raised while code the runtime does not own ran (a handler, a hook, an object
    a handler returned), rather than in the runtime's own steps. Never raises, and never runs code of
    the exception's (its class is read with `type`, its chain through the C slots)."""
    if threading.current_thread() is not threading.main_thread():
        return None  # signal handlers run on the main thread only
    if signal.getsignal(signal.SIGINT) is _raise_tracked_interrupt:  # tracking: Ctrl-C is known by identity
        return _delivered_in(exception)
    kind = type(exception)
    if issubclass(kind, KeyboardInterrupt):
        return exception
    if issubclass(kind, SystemExit) and not in_user_code:
        return exception
    return None


def raise_stop_request(exception: BaseException, *, in_user_code: bool = True) -> None:
    """Raise the caller's stop request if `exception` is (or carries) one (see `stop_request`); else return,
    and the caller contains `exception`."""
    stop = stop_request(exception, in_user_code=in_user_code)
    if stop is not None:
        raise stop


def _delivered_in(exception: BaseException) -> Optional[BaseException]:
    """The tracked Ctrl-C interrupt that `exception` is, or was raised from or while handling."""
    if not _delivered:
        return None
    current: Optional[BaseException] = exception
    for _ in range(_CHAIN_LIMIT):
        if current is None:
            return None
        if any(current is interrupt for interrupt in _delivered):
            return current
        cause = _CAUSE.__get__(current)
        current = cause if cause is not None else _CONTEXT.__get__(current)
    return None
