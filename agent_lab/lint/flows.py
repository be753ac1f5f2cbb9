"""AL7xx: toxic flows, tools that are each fine alone but leak or destroy together.

An agent that can read content an outsider wrote, read private data and send data out can be made,
by instructions hidden in that content, to send the private data out (AL701); one that can read such
content and run a destructive tool can be made to destroy (AL702). The linter finds these combinations
offline, from labels on each tool:

- `untrusted-content`: it returns what systems outside the application say (the web, a mailbox).
  Implied by an open-world tool (`open_world=True`; MCP's `openWorldHint`, true when absent).
- `private-data`: it returns the user's own data. Implied by a closed-world read-only tool whose name
  or description speaks of such data (files, repositories, databases, mail, memory, credentials, ...:
  `PRIVATE_DATA_WORDS`); a heuristic, so say it where it matters.
- `external-sink`: its arguments leave the application. Implied by an open-world tool that takes
  arguments (a GET carries its query out as well as a POST).
- `destructive`: implied by `effect="destructive"` (MCP: not read-only, `destructiveHint` true or absent).

Labels the user gives win: an import policy's labels on a server's tool (`labels = ["private-data"]` in
its entry, carried by the imported spec's `Provenance.labels`; or `ToolDefinition.labels`), then the
lint configuration's `labels` table (`{ "fetch*" = "untrusted-content", "get_time" = "-private-data" }`:
tool-name globs, labels to add, or to remove with a leading `-`). A sink or destructive tool that
always asks a person's approval (`approval="always"`) breaks the flow: the person sees each call. Linting several surfaces together (servers one agent uses at once) finds
flows across them; each finding names every tool involved.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from ..contract import FLOW_LABELS
from ..spec import ApprovalPolicy, Effect
from .model import CatalogFacts, Hit

__all__ = ["FLOW_LABELS", "PRIVATE_DATA_WORDS", "check_leak", "check_untrusted_destructive", "tool_labels"]

UNTRUSTED, PRIVATE, SINK, DESTRUCTIVE = FLOW_LABELS

PRIVATE_DATA_WORDS = frozenset("""
file files filesystem directory directories folder folders path repository repositories repo repos git commit
commits diff diffs branch branches database databases sql table tables row rows record records email emails
mail mailbox inbox chat chats contact contacts calendar note notes document documents memory memories graph
knowledge entity entities observation observations secret secrets credential credentials password passwords
token tokens env environment history log logs customer customers account accounts profile profiles personal
private ticket tickets order orders payment payments invoice invoices
""".split())
"""Words that mark a closed-world read tool as returning the user's own data (matched in its name and
description, whole words, any case)."""

_WORD = re.compile(r"[A-Za-z]+")
MAX_NAMED = 6


def _words(text: str) -> set[str]:
    words: set[str] = set()
    for word in _WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", text)):
        words.add(word.lower())
    return words


def _implied(spec: Any) -> set[str]:
    labels: set[str] = set()
    effect = getattr(spec, "effect", Effect.READ)
    open_world = bool(getattr(spec, "open_world", False))
    schema = spec.input_schema if isinstance(spec.input_schema, Mapping) else {}
    takes_arguments = bool(schema.get("properties")) or schema.get("additionalProperties") not in (None, False)
    if open_world:
        labels.add(UNTRUSTED)
        if takes_arguments or effect is not Effect.READ:
            labels.add(SINK)
    elif effect is Effect.READ and _words(f"{spec.name} {spec.description}") & PRIVATE_DATA_WORDS:
        labels.add(PRIVATE)
    if effect is Effect.DESTRUCTIVE:
        labels.add(DESTRUCTIVE)
    return labels


def _apply(labels: set[str], given: Sequence[str]) -> None:
    for label in given:
        if label.startswith("-"):
            labels.discard(label[1:])
        else:
            labels.add(label.lstrip("+"))


def _given(spec: Any) -> Sequence[str]:
    """The labels given to the tool itself: a definition's own (`ToolDefinition.labels`), or those the
    import policy gave a tool imported from a server (`Provenance.labels`)."""
    own = getattr(spec, "labels", None)
    if own is not None:
        return tuple(own)
    return tuple(getattr(getattr(spec, "provenance", None), "labels", ()))


def tool_labels(spec: Any, configured: Sequence[tuple[str, tuple[str, ...]]] = (),
                surface: Optional[str] = None) -> frozenset[str]:
    """The flow labels of a tool: implied, then its own (an import policy's), then the configuration's."""
    labels = _implied(spec)
    _apply(labels, _given(spec))
    qualified = f"{surface}/{spec.name}" if surface else spec.name
    for pattern, given in configured:
        if fnmatch.fnmatchcase(spec.name, pattern) or fnmatch.fnmatchcase(qualified, pattern):
            _apply(labels, given)
    return frozenset(labels)


@dataclass(frozen=True)
class _Tool:
    spec: Any
    surface: Optional[str]
    labels: frozenset[str]
    shown: str  # surface/tool when several surfaces are linted together, else the tool's name

    @property
    def gated(self) -> bool:
        """A person approves every call (approval="always"): nothing flows through it unseen."""
        return getattr(self.spec, "approval", ApprovalPolicy.NEVER) is ApprovalPolicy.ALWAYS


def _tools(specs: Sequence[Any], facts: CatalogFacts) -> list[_Tool]:
    configured = facts.options.get("labels", ())
    together = len({surface for surface in facts.surface_of}) > 1
    tools = []
    for index, spec in enumerate(specs):
        surface = facts.surface_of[index] if index < len(facts.surface_of) else None
        shown = f"{surface}/{spec.name}" if together and surface else spec.name
        tools.append(_Tool(spec, surface, tool_labels(spec, configured, surface), shown))
    return tools


def _named(tools: Sequence[_Tool]) -> str:
    names = [tool.shown for tool in tools]
    listed = ", ".join(repr(name) for name in names[:MAX_NAMED])
    return listed + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _related(sink: _Tool, *groups: Sequence[_Tool]) -> tuple[str, ...]:
    seen = [sink.shown]
    for group in groups:
        seen.extend(tool.shown for tool in group if tool.shown not in seen)
    return tuple(seen[1:])


def check_leak(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    tools = _tools(specs, facts)
    untrusted = [tool for tool in tools if UNTRUSTED in tool.labels]
    private = [tool for tool in tools if PRIVATE in tool.labels]
    if not untrusted or not private:
        return
    for sink in tools:
        if SINK not in sink.labels or sink.gated:
            continue
        yield Hit(f"toxic flow: {_named(untrusted)} return(s) untrusted content, {_named(private)} return(s) private "
                  f"data, and {sink.shown!r} sends its arguments out: instructions hidden in that content can make the "
                  f"model read the private data and send it out through {sink.shown!r}; require approval on the sink, "
                  f"or do not give one agent all three", "", tool=sink.spec.name, surface=sink.surface,
                  related=_related(sink, untrusted, private))


def check_untrusted_destructive(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    tools = _tools(specs, facts)
    untrusted = [tool for tool in tools if UNTRUSTED in tool.labels]
    if not untrusted:
        return
    for target in tools:
        if DESTRUCTIVE not in target.labels or target.gated:
            continue
        yield Hit(f"toxic flow: {_named(untrusted)} return(s) untrusted content and {target.shown!r} is destructive: "
                  f"instructions hidden in that content can make the model call {target.shown!r}; require approval "
                  f"on it, or keep it from agents that read untrusted content", "", tool=target.spec.name,
                  surface=target.surface, related=_related(target, untrusted))
