"""Close names for an unknown tool name, found through an index instead of a scan of every tool.

A model that misspells a tool gets ``tool_not_found`` with up to three close names. The answer is
difflib's: the names whose ``SequenceMatcher`` ratio with the asked name is at least 0.6, best first
(ties: the greater name first), exactly as ``difflib.get_close_matches`` ranks them. Scoring every
registered name costs about 12 us a name (116 ms at 10,000 tools); the index scores only a few.

How: every name is indexed by its trigrams, the runs of three characters of the name padded with two
start and two end marks (so ``ab`` has ``^^a``, ``^ab``, ``ab$``, ``b$$``). A query looks up its own
trigrams, keeps the names that share at least one and whose length allows a ratio of 0.6 at all
(``2 * min / (la + lb)`` bounds the ratio from above), takes the ``MAX_POOLED`` sharing the most,
ranks those by Dice coefficient (shared trigrams over the trigrams of both names) and scores the
``MAX_SCORED`` best by difflib's ratio (`_best_by_difflib`).

An index of at most ``MAX_SCORED`` names skips the trigrams and scores every name: its answer is
difflib's (and it keeps no trigrams: the names are indexed when one more arrives, a registry of a few
tools never pays for it). Where the answer of a larger index can differ from a full difflib scan, by construction:

* a name that shares no padded trigram with the asked one is never suggested. difflib could rate
  such a name 0.6 only through scattered single characters and pairs (``abc`` against ``a_b_c``);
* among more than ``MAX_SCORED`` names sharing trigrams, one that shares few could in principle rate
  higher than those scored; the tests compare the index with difflib at 10,000 tools.

Visibility: the caller says which names the asker may see (``visible``); the others are dropped
before any ranking, so a tool hidden from an actor never shapes, let alone appears in, its answer.

Threads: ``add`` takes the index's lock; readers take none. A name's postings are written before
the name is published (appended to ``_names``), and a reader ignores every id it cannot see there,
so a reader never meets a half-added name. Names are only ever added, like the registry's tools.
"""

from __future__ import annotations

import heapq
import threading
from typing import Callable, Dict, Iterator, List, Set, Tuple

__all__ = ["CUTOFF", "MAX_POOLED", "MAX_SCORED", "NameIndex"]

CUTOFF = 0.6
"""The least difflib ratio a close name needs (``difflib.get_close_matches``' default)."""

MAX_POOLED = 256
"""How many candidates sharing the most trigrams (visible to the asker, of a possible length) are
ranked by their Dice coefficient (shared trigrams over the trigrams of both names) per query."""

MAX_SCORED = 64
"""How many of those, the best by Dice coefficient, are scored with difflib per query."""

_PAD_START, _PAD_END = "\x02\x02", "\x03\x03"  # never in a tool name (TOOL_NAME_PATTERN)


def _trigrams(name: str) -> List[str]:
    padded = _PAD_START + name + _PAD_END
    return [padded[index:index + 3] for index in range(len(padded) - 2)]


class _Posting:
    """The ids of the names holding one trigram: a list (appended under the index's lock) and a bit
    set built from it on demand (bit i set: name i holds the trigram), brought up to date by readers.
    The pair (bits, how many ids it covers) is replaced as one tuple, so racing readers agree."""

    __slots__ = ("ids", "cached")

    def __init__(self) -> None:
        self.ids: List[int] = []
        self.cached: Tuple[int, int] = (0, 0)

    def bits(self) -> int:
        bits, covered = self.cached
        ids = self.ids
        total = len(ids)
        if covered < total:
            for identifier in ids[covered:total]:
                bits |= 1 << identifier
            self.cached = (bits, total)
        return bits


class NameIndex:
    """Tool names, indexed for ``close_names``. Add names with ``add``; ask with ``close_names``."""

    def __init__(self) -> None:
        self._names: List[str] = []  # id -> name; published last, so it says which ids are complete
        self._postings: Dict[str, _Posting] = {}  # trigram -> the names holding it
        self._known: Set[str] = set()
        self._longest = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._names)

    def add(self, name: str) -> None:
        """Index ``name`` (a name added twice is indexed once)."""
        with self._lock:
            if name in self._known:
                return
            identifier = len(self._names)
            if identifier >= MAX_SCORED:  # queries look names up by trigram once there are more than MAX_SCORED
                if identifier == MAX_SCORED:  # until now every query scored every name: index those first
                    for earlier, known in enumerate(self._names):
                        self._index(known, earlier)
                self._index(name, identifier)
            self._longest = max(self._longest, len(name))
            self._known.add(name)
            self._names.append(name)  # publish: from now on readers see the name

    def _index(self, name: str, identifier: int) -> None:
        for gram in set(_trigrams(name)):
            posting = self._postings.get(gram)
            if posting is None:
                posting = self._postings[gram] = _Posting()
            posting.ids.append(identifier)

    def close_names(self, word: str, visible: Callable[[str], bool], n: int = 3) -> List[str]:
        """Up to ``n`` names close to ``word`` among those ``visible`` says the asker may see, best first."""
        names = self._names
        published = len(names)
        size = len(word)
        if not size or size * 3 > self._longest * 7:  # ratio <= 2 * lb / (la + lb) < 0.6 for every name
            return []
        shortest, longest = size * 3 / 7, size * 7 / 3  # beyond these lengths no ratio reaches 0.6
        if published <= MAX_SCORED:  # as few names as one query scores anyway: score them all, as difflib does
            return _best_by_difflib(word, [name for name in names[:published]
                                           if shortest <= len(name) <= longest and visible(name)], n)
        word_grams = size + 2
        pool = []  # (-Dice coefficient of the trigram sets, name): the best first
        for identifier, shared in self._by_shared_trigrams(word, published):
            name = names[identifier]
            if shortest <= len(name) <= longest and visible(name):
                pool.append((-2 * shared / (word_grams + len(name) + 2), name))
                if len(pool) == MAX_POOLED:
                    break
        return _best_by_difflib(word, [name for _, name in heapq.nsmallest(MAX_SCORED, pool)], n)

    def _by_shared_trigrams(self, word: str, published: int) -> Iterator[Tuple[int, int]]:
        """(id, trigrams shared) of the published names sharing one with ``word``: most shared first,
        then by id.

        Counts are kept bit-sliced: ``planes[j]`` holds bit j of every name's count, and adding one
        trigram's bit set is a ripple-carry addition over the planes (a few big-integer operations, not
        one per name)."""
        planes: List[int] = []
        postings = self._postings
        for gram in set(_trigrams(word)):
            posting = postings.get(gram)
            if posting is None:
                continue
            carry = posting.bits()
            for plane_number, plane in enumerate(planes):
                planes[plane_number] = plane ^ carry
                carry &= plane
                if not carry:
                    break
            else:
                if carry:
                    planes.append(carry)
        everyone = (1 << published) - 1
        for count in range((1 << len(planes)) - 1, 0, -1):
            exactly = everyone
            for plane_number, plane in enumerate(planes):
                exactly &= plane if count >> plane_number & 1 else ~plane
                if not exactly:
                    break
            if exactly:
                digits = bin(exactly)  # "0b1..." : id i is the digit at len(digits) - 1 - i
                last = len(digits) - 1
                position = digits.rfind("1", 2)
                while position >= 2:
                    yield last - position, count
                    position = digits.rfind("1", 2, position)


def _best_by_difflib(word: str, candidates: List[str], n: int) -> List[str]:
    """``difflib.get_close_matches(word, candidates, n, CUTOFF)``, computed with the same arithmetic
    but cheaper steps: the length bound (``real_quick_ratio``), the shared-character bound
    (``quick_ratio``, as one C-level pass over the asked name's distinct characters) and the ratio
    itself (`_matched`), skipping a candidate once a bound falls below the n-th best ratio found so
    far (it could not enter the answer; a tie still could, the greater name winning, so only a
    lower bound skips). A name of 200 characters or more is asked of difflib itself: there its
    "popular character" heuristic (autojunk) changes the matching, which `_matched` does not copy."""
    if len(word) >= _AUTOJUNK_LENGTH:
        return _best_by_sequence_matcher(word, candidates, n)
    size = len(word)
    characters = list(set(word))
    counts = [word.count(character) for character in characters]
    best = _Best(n)
    for name in candidates:
        floor = best.floor()
        total = len(name) + size
        if 2.0 * min(len(name), size) / total < floor:
            continue
        if 2.0 * sum(map(min, map(name.count, characters), counts)) / total < floor:
            continue
        best.offer(2.0 * _matched(name, word) / total, name)  # difflib's own formula, so the same float
    return best.names()


class _Best:
    """The n best (ratio, name) offered so far, ranked as ``get_close_matches`` ranks them (a higher
    ratio first; of equal ratios, the greater name), in a min-heap whose top is the floor to beat."""

    __slots__ = ("_n", "_heap")

    def __init__(self, n: int) -> None:
        self._n = n
        self._heap: List[Tuple[float, str]] = []

    def floor(self) -> float:
        """The least ratio that can still enter: the n-th best so far, or CUTOFF until there are n."""
        return self._heap[0][0] if len(self._heap) == self._n else CUTOFF

    def offer(self, ratio: float, name: str) -> None:
        if ratio < self.floor():
            return
        if len(self._heap) < self._n:
            heapq.heappush(self._heap, (ratio, name))
        else:
            heapq.heappushpop(self._heap, (ratio, name))

    def names(self) -> List[str]:
        return [name for _, name in sorted(self._heap, reverse=True)]


_AUTOJUNK_LENGTH = 200
"""From this length of the second sequence on, difflib drops its most frequent characters from
matching (``autojunk``); below it, ``SequenceMatcher(None, a, b)`` matches every character."""


def _matched(first: str, second: str) -> int:
    """How many characters ``difflib.SequenceMatcher(None, first, second)`` matches (the sum of its
    matching blocks' sizes), for a ``second`` shorter than `_AUTOJUNK_LENGTH`.

    difflib takes the longest common run of the two ranges (the earliest in ``first``, then in
    ``second``, among runs of that length), then does the same left and right of it. With no junk
    and no popular characters its junk-extension steps change nothing, so the runs are exactly
    these. Each run is found with substring searches (C code) instead of difflib's per-character
    dictionaries: for each start in ``first``, only a run longer than the best so far is looked
    for, so a range costs about one search per character of ``first``."""
    total = 0
    find = second.find
    ranges = [(0, len(first), 0, len(second))]
    while ranges:
        low, high, second_low, second_high = ranges.pop()
        best = 0
        start = low
        at = low
        while at + best < high:
            if find(first[at:at + best + 1], second_low, second_high) >= 0:
                best += 1
                start = at
                while at + best < high and find(first[at:at + best + 1], second_low, second_high) >= 0:
                    best += 1
            at += 1
        if not best:
            continue
        total += best
        second_start = find(first[start:start + best], second_low, second_high)
        if low < start and second_low < second_start:
            ranges.append((low, start, second_low, second_start))
        if start + best < high and second_start + best < second_high:
            ranges.append((start + best, high, second_start + best, second_high))
    return total


def _best_by_sequence_matcher(word: str, candidates: List[str], n: int) -> List[str]:
    """The same answer through difflib's own SequenceMatcher (for a word `_matched` does not cover)."""
    import difflib  # a name of 200 characters or more asked of a registry: rare

    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)  # as get_close_matches: the asked name is seq2, each candidate seq1
    best = _Best(n)
    for name in candidates:
        floor = best.floor()
        matcher.set_seq1(name)
        if matcher.real_quick_ratio() >= floor and matcher.quick_ratio() >= floor:
            best.offer(matcher.ratio(), name)
    return best.names()
