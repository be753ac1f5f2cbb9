"""AL4xx: the runtime half of the contract, which only a linter that sees the ToolSpec can check."""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping, Optional, Sequence

from ..spec import DEFAULT_TIMEOUT_MS, ApprovalPolicy, Effect
from .model import CatalogFacts, Hit
from .walk import pointer_token, schema_nodes

__all__ = [
    "check_conditional_approval_undocumented",
    "check_destructive_without_approval",
    "check_no_output_schema",
    "check_open_world_timeout",
    "check_redacted_elsewhere",
    "check_write_without_key",
]


def check_write_without_key(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.effect is not Effect.READ and spec.idempotency_key is None:
        yield Hit(f"{spec.effect.value} tool without idempotency_key: a retried call may repeat its effect")


def check_destructive_without_approval(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.effect is Effect.DESTRUCTIVE and spec.approval is ApprovalPolicy.NEVER:
        yield Hit("destructive tool that never asks for approval")


def check_no_output_schema(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.output_schema is None:
        yield Hit("no output_schema: the registry cannot check what the handler returns (invalid_tool_output), "
                  "and the model is not told what it gets back")


def check_open_world_timeout(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.open_world and spec.timeout_ms == DEFAULT_TIMEOUT_MS:
        yield Hit(f"open-world tool (it reaches systems outside the application) left at the default timeout "
                  f"({DEFAULT_TIMEOUT_MS:g} ms): choose a timeout_ms from what the outside system can promise")


_APPROVAL_WORDS = re.compile(r"\bapprov|\bconfirm|\bsign[- ]?off\b", re.IGNORECASE)


def check_conditional_approval_undocumented(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.approval is ApprovalPolicy.CONDITIONAL and not _APPROVAL_WORDS.search(spec.description):
        yield Hit("approval is 'conditional' but the description never says which calls need a person's approval: "
                  "the model meets approval_required without warning", "/description")


def _property_pointers(schema: Any, root: str, field_name: str) -> Iterator[str]:
    token = f"/properties/{pointer_token(field_name)}"
    for pointer, _, via in schema_nodes(schema, root):
        if via == "properties" and pointer.endswith(token):
            yield pointer


def check_redacted_elsewhere(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    redacted_by: dict[str, list[str]] = {}
    for spec in specs:
        for field_name in spec.redact:
            redacted_by.setdefault(field_name, []).append(spec.name)
    for spec in specs:
        if spec.output_schema is None or not isinstance(spec.output_schema, Mapping):
            continue
        for field_name, owners in redacted_by.items():
            if field_name in spec.redact:
                continue
            for pointer in _property_pointers(spec.output_schema, "/output_schema", field_name):
                yield Hit(f"returns {field_name!r} unredacted, but {', '.join(repr(o) for o in owners)} redacts "
                          f"that field: the model reads here what the other tool hides (add it to redact)",
                          pointer, tool=spec.name)
