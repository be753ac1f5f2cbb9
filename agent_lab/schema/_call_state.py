"""What one validation call remembers: the dynamic scope and the verdicts of shared subschemas.

Why memoise: a subschema that several places apply to the same value (two `anyOf` branches that
both `$ref` one definition, a reference cycle, an `unevaluatedProperties` that asks its siblings'
branches again which of them passed) would otherwise be checked once per path that reaches it, and a
recursive schema has 2^depth such paths through an instance whose nesting a model chooses. The
compiler marks those subschemas (see `_graph.repeated_subschemas`); each marked node checks a value
at most once per call, so the work of a call is bounded by (marked nodes x values in the instance)
plus the unmarked tree between them, whatever the instance.

The memo belongs to one top-level call (`Validator.is_valid`, `Validator.errors`) on one thread: it
is keyed by `id()` of the instance's values, which is only meaningful while they are alive and
unchanged, so each value is held until the call ends and every table is emptied then. A verdict
does not depend on where a value sits in the instance, so a value that appears twice (a Python
caller may alias one dict) shares its verdict; violations do depend on it, so `errors` reports a
marked subschema once per instance location, not once per path into it.

Dynamic scope (`$dynamicRef`, `$recursiveRef`) is a `Scope`: an interned record of what the
resources entered so far decide (for each dynamic anchor name the outermost target, for
`$recursiveRef` the target of the innermost run of `"$recursiveAnchor": true` resources). Entering
a resource moves to another `Scope` (cached), resolving a reference reads one field, and a verdict is
memoised per (subschema, value, scope): the scope is exactly the part of the call stack a verdict can
depend on, and there are finitely many, whatever the instance.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

Check = Callable[[Any], bool]
Collect = Callable[[Any, str, str, list], None]


class Scope:
    """One dynamic-scope state (see the module docstring). Interned per `ScopeTable`: compare by identity."""

    __slots__ = ("dynamic", "recursive", "entered", "_table")

    def __init__(self, table: "ScopeTable", dynamic: Dict[str, Any], recursive: Any) -> None:
        self.dynamic = dynamic  # anchor name -> the node a `$dynamicRef` to it lands on (outermost wins)
        self.recursive = recursive  # the node a dynamic `$recursiveRef` lands on, or None
        self._table = table
        self.entered: Dict[str, "Scope"] = {}  # uri -> the scope after entering it (callers look here first)

    def enter(self, uri: str) -> "Scope":
        """The scope after entering schema resource `uri` (computed once, then read from `entered`)."""
        following = self.entered.get(uri)
        if following is None:
            following = self.entered[uri] = self._table.after(self, uri)
        return following


class ScopeTable:
    """The targets dynamic references may land on, and the interned `Scope`s built from them."""

    def __init__(self, dynamic_targets: Dict[Tuple[str, str], Any], recursive_targets: Dict[str, Any]) -> None:
        self._dynamic_targets = dynamic_targets  # (resource URI, anchor name) -> node; filled by the compiler
        self._recursive_targets = recursive_targets  # resource URI -> node, for `"$recursiveAnchor": true`
        self._interned: Dict[Tuple[Any, ...], Scope] = {}
        self.outermost = self._intern({}, None)

    def after(self, scope: Scope, uri: str) -> Scope:
        dynamic = dict(scope.dynamic)
        for (resource, name), node in self._dynamic_targets.items():
            if resource == uri and name not in dynamic:
                dynamic[name] = node
        anchored = self._recursive_targets.get(uri)
        if anchored is None:
            recursive = None  # a resource without the anchor ends the run
        else:
            recursive = scope.recursive if scope.recursive is not None else anchored
        return self._intern(dynamic, recursive)

    def _intern(self, dynamic: Dict[str, Any], recursive: Any) -> Scope:
        key = (tuple(sorted((name, id(node)) for name, node in dynamic.items())), id(recursive))
        scope = self._interned.get(key)
        if scope is None:
            scope = self._interned.setdefault(key, Scope(self, dynamic, recursive))
        return scope


class CallState(threading.local):
    """Per thread, per Validator: the memo tables and dynamic scope of the call under way."""

    def __init__(self, outermost: Optional[Scope]) -> None:
        self.scopes: List[Any] = [outermost]  # the dynamic scope (Scopes), innermost last; [None] untracked
        self.verdicts: Dict[Tuple[Any, ...], bool] = {}
        self.annotations: Dict[Tuple[Any, ...], Any] = {}
        self.reported: set = set()
        self.alive: list = []  # every value a memo key names by id(), held until the call ends

    def end(self) -> None:
        """Forget the call: ids of values the caller may now free must not outlive it."""
        self.verdicts.clear()
        self.annotations.clear()
        self.reported.clear()
        self.alive.clear()
        del self.scopes[1:]  # already so, unless the call was cut short


def memoised_check(state: CallState, number: int, check: Check, *, dynamic: bool,
                   entering: Optional[str] = None) -> Check:
    """`check`, run at most once per value (and dynamic scope) in one call.

    `entering` is the URI of the schema resource the node is the root of, when scopes are tracked:
    the node enters it around `check` (done here rather than by a wrapper, one frame less per level
    of a deep instance)."""
    if entering is not None:
        uri = entering

        def check_once_entering(instance: Any) -> bool:
            scopes = state.scopes
            outer = scopes[-1]
            table = state.verdicts
            key = (number, id(instance), outer)
            verdict = table.get(key)
            if verdict is None:
                inner = outer.entered.get(uri) or outer.enter(uri)
                if inner is outer:
                    verdict = check(instance)
                else:
                    scopes.append(inner)
                    try:
                        verdict = check(instance)
                    finally:
                        scopes.pop()
                table[key] = verdict
                state.alive.append(instance)
            return verdict

        return check_once_entering

    if dynamic:
        def check_once_in_scope(instance: Any) -> bool:
            table = state.verdicts  # looked up per call: each thread has its own tables
            key = (number, id(instance), state.scopes[-1])
            verdict = table.get(key)
            if verdict is None:
                verdict = table[key] = check(instance)
                state.alive.append(instance)
            return verdict

        return check_once_in_scope

    def check_once(instance: Any) -> bool:
        table = state.verdicts
        key = (number, id(instance))
        verdict = table.get(key)
        if verdict is None:
            verdict = table[key] = check(instance)
            state.alive.append(instance)
        return verdict

    return check_once


def memoised_collect(state: CallState, number: int, check_once: Check, collect: Collect, *,
                     dynamic: bool, entering: Optional[str] = None) -> Collect:
    """`collect` for a memoised node: nothing for a value it accepts, and the violations at one
    instance location once, under the first keyword path that reached it (`entering` as for checks)."""
    if entering is not None:
        uri = entering

        def collect_once_entering(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
            if check_once(instance):
                return
            scopes = state.scopes
            outer = scopes[-1]
            key = (number, id(instance), instance_path, outer)
            reported = state.reported
            if key in reported:
                return
            reported.add(key)
            inner = outer.entered.get(uri) or outer.enter(uri)
            if inner is outer:
                collect(instance, instance_path, keyword_path, out)
                return
            scopes.append(inner)
            try:
                collect(instance, instance_path, keyword_path, out)
            finally:
                scopes.pop()

        return collect_once_entering

    def collect_once(instance: Any, instance_path: str, keyword_path: str, out: list) -> None:
        if check_once(instance):
            return
        key = (number, id(instance), instance_path, state.scopes[-1]) if dynamic else (number, id(instance), instance_path)
        reported = state.reported
        if key in reported:
            return
        reported.add(key)
        collect(instance, instance_path, keyword_path, out)

    return collect_once


def memoised_annotation(state: CallState, number: int, kind: str, function: Callable[[Any], Any], *,
                        dynamic: bool) -> Callable[[Any], Any]:
    """An annotation function (`evaluated_props` / `evaluated_items`) computed once per value and scope.

    The result (a set or ALL) is shared between callers, who only ever read it."""

    def annotate_once(instance: Any) -> Any:
        table = state.annotations
        key = (number, kind, id(instance), state.scopes[-1]) if dynamic else (number, kind, id(instance))
        result = table.get(key)
        if result is None:
            result = table[key] = function(instance)
            state.alive.append(instance)
        return result

    return annotate_once
