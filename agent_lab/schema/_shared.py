"""A bounded, thread-safe table of shared compiled parts, for the compiler's shared leaves and keywords
and the validator cache (a module of its own below both: the cache builds validators, whose compiler
uses these tables)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

__all__ = ["SharedTable"]


class SharedTable:
    """A bounded, thread-safe table of shared compiled parts (see `Compiler` for the leaf subschemas it
    shares): the `max_entries` most recently used are held, the others only while something else
    holds them (values must be weakly referenceable)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._recent: "OrderedDict[Any, Any]" = OrderedDict()
        self._live: "weakref.WeakValueDictionary[Any, Any]" = weakref.WeakValueDictionary()

    def get(self, key: Any) -> Any:
        with self._lock:
            found = self._live.get(key)
            if found is not None:
                self._hold(key, found)
            return found

    def add(self, key: Any, value: Any) -> Any:
        """Store `value` under `key` unless another thread stored one first; return the one stored."""
        with self._lock:
            found = self._live.get(key)
            if found is None:
                found = self._live[key] = value
            self._hold(key, found)
            return found

    def _hold(self, key: Any, value: Any) -> None:
        recent = self._recent
        recent[key] = value
        recent.move_to_end(key)
        while len(recent) > self.max_entries:
            recent.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._recent)

    def clear(self) -> None:
        with self._lock:
            self._recent.clear()
            self._live.clear()
