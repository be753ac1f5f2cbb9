"""What compiled subschemas apply to one another, read once a schema is compiled: the subschemas one
validation call could check more than once on the same value (to be memoised), and the reference
cycles that would loop forever without consuming any of the instance (refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Tuple

from ._nodes import Node
from .model import SchemaError

if TYPE_CHECKING:  # pragma: no cover
    from ._compiler import Compiler

__all__ = ["refuse_reference_cycles", "repeated_subschemas"]


def repeated_subschemas(compiler: Compiler, root: Node) -> FrozenSet[int]:
    """The subschemas (ids of their schema objects) that one call could otherwise check again and
    again on the same value, for a second compilation to memoise (see `_call_state`):

    - a subschema applied from two or more places (two `$ref`s to one definition, the root and a
      `$ref: "#"`) that leads to another such subschema, or back to itself: without a memo the
      repeats would multiply down the chain (2^depth through a recursive `anyOf`). Every reference
      cycle has one: the place where the recursion enters it is applied from two places;
    - a subschema applied in place below an `unevaluatedProperties` or `unevaluatedItems` (which
      asks it again for its annotations), and the `contains` subschemas there.

    Only what the root reaches counts, and only subschemas that apply others: a leaf checked again
    costs what a look-up would. A `$dynamicRef` applies every target it may land on (just the root
    resource's, when the root has the anchor: it is the outermost of every dynamic scope), a dynamic
    `$recursiveRef` every `$recursiveAnchor` resource. Most tool schemas have none, and pay nothing.
    """
    applied, in_place = _call_graph(compiler, root)
    calls_others = {key for key, children in applied.items() if children}
    reachable = {id(root): root}
    applications: Dict[int, int] = {id(root): 1}  # the call itself applies the root once
    callers: Dict[int, List[int]] = {}
    todo = [root]
    while todo:
        node = todo.pop()
        for child in applied.get(id(node), ()):
            applications[id(child)] = applications.get(id(child), 0) + 1
            callers.setdefault(id(child), []).append(id(node))
            if id(child) not in reachable:
                reachable[id(child)] = child
                todo.append(child)
    shared = {key for key, count in applications.items() if count >= 2 and key in calls_others}
    leads_to_shared: set = set()  # nodes with a path of one or more applications to a shared node
    pending = [caller for key in shared for caller in callers.get(key, ())]
    while pending:
        key = pending.pop()
        if key not in leads_to_shared:
            leads_to_shared.add(key)
            pending.extend(callers.get(key, ()))
    marked = shared & leads_to_shared

    seen: set = set()
    todo = [node for node in compiler.annotation_readers if id(node) in reachable]
    while todo:
        node = todo.pop()
        for child in compiler.rechecked.get(id(node), ()):
            if id(child) in calls_others:
                marked.add(id(child))
        for child in in_place.get(id(node), ()):
            if id(child) in calls_others:
                marked.add(id(child))
            if id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return frozenset(id(reachable[key].schema) for key in marked)

def _call_graph(compiler: Compiler, root: Node) -> Tuple[Dict[int, List[Node]], Dict[int, List[Node]]]:
    """Every application (node id -> nodes it applies), and those in place, dynamic references included."""
    applied: Dict[int, List[Node]] = {key: list(children) for key, children in compiler.applied.items()}
    in_place: Dict[int, List[Node]] = {key: list(children) for key, children in compiler.edges.items()}
    for site, name, initial in compiler.dynamic_sites:
        if name is None:
            targets = list(compiler.recursive_targets.values())
        elif root.scope_uri is not None and (root.scope_uri, name) in compiler.dynamic_targets:
            targets = [compiler.dynamic_targets[(root.scope_uri, name)]]
            applied[id(site)].remove(initial)  # it never lands on its initial target then
            in_place[id(site)].remove(initial)
        else:
            targets = [node for (_uri, anchor), node in compiler.dynamic_targets.items() if anchor == name]
        applied.setdefault(id(site), []).extend(targets)
        in_place.setdefault(id(site), []).extend(targets)
    return applied, in_place

def refuse_reference_cycles(nodes: Iterable[Node], edges: Dict[int, List[Node]]) -> None:
    """Refuse in-place cycles (a $ref chain back to itself without descending into the instance)."""
    state: Dict[int, int] = {}  # 1 = on the current path, 2 = finished
    for start in list(nodes):
        if state.get(id(start)) == 2:
            continue
        stack = [(start, iter(edges.get(id(start), ())))]
        path = [start]
        state[id(start)] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[id(node)] = 2
                continue
            mark = state.get(id(child))
            if mark == 1:
                loop = path[path.index(child):] + [child]
                shown = " -> ".join(item.location or "/" for item in loop)
                raise SchemaError(f"schema has a reference cycle that never consumes the instance: {shown}")
            if mark is None:
                state[id(child)] = 1
                path.append(child)
                stack.append((child, iter(edges.get(id(child), ()))))
