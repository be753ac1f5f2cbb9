"""Compiled schemas: a `Node` per subschema, made of one `Kw` per keyword.

Every keyword compiles to a few closures:
- `check(x) -> bool`: the fast path, short-circuits, builds nothing;
- `collect(x, instance_path, keyword_path, out)`: appends violations; only called after `check` failed;
- `eval_props(x)` / `eval_items(x)`: which object members / array indexes the keyword evaluated
  (annotations), only ever called by `unevaluatedProperties` / `unevaluatedItems`, so schemas
  without them pay nothing for annotation tracking.

A node groups its keywords by the Python type they apply to, so that checking a string never looks
at `maxItems`, and `True` is never seen by a numeric keyword.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..jsonvalue import pointer_join
from ._call_state import memoised_annotation, memoised_check, memoised_collect
from ._messages import sentence
from .model import Violation, make_violation

_new_object = object.__new__

NONE_TYPE = type(None)
PY_TYPES = (NONE_TYPE, bool, int, float, str, list, dict)
STRING = (str,)
NUMBER = (int, float)
ARRAY = (list,)
OBJECT = (dict,)


class _All:
    """Annotation meaning "every member / item was evaluated"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()
NOTHING: frozenset = frozenset()


def base_py_type(value: Any) -> Optional[type]:
    """Map subclasses (str enums, OrderedDict, ...) onto the JSON base type they stand for."""
    if isinstance(value, bool):
        return bool
    for kind in (str, int, float, list, dict):
        if isinstance(value, kind):
            return kind
    return None


def always_true(_instance: Any) -> bool:
    return True


def always_false(_instance: Any) -> bool:
    return False


def no_violations(_instance: Any, _instance_path: str, _keyword_path: str, _out: list) -> None:
    return None


def nothing_evaluated(_instance: Any):
    return NOTHING


def everything_evaluated(_instance: Any):
    return ALL


class Kw:
    """One compiled keyword (see the module docstring for the meaning of each closure)."""

    __slots__ = ("keyword", "types", "check", "collect", "eval_props", "eval_items", "cost", "detail",
                 "self_checking", "passes_for", "__weakref__")

    def __init__(
        self,
        keyword: str,
        types: Optional[Tuple[type, ...]],
        check: Callable[[Any], bool],
        collect: Callable[[Any, str, str, list], None],
        *,
        eval_props: Optional[Callable[[Any], Any]] = None,
        eval_items: Optional[Callable[[Any], Any]] = None,
        cost: int = 1,
        detail: Any = None,
        self_checking: bool = False,
        passes_for: frozenset = frozenset(),
    ) -> None:
        self.keyword = keyword
        self.types = types
        self.check = check
        self.collect = collect
        self.eval_props = eval_props
        self.eval_items = eval_items
        self.cost = cost
        self.detail = detail  # the compiled parts a fused shape may reuse (see _shapes)
        # True when `collect` itself reports only what fails (it checks its parts), so a node can call
        # it without checking the keyword first; otherwise `collect` may only run after `check` failed.
        self.self_checking = self_checking
        # The Python types (see `base_py_type`) of whose every value `check` is true (`type`: the types it
        # names), so collecting skips it for them: a refused string never asks again whether it is a string.
        self.passes_for = passes_for


def violation(out: list, instance_path: str, keyword_path: str, keyword: str, phrase: str) -> None:
    """Append one violation whose message is `phrase` said about the field at `instance_path`."""
    # One string built in one step (an f-string joins its parts at once; `+` makes each partial string).
    message = "value " + phrase if instance_path == "" else f"'{instance_path[1:]}' {phrase}"
    item = _new_object(Violation)  # make_violation, inlined: this is the errors() hot path
    fields = item.__dict__  # item by item: update() with keywords first builds a dict of them
    fields["instance_path"] = instance_path
    fields["keyword_path"] = keyword_path
    fields["keyword"] = keyword
    fields["message"] = message
    out.append(item)


def violation_about(out: list, instance_path: str, keyword_path: str, keyword: str, field_path: str,
                    phrase: str) -> None:
    """Append a violation located at `instance_path` whose message names another field (e.g. a missing one)."""
    out.append(make_violation(instance_path, keyword_path, keyword, sentence(field_path, phrase)))


class Node:
    """One compiled subschema. `check`/`collect` are plain attributes, so callers bind them once."""

    __slots__ = (
        "check", "collect", "location", "base", "kws", "proves_json", "proof_depth", "scope_uri", "schema",
        "memo_number", "_props_fn", "_items_fn", "_state", "_dynamic", "_shaped", "__weakref__",
    )

    # Declared, not defined as methods: `finish` replaces them with the assembled closures.
    check: Callable[[Any], bool]
    collect: Callable[[Any, str, str, list], None]

    def __init__(self, schema: Any, base: str, location: str) -> None:
        self.schema = schema
        self.base = base
        self.location = location
        self.kws: List[Kw] = []
        self.proves_json = False
        self.proof_depth = 0
        self.scope_uri: Optional[str] = None
        self._props_fn: Optional[Callable[[Any], Any]] = None
        self._items_fn: Optional[Callable[[Any], Any]] = None
        self.memo_number: Optional[int] = None  # set when the compiler memoises this node (see _call_state)
        self._state: Any = None  # the Validator's CallState, when scopes are tracked or verdicts memoised
        self._dynamic = False
        self._shaped = False
        # Until compilation finishes (reference cycles), calls go through the node itself.
        self.check = self._pending_check
        self.collect = self._pending_collect

    def _pending_check(self, instance: Any) -> bool:
        return self.check(instance)

    def _pending_collect(self, instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        self.collect(instance, instance_path, keyword_path, out)

    # -- annotations, built on first use -------------------------------------------------------
    def evaluated_props(self, instance: Any):
        """Object members this (valid) subschema evaluated: a set of names, or ALL."""
        function = self._props_fn
        if function is None:
            function = self._props_fn = self._annotation("props", [kw.eval_props for kw in self.kws if kw.eval_props])
        return function(instance)

    def evaluated_items(self, instance: Any):
        """Array indexes this (valid) subschema evaluated: a set of indexes, or ALL."""
        function = self._items_fn
        if function is None:
            function = self._items_fn = self._annotation("items", [kw.eval_items for kw in self.kws if kw.eval_items])
        return function(instance)

    def _annotation(self, kind: str, functions: List[Callable[[Any], Any]]) -> Callable[[Any], Any]:
        function = union_of(functions)
        if self.scope_uri is not None:
            function = scoped_call(self._state, self.scope_uri, function)
        if self.memo_number is not None:
            function = memoised_annotation(self._state, self.memo_number, kind, function, dynamic=self._dynamic)
        return function

    # -- assembly ------------------------------------------------------------------------------
    def finish(self, kws: Sequence[Kw], *, state: Any = None, dynamic: bool = False,
               memo_number: Optional[int] = None) -> None:
        """Assemble check/collect from the compiled keywords (in schema order).

        `state` is the Validator's CallState when it tracks dynamic scope (`dynamic`) or memoises;
        `memo_number` (the node's key in the memo tables) makes this node check each value once per call.
        """
        self.kws = list(kws)
        self._state = state
        self._dynamic = dynamic
        check = assemble_check(self.kws)
        if self.scope_uri is None:
            from ._shapes import specialise

            shape = specialise(self.kws, check)
            if shape is not None:
                check, self.proves_json, self.proof_depth = shape
                self._shaped = True
        if memo_number is not None:  # it enters its resource itself, after the look-up
            self.memo_number = memo_number
            check = memoised_check(state, memo_number, check, dynamic=dynamic, entering=self.scope_uri)
        elif self.scope_uri is not None:
            check = scoped_call(state, self.scope_uri, check)
        self.check = check
        # Violations are only collected after a check failed, and most nodes of most schemas never
        # fail one: the collect closures are assembled on first use (callers look `collect` up per call).
        self.collect = self._collect_on_first_use

    def _collect_on_first_use(self, instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        if self.collect == self._collect_on_first_use:  # (equal: the same function bound to this node)
            self.collect = self._assembled_collect()  # two threads may both assemble it: either serves
        self.collect(instance, instance_path, keyword_path, out)

    def _assembled_collect(self) -> Callable[[Any, str, str, list], None]:
        collect = assemble_collect(self.kws)
        if self._shaped:  # `finish` fused its check: the collect of that shape too
            from ._shapes import specialise_collect

            collect = specialise_collect(self.kws, collect) or collect
        state = self._state
        if self.memo_number is not None:
            return memoised_collect(state, self.memo_number, self.check, collect, dynamic=self._dynamic,
                                    entering=self.scope_uri)
        if self.scope_uri is not None:
            return scoped_collect(state, self.scope_uri, collect)
        return collect

    def finish_boolean(self, value: bool) -> None:
        self.kws = []
        if value:
            self.check, self.collect = always_true, no_violations
        else:
            self.check, self.collect = always_false, _collect_false


def _collect_false(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
    violation(out, instance_path, keyword_path, "false", "is not allowed")


def union_of(functions: List[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """One annotation function returning the union of several (ALL wins, without asking the others)."""
    if not functions:
        return nothing_evaluated
    if everything_evaluated in functions:
        return everything_evaluated
    if len(functions) == 1:
        return functions[0]

    def union(instance: Any):
        result: set = set()
        for function in functions:
            part = function(instance)
            if part is ALL:
                return ALL
            result.update(part)
        return result

    return union


def scoped_call(state: Any, uri: str, function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Run `function` with schema resource `uri` entered in the thread's dynamic scope."""

    def in_scope(instance: Any):
        scopes = state.scopes
        outer = scopes[-1]
        inner = outer.entered.get(uri) or outer.enter(uri)
        if inner is outer:  # entering it changes nothing a reference could resolve to
            return function(instance)
        scopes.append(inner)
        try:
            return function(instance)
        finally:
            scopes.pop()

    return in_scope


def scoped_collect(state: Any, uri: str, collect: Callable[[Any, str, str, list], None]):
    def in_scope(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        scopes = state.scopes
        outer = scopes[-1]
        inner = outer.entered.get(uri) or outer.enter(uri)
        if inner is outer:
            collect(instance, instance_path, keyword_path, out)
            return
        scopes.append(inner)
        try:
            collect(instance, instance_path, keyword_path, out)
        finally:
            scopes.pop()

    return in_scope


def _checks_by_type(kws: Sequence[Kw]) -> Dict[type, Tuple[Callable[[Any], bool], ...]]:
    table = {}
    distinct: Dict[Tuple[Callable[[Any], bool], ...], Tuple[Callable[[Any], bool], ...]] = {}
    for py_type in PY_TYPES:
        applicable = [
            kw for kw in kws if (kw.types is None or py_type in kw.types) and kw.check is not always_true
        ]
        applicable.sort(key=lambda kw: kw.cost)  # cheap keywords first: fail fast
        checks = tuple(kw.check for kw in applicable)
        table[py_type] = distinct.setdefault(checks, checks)  # equal rows share one tuple
    return table


def assemble_check(kws: Sequence[Kw]) -> Callable[[Any], bool]:
    """One closure checking every keyword that applies to the instance's JSON type."""
    table = _checks_by_type(kws)
    distinct = set(table.values())
    if distinct == {()}:
        return always_true
    if len(distinct) == 1:
        return _all_of(next(iter(distinct)))
    get = table.get

    def check(instance: Any) -> bool:
        checks = get(type(instance))
        if checks is None:
            checks = get(base_py_type(instance))  # type: ignore[arg-type]
            if checks is None:
                return False
        for one in checks:
            if not one(instance):
                return False
        return True

    return check


def _all_of(checks: Tuple[Callable[[Any], bool], ...]) -> Callable[[Any], bool]:
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda instance: first(instance) and second(instance)

    def check(instance: Any) -> bool:
        for one in checks:
            if not one(instance):
                return False
        return True

    return check


def _collect_table(kws: Sequence[Kw]) -> Dict[type, Tuple[Any, ...]]:
    """Per Python type, (check or None, collect, keyword) of each keyword that applies, in schema order."""
    table = {}
    distinct: Dict[Tuple[Any, ...], Tuple[Any, ...]] = {}
    for py_type in PY_TYPES:
        row = tuple(
            (None if kw.self_checking else kw.check, kw.collect, kw.keyword) for kw in kws
            if (kw.types is None or py_type in kw.types) and kw.check is not always_true
            and py_type not in kw.passes_for
        )
        table[py_type] = distinct.setdefault(row, row)
    return table


def assemble_collect(kws: Sequence[Kw]) -> Callable[[Any, str, str, list], None]:
    """Collect violations keyword by keyword, in schema order (deterministic).

    Self-checking keywords (applicators, properties, required, ...) run their collect directly, which
    looks at each part once; simple assertions are checked first and described only when they fail.
    """
    kws = tuple(kws)
    tables: List[Dict[type, Tuple[Any, ...]]] = []  # built on the first failing value: most nodes never need it

    def collect(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        if not tables:
            tables.append(_collect_table(kws))  # two threads may both build it: equal tables, either serves
        get = tables[0].get
        applicable = get(type(instance))
        if applicable is None:
            applicable = get(base_py_type(instance), ())  # type: ignore[arg-type]
        for check, collect_keyword, keyword in applicable:
            if check is None:
                collect_keyword(instance, instance_path, keyword_path, out)
            elif not check(instance):
                before = len(out)
                collect_keyword(instance, instance_path, keyword_path, out)
                if len(out) == before:  # every failed check must say why, at least generically
                    violation(out, instance_path, pointer_join(keyword_path, keyword), keyword,
                              f"does not satisfy '{keyword}'")

    return collect
