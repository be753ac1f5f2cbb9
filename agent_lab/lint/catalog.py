"""AL5xx: the catalog as a whole, as one host receives it (size, count, overlap)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterator, Optional, Sequence

from ..adapters import ExportSchemaError
from ..catalog_cost import ESTIMATOR, host_catalog_cost
from .language import content_words
from .model import CatalogFacts, Hit

__all__ = ["check_catalog_tokens", "check_hard_tool_limit", "check_near_duplicates", "check_tool_budget",
           "description_similarity"]


def check_tool_budget(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    budget = facts.options["max_tools"][host]
    if len(specs) > budget:
        yield Hit(f"{len(specs)} tools in one catalog, more than the budget of {budget} for this host: selection "
                  f"accuracy drops as the list grows; split the surface or defer tools behind search_tools")


def check_hard_tool_limit(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    limit = facts.options["tool_limits"].get(host)
    if limit is not None and len(specs) > limit:
        yield Hit(f"{len(specs)} tools: the host accepts at most {limit} tools in one request, so the request "
                  f"fails; defer tools behind search_tools")


def _vector(text: str) -> Counter[str]:
    return Counter(content_words(text))


def description_similarity(first: str, second: str) -> float:
    """Cosine similarity of the content words of two descriptions (1.0: the same words, same counts)."""
    a, b = _vector(first), _vector(second)
    dot = sum(count * b[word] for word, count in a.items())
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return dot / norm if norm else 0.0


def check_near_duplicates(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    threshold = facts.options["near_duplicate_similarity"]
    vectors = [(spec.name, _vector(spec.description)) for spec in specs]
    norms = [math.sqrt(sum(c * c for c in vector.values())) for _, vector in vectors]
    for later in range(1, len(vectors)):
        name, vector = vectors[later]
        for earlier in range(later):
            if not norms[earlier] or not norms[later]:
                continue
            other = vectors[earlier][1]
            dot = sum(count * other[word] for word, count in vector.items())
            similarity = dot / (norms[earlier] * norms[later])
            if similarity >= threshold:
                yield Hit(f"description is {similarity:.0%} similar to that of {vectors[earlier][0]!r}: the model "
                          f"cannot tell when to use which; say what sets them apart", "/description", tool=name)
                break


def check_catalog_tokens(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    budget = facts.options["max_catalog_tokens"]
    try:
        cost = host_catalog_cost(specs, str(host))
    except ExportSchemaError:  # a schema with no form the host takes: AL307 and AL001 say so, not this rule
        return
    if cost.total_tokens > budget:
        yield Hit(f"the catalog costs about {cost.total_tokens} tokens ({cost.total_bytes} bytes, estimator "
                  f"{ESTIMATOR}) on every request, more than the budget of {budget}; defer tools behind "
                  f"search_tools or trim descriptions")
