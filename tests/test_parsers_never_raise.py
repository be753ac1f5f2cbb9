"""Issue 8, item 11: the host parsers never raise, whatever object a host library hands over.

Property-style: hostile objects are built from a table of misbehaviours (a Mapping whose iteration,
`__getitem__`, `keys`, `get` or `__len__` raises or lies, keys that never end, objects whose attribute
access or `__class__` raises, str subclasses whose methods raise, recursion bombs) and placed at every
position of every host's payload, in many seeded random combinations. Every parser, and
`HostBridge.parse_call` for every format, must return a `ToolCall` whose name is a plain `str`, and
the registry must answer that call without raising.
"""

from __future__ import annotations

import itertools
import random
import sys
import unittest
from collections.abc import Mapping
from typing import Any, Callable

from agent_lab.adapters import (
    HostBridge,
    parse_anthropic_call,
    parse_mcp_call,
    parse_openai_call,
    parse_openai_chat_call,
)
from agent_lab.calls import ToolCall
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

SEED = 20240608
ROUNDS = 300
ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


class Boom(Exception):
    """What the hostile objects raise."""


class OddBase(BaseException):
    """Not an Exception: a host library could raise anything."""


def boom(*_: Any, **__: Any) -> Any:
    raise Boom("hostile")


def odd(*_: Any, **__: Any) -> Any:
    raise OddBase("hostile")


class RaisingMapping(Mapping):
    """A Mapping whose every method raises."""

    __getitem__ = __iter__ = __len__ = keys = items = values = get = __contains__ = boom


class OddRaisingMapping(Mapping):
    __getitem__ = __iter__ = __len__ = keys = items = values = get = odd


class LyingMapping(Mapping):
    """Claims keys it cannot give, a negative length, and iterates forever."""

    def __getitem__(self, key: Any) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Any:
        return itertools.count()

    def __len__(self) -> int:
        return -1

    def get(self, key: Any, default: Any = None) -> Any:
        return {"name": "search", "arguments": self, "input": self, "function": self}.get(key, default)


class EndlessKeys(Mapping):
    """keys() never ends; every key reads fine."""

    def __getitem__(self, key: Any) -> Any:
        return key

    def __iter__(self) -> Any:
        return (f"k{index}" for index in itertools.count())

    def __len__(self) -> int:
        return 3


class UnhashableKeys(Mapping):
    def __getitem__(self, key: Any) -> Any:
        return 1

    def __iter__(self) -> Any:
        return iter([[1], {2}])

    def __len__(self) -> int:
        return 2


class LyingDict(dict):
    """A dict subclass whose methods raise (its storage is fine)."""

    get = keys = items = values = __getitem__ = __iter__ = __len__ = boom


class ClassRaises:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise Boom("no class")


class AttributesRaise:
    def __getattr__(self, name: str) -> Any:
        raise Boom(name)

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__dict__",):
            return object.__getattribute__(self, name)
        raise Boom(name)


class RecursionBomb:
    def __getattr__(self, name: str) -> Any:
        return getattr(self, name)  # unbounded recursion


class HostileStr(str):
    """A string whose hash, equality, length and methods raise."""

    __hash__ = __eq__ = __len__ = __bool__ = startswith = strip = __iter__ = __getitem__ = boom  # type: ignore[assignment]


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE: list[Callable[[], Any]] = [
    RaisingMapping, OddRaisingMapping, LyingMapping, EndlessKeys, UnhashableKeys,
    lambda: LyingDict(name="search"), ClassRaises, AttributesRaise, RecursionBomb,
    lambda: HostileStr("search"), lambda: HostileStr('{"q": "x"}'), lambda: HostileStr(""),
    lambda: "[" * 100_000, lambda: nested(5_000), lambda: {"q": float("nan")}, lambda: None, lambda: 7,
    lambda: b'{"q": 1}', lambda: '{"q": 1, "q": 2}', lambda: '{"q": NaN}', lambda: "x" * 1_000_001,
]


def random_value(rng: random.Random) -> Any:
    if rng.random() < 0.6:
        return rng.choice(HOSTILE)()
    return rng.choice(["search", '{"q": "x"}', {"q": "x"}, "", None])


def random_payload(rng: random.Random) -> Any:
    """A host payload (any host's shape) with hostile objects at random positions, or one itself."""
    if rng.random() < 0.25:
        return rng.choice(HOSTILE)()
    fields = ["type", "name", "arguments", "call_id", "id", "input", "function"]
    payload = {field: random_value(rng) for field in fields if rng.random() < 0.7}
    if "function" in payload and rng.random() < 0.5:
        payload["function"] = {"name": random_value(rng), "arguments": random_value(rng)}
    container = rng.choice([dict, LyingDictOf, MappingOf, ObjectOf])
    return container(payload)


class LyingDictOf(dict):
    def get(self, key: Any, default: Any = None) -> Any:
        if key == "arguments":
            raise Boom("lazy field")
        return dict.get(self, key, default)


class MappingOf(Mapping):
    def __init__(self, data: dict) -> None:
        self._data = data

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        raise Boom("no length")


class ObjectOf:
    """An SDK-like object: fields as attributes."""

    def __init__(self, data: dict) -> None:
        self.__dict__.update(data)


PARSERS = (parse_openai_call, parse_openai_chat_call, parse_anthropic_call, parse_mcp_call)


class ParsersNeverRaiseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.registry = Registry()
        cls.registry.register(ToolSpec(name="search", description="Search.",
                                       input_schema={"type": "object", "properties": {"q": {"type": "string"}}}),
                              lambda arguments: {"hits": []})
        cls.bridges = [HostBridge(cls.registry, fmt) for fmt in ("openai", "openai-chat", "anthropic", "mcp")]
        cls.bridges += [HostBridge(cls.registry, fmt, strict=True) for fmt in ("openai", "openai-chat")]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.registry.close()

    def assertUsableCall(self, call: Any) -> None:
        self.assertIsInstance(call, ToolCall)
        self.assertIs(type(call.name), str)
        self.assertTrue(call.call_id is None or type(call.call_id) is str)
        result = self.registry.invoke(call, actor=ACTOR)  # and the registry answers it
        self.assertIsNotNone(result.outcome)

    def test_each_hostile_object_as_a_whole_payload(self) -> None:
        for make in HOSTILE:
            for parse in PARSERS:
                with self.subTest(payload=getattr(make, "__name__", "value"), parse=parse.__name__):
                    self.assertUsableCall(parse(make()))
            for bridge in self.bridges:
                with self.subTest(payload=getattr(make, "__name__", "value"), bridge=bridge.format):
                    self.assertUsableCall(bridge.parse_call(make()))

    def test_random_payloads_with_hostile_fields(self) -> None:
        rng = random.Random(SEED)
        limit = sys.getrecursionlimit()
        for round_number in range(ROUNDS):
            payload = random_payload(rng)
            for parse in PARSERS:
                with self.subTest(round=round_number, parse=parse.__name__):
                    self.assertUsableCall(parse(payload))
            bridge = rng.choice(self.bridges)
            with self.subTest(round=round_number, bridge=bridge.format):
                self.assertUsableCall(bridge.parse_call(payload))
        self.assertEqual(sys.getrecursionlimit(), limit)

    def test_a_well_formed_call_still_parses_after_the_hardening(self) -> None:
        call = parse_openai_call({"type": "function_call", "name": "search", "arguments": '{"q": "x"}',
                                  "call_id": "c-1"})
        self.assertEqual((call.name, call.arguments, call.call_id), ("search", {"q": "x"}, "c-1"))
        call = parse_anthropic_call(MappingOf({"name": "search", "input": MappingOf({"q": "x"}), "id": "t-1"}))
        self.assertEqual((call.name, call.arguments, call.call_id), ("search", {"q": "x"}, "t-1"))


if __name__ == "__main__":
    unittest.main()
