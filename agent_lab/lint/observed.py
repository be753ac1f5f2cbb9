"""The check of the observed rules (AL8xx): none that a reading of a definition could make.

What a tool's calls do to a world is only seen by running them: tool-eval finds these rules' cases
(`agent_lab.lab.observed`) and reports them with these ids. The rules table lists them so that one table
names every finding agent-lab makes, and SARIF from `lint` and from tool-eval declares the same rules.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from .model import CatalogFacts, Hit

__all__ = ["found_by_tool_eval"]


def found_by_tool_eval(subject: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    """Nothing: the rule is observed during tool-eval's cases, never read from a definition."""
    return iter(())
