"""Tool search for large catalogs: BM25 over each tool's name, description and input properties.

A model that sees a thousand tool definitions pays for all of them on every request and picks worse.
With search it sees a few tools plus `search_tools`, asks for what it needs in plain words, and gets
the best few definitions back. Standard library only, deterministic, offline.

- `Registry.search(query, actor=..., limit=5)` ranks the tools the actor may call (the same filter as
  `Registry.catalog(actor)`); statistics come from those tools only, so a hidden tool cannot even
  change the order of the visible ones. Ties keep registration order.
- `search_tool(registry)` builds the `search_tools` meta-tool: `registry.register(*search_tool(registry))`.
- Documents have four fields: the name's words (split at namespace separators, snake_case and
  camelCase), the title, the description, and each input property's name and description at any
  depth. Scoring is BM25F: a word's frequency in each field is normalised by that field's length
  against the catalog's average for the field, weighted (`FIELD_WEIGHTS`: the name counts three
  times, since it is the strongest signal), summed, then saturated once. So a long description no
  longer dilutes a match in the name, and a short one no longer wins ties by being short. Words are
  lowercased, stop words dropped and English inflections folded (`agent_lab.text.stem`).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from .text import STOP_WORDS, name_words, stem
from .schema.walk import schema_nodes
from .spec import ToolSpec

__all__ = [
    "BM25_B",
    "BM25_K1",
    "FIELD_WEIGHTS",
    "MAX_SEARCH_LIMIT",
    "SEARCH_TOOL_NAME",
    "SearchHit",
    "ToolIndex",
    "search_registry",
    "search_tool",
    "search_words",
]

BM25_K1 = 1.2
BM25_B = 0.75
FIELD_WEIGHTS: Mapping[str, float] = MappingProxyType({"name": 3.0, "title": 1.0, "description": 1.0,
                                                       "properties": 1.0})
"""How much a word found in each field counts (the name three times; before BM25F the same weights
were applied by repeating the name's words three times in one bag of words)."""
MAX_SEARCH_LIMIT = 50
MAX_QUERY_CHARS = 1_000
SEARCH_TOOL_NAME = "search_tools"
_CACHED_INDEXES = 16  # per registry: one index per distinct set of visible tools


def search_words(text: str) -> list[str]:
    """Lowercased, stemmed words without stop words; camelCase and snake_case split into words."""
    words = []
    for token in re.findall(r"[A-Za-z0-9_]+", text):
        for word in name_words(token):
            if word not in STOP_WORDS:
                words.append(stem(word))
    return words


def _fields(spec: ToolSpec) -> dict[str, list[str]]:
    """The words of each field of a tool's document (see the module docstring)."""
    properties: list[str] = []
    for pointer, node, via in schema_nodes(spec.input_schema, ""):
        if via == "properties":
            properties += search_words(pointer.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~"))
        if isinstance(node, Mapping) and isinstance(node.get("description"), str):
            properties += search_words(node["description"])
    return {"name": search_words(spec.name), "title": search_words(spec.title or ""),
            "description": search_words(spec.description), "properties": properties}


@dataclass(frozen=True)
class SearchHit:
    name: str
    score: float


class ToolIndex:
    """A BM25F index over a fixed list of specs, built once; `search` does no indexing work.

    Each posting holds a word's field-weighted, length-normalised frequency in one tool:
    sum over fields f of weight_f * tf_f / (1 - b + b * length_f / average_length_f). A query word
    scores idf * tf / (tf + k1) * (k1 + 1) (Robertson and Zaragoza's BM25F, one saturation per word)."""

    def __init__(self, specs: Sequence[ToolSpec], *, k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.names = [spec.name for spec in specs]
        self._k1 = k1
        documents = [{field: Counter(words) for field, words in _fields(spec).items()} for spec in specs]
        total = len(documents)
        averages = {field: (sum(sum(document[field].values()) for document in documents) / total if total else 0.0)
                    or 1.0 for field in FIELD_WEIGHTS}
        postings: dict[str, list[tuple[int, float]]] = {}
        for index, document in enumerate(documents):
            weighted: dict[str, float] = {}
            for field, weight in FIELD_WEIGHTS.items():
                counts = document[field]
                norm = 1 - b + b * sum(counts.values()) / averages[field]
                for word, count in counts.items():
                    weighted[word] = weighted.get(word, 0.0) + weight * count / norm
            for word, frequency in weighted.items():
                postings.setdefault(word, []).append((index, frequency))
        self._postings = postings
        self._idf = {word: math.log(1 + (total - len(hits) + 0.5) / (len(hits) + 0.5)) for word, hits in postings.items()}

    def search(self, query: str, *, limit: int = 5) -> list[SearchHit]:
        """The best `limit` tools for `query`, best first; tools sharing no word with it are left out."""
        scores: dict[int, float] = {}
        k1 = self._k1
        for word in set(search_words(query[:MAX_QUERY_CHARS])):
            idf = self._idf.get(word)
            if idf is None:
                continue
            for index, frequency in self._postings[word]:
                scores[index] = scores.get(index, 0.0) + idf * frequency * (k1 + 1) / (frequency + k1)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))  # ties: registration order
        return [SearchHit(self.names[index], round(score, 6)) for index, score in ranked[:limit]]


_indexes: "weakref.WeakKeyDictionary[Any, OrderedDict[tuple[str, ...], ToolIndex]]" = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def _index_for(registry: Any, specs: Sequence[ToolSpec]) -> ToolIndex:
    """The index over exactly these specs, cached per registry and set of visible tools (a registry
    only ever gains tools, so the names identify the specs)."""
    key = tuple(spec.name for spec in specs)
    with _indexes_lock:
        cache = _indexes.get(registry)
        if cache is None:
            cache = OrderedDict()
            _indexes[registry] = cache
        index = cache.get(key)
        if index is not None:
            cache.move_to_end(key)
            return index
    index = ToolIndex(specs)
    with _indexes_lock:
        cache[key] = index
        while len(cache) > _CACHED_INDEXES:
            cache.popitem(last=False)
    return index


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}")
    return limit


def search_registry(registry: Any, query: str, *, actor: Any = None, limit: int = 5) -> list[dict[str, Any]]:
    """`Registry.search`: the model-facing definitions (as in `catalog()`) of the best tools for `query`
    among those `actor` may call (all tools without an actor), best first."""
    if not isinstance(query, str):
        raise TypeError("query must be a string")
    limit = _check_limit(limit)
    specs = [registry.spec(name) for name in registry.names()]
    if actor is not None:
        specs = [spec for spec in specs if actor.may(spec.required_permission)]
    if not specs or not query.strip():
        return []
    by_name = {spec.name: spec for spec in specs}
    return [by_name[hit.name].model_schema() for hit in _index_for(registry, specs).search(query, limit=limit)]


# -- the search_tools meta-tool --------------------------------------------------------------------------

_FOUND_TOOL = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "input_schema": {"type": "object"},
    },
    "required": ["name", "description", "input_schema"],
    "additionalProperties": False,
}


def search_tool(registry: Any, *, name: str = SEARCH_TOOL_NAME, max_results: int = 10,
                exclude_self: bool = True) -> tuple[ToolSpec, Callable[..., Any]]:
    """(spec, handler) of a `search_tools` meta-tool over `registry`; register it with
    `registry.register(*search_tool(registry))`.

    The model sends what it wants to do in plain words and gets up to `limit` (default 5, at most
    `max_results`) matching tools: name, description and input schema, so it can call them next. The
    caller's actor decides what is found, exactly as `catalog(actor)` decides what is listed.
    """
    _check_limit(max_results)
    spec = ToolSpec(
        name=name,
        title="Search tools",
        description=(
            "Find tools for a task when none of the tools you already have fits. Describe what you want to do "
            f"in plain words (e.g. \"refund an order\"); the answer lists up to {max_results} matching tools, best "
            "first, with their input schemas, and you can call any of them next. Search again with other words "
            "if nothing fits."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                          "description": "What you want to do, in a few plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": max_results, "default": 5,
                          "description": f"How many tools to return at most (1-{max_results})."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"tools": {"type": "array", "items": _FOUND_TOOL, "maxItems": max_results}},
            "required": ["tools"],
            "additionalProperties": False,
        },
        timeout_ms=2_000,
    )

    def search_tools(arguments: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
        limit = int(arguments.get("limit", 5))
        found = search_registry(registry, arguments["query"], actor=ctx.actor, limit=min(limit + 1, MAX_SEARCH_LIMIT))
        tools = [{"name": tool["name"], "description": tool["description"], "input_schema": tool["input_schema"]}
                 for tool in found if not (exclude_self and tool["name"] == name)]
        return {"tools": tools[:limit]}

    return spec, search_tools

