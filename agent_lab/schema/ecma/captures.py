"""Which backreferences read a capture that ECMA-262 and Python's ``re`` keep differently.

ECMA resets the captures inside a quantified atom at the start of each of its iterations, and
rejects an iteration past the minimum that matches empty; ``re`` keeps the last capture a group
made, in any iteration, and accepts one empty iteration. A backreference reads the difference:
``^(?:(a)|b){2}\\1$`` is true on ``"ab"`` in ECMA (the second iteration reset the group, so ``\\1``
is empty) and false on ``re`` (``\\1`` is still ``a``). So the parser refuses such a reference
as unsupported, and keeps the references for which both engines see the same capture.

A reference to group G reads the same value in both when, for every repetition R whose count
may exceed one and that holds G (a repetition of at most one iteration has no earlier iteration
to remember; forward references and references inside their own group already match empty):

* the reference is inside R too, and every way through R's body to the reference captures G
  first, in the same iteration (``(?:(["'])x\\1)+``: both read this iteration's quote); it is
  enough to ask this of the innermost such R, the other ones hold that iteration whole; or
* the reference is outside R, every iteration of R captures G, and no iteration can match empty
  (``(a)+\\1``: both read the last iteration's capture).

An optional part (``?``) that holds G inside a lookaround must not match empty either, when the
reference is outside it: ECMA drops an empty iteration, with the text a lookahead captured in it
(``^(?:(?=(b)))?\\1`` on ``"b"``: empty in ECMA, ``b`` on ``re``); elsewhere a group captures the empty
string in an empty iteration, which a reference matches as it matches an unset group.

And a lookaround keeps the first way its body matches, with its captures: when the reference is
outside a lookaround that holds G, nothing in it may repeat a body that can match empty beyond its
minimum, where the engines try the ways in another order (``^(?=((?:|b)*))\\1$`` on ``"b"``: ECMA
drops the empty iteration and captures ``b``; re stops after it with the empty string).

Everything else is refused, not approximated: the rule is sound (an accepted reference reads the
same capture in both), not complete (a refused pattern may have no string that tells them apart).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Tuple

from .tree import Alternation, Backreference, CharSet, Concatenation, Group, Lookaround, RegexNode, Repeat, children

__all__ = ["reset_sensitive_reference"]

_Path = Tuple[Tuple[RegexNode, int], ...]
"""From the root down: each ancestor, and the index of the child the path goes on through."""


def _repeats(node: RegexNode) -> bool:
    """Whether `node` is a repetition that may run its body more than once."""
    return isinstance(node, Repeat) and (node.high is None or node.high > 1)


class _Captures:
    """What a subtree is sure to capture, and whether it can match empty (memoized per node)."""

    def __init__(self) -> None:
        self._sure: Dict[int, FrozenSet[int]] = {}
        self._first: Dict[int, Dict[int, int]] = {}
        self._empty: Dict[int, bool] = {}
        self._loops: Dict[int, bool] = {}

    def sure(self, node: RegexNode) -> FrozenSet[int]:
        """The groups every match of `node` captures (a negative lookaround's captures do not last)."""
        found = self._sure.get(id(node))
        if found is not None:
            return found
        result: FrozenSet[int] = frozenset()
        if isinstance(node, Concatenation):
            result = result.union(*(self.sure(item) for item in node.items))
        elif isinstance(node, Alternation):
            branches = [self.sure(item) for item in node.alternatives]
            result = branches[0].intersection(*branches[1:])
        elif isinstance(node, Group):
            result = self.sure(node.item)
            if node.number is not None:
                result = result | {node.number}
        elif isinstance(node, Repeat):
            if node.low >= 1:
                result = self.sure(node.item)
        elif isinstance(node, Lookaround) and not node.negated:
            result = self.sure(node.item)
        self._sure[id(node)] = result
        return result

    def can_match_empty(self, node: RegexNode) -> bool:
        """Whether `node` may match the empty string (a backreference and a lookaround may)."""
        found = self._empty.get(id(node))
        if found is not None:
            return found
        if isinstance(node, Concatenation):
            result = all(self.can_match_empty(item) for item in node.items)
        elif isinstance(node, Alternation):
            result = any(self.can_match_empty(item) for item in node.alternatives)
        elif isinstance(node, Group):
            result = self.can_match_empty(node.item)
        elif isinstance(node, Repeat):
            result = node.low == 0 or self.can_match_empty(node.item)
        else:
            result = not isinstance(node, CharSet)
        self._empty[id(node)] = result
        return result

    def loops_on_empty(self, node: RegexNode) -> bool:
        """Whether `node` holds a repetition with optional iterations that may match empty (where the
        engines part: ECMA drops such an iteration and tries the body's other ways, re keeps it)."""
        found = self._loops.get(id(node))
        if found is not None:
            return found
        result = isinstance(node, Repeat) and (node.high is None or node.high > node.low) \
            and self.can_match_empty(node.item)
        if not result:
            result = any(self.loops_on_empty(child) for child in children(node))
        self._loops[id(node)] = result
        return result

    def first_sure(self, concatenation: Concatenation, group: int) -> Optional[int]:
        """The index of the first item of `concatenation` sure to capture `group`, or None."""
        table = self._first.get(id(concatenation))
        if table is None:
            table = self._first[id(concatenation)] = {}
            for index, item in enumerate(concatenation.items):
                for number in self.sure(item):
                    table.setdefault(number, index)
        return table.get(group)

    def captured_before(self, path: _Path, group: int) -> bool:
        """Whether every way along `path` (ending at a reference) captures `group` before it."""
        for node, index in path:
            if isinstance(node, Concatenation):
                first = self.first_sure(node, group)
                if first is not None and first < index:
                    return True
        return False


_INNER = (Concatenation, Alternation, Repeat, Group, Lookaround, Backreference)
"""The nodes a path goes through or ends at (the other leaves hold no group and no reference)."""


def _paths(root: RegexNode) -> Tuple[Dict[int, _Path], List[Tuple[Backreference, _Path]]]:
    """The path to every capturing group (by number) and to every reference that reads one."""
    groups: Dict[int, _Path] = {}
    references: List[Tuple[Backreference, _Path]] = []
    stack: List[Tuple[RegexNode, _Path]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Backreference):
            if node.number is not None:
                references.append((node, path))
            continue
        if isinstance(node, Group) and node.number is not None:
            groups[node.number] = path
        for index, child in enumerate(children(node)):
            if isinstance(child, _INNER):
                stack.append((child, path + ((node, index),)))
    return groups, references


def reset_sensitive_reference(root: RegexNode) -> Optional[int]:
    """The number of the first group a reference of `root` reads differently in ECMA and in
    Python's ``re`` (see the module docstring), or None when every reference reads the same.

    The work for references that share their parent (``\\1\\1\\1...``) is done once, so the cost
    stays linear in the pattern's length times its nesting depth."""
    groups, references = _paths(root)
    captures = _Captures()
    by_parent: Dict[Tuple[int, int], Tuple[bool, Optional[Concatenation]]] = {}
    for reference, reference_path in references:
        number = reference.number
        group_path = groups.get(number) if number is not None else None
        if number is None or group_path is None or not reference_path:
            continue
        parent, index = reference_path[-1]
        key = (number, id(parent))
        known = by_parent.get(key)
        if known is None:
            known = by_parent[key] = _verdict_above(captures, number, group_path, reference_path)
        reads_alike, last_step = known
        if not reads_alike and not (last_step is not None and _before(captures, last_step, number, index)):
            return number
    return None


def _before(captures: _Captures, concatenation: Concatenation, number: int, index: int) -> bool:
    first = captures.first_sure(concatenation, number)
    return first is not None and first < index


def _verdict_above(captures: _Captures, number: int, group_path: _Path,
                   reference_path: _Path) -> Tuple[bool, Optional[Concatenation]]:
    """(True, None) when every reference to `number` under the parent `reference_path` ends at reads
    alike; (False, concatenation) when one does if that parent concatenation captures the group
    before it; (False, None) when none does."""
    shared = 0  # how many ancestors the group and the references have in common
    while (shared < len(group_path) and shared < len(reference_path)
           and group_path[shared][0] is reference_path[shared][0]):
        shared += 1
    lookaround = max((depth for depth, (node, _index) in enumerate(group_path) if isinstance(node, Lookaround)),
                     default=-1)  # the deepest lookaround that holds the group
    for depth in range(shared, len(group_path)):
        node = group_path[depth][0]
        if isinstance(node, Lookaround):
            if not node.negated and captures.loops_on_empty(node.item):
                return False, None  # (?=((?:|b)*))\1: a lookaround keeps the first way it finds
            continue
        if not isinstance(node, Repeat):
            continue
        if _repeats(node):
            if number not in captures.sure(node.item) or captures.can_match_empty(node.item):
                return False, None
        elif node.low == 0 and depth < lookaround and captures.can_match_empty(node.item):
            return False, None  # (?:(?=(a)))?\1: ECMA drops the empty iteration and what it captured
    innermost = next((depth for depth in range(shared - 1, -1, -1) if _repeats(group_path[depth][0])), None)
    if innermost is None or captures.captured_before(reference_path[innermost + 1:-1], number):
        return True, None
    parent = reference_path[-1][0]
    if len(reference_path) - 1 > innermost and isinstance(parent, Concatenation):
        return False, parent
    return False, None
