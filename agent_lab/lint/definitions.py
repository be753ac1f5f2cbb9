"""AL001: a tool definition that is not a valid MCP Tool (what a server sent, kept as far as it could be).

Only definitions read from a server can be malformed: a ToolSpec refuses such input when it is built.
`agent_lab.contract.ToolDefinition.from_mcp` lists what is wrong; this rule reports it.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from .model import CatalogFacts, Hit

__all__ = ["check_malformed_definition"]


def check_malformed_definition(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, problem in getattr(spec, "problems", ()):
        yield Hit(f"malformed definition: {problem}; hosts may refuse the tool or read it differently from "
                  f"what a reviewer sees", pointer)
