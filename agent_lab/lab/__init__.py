"""The contract lab: a domain-free engine that replays cases on a lab's tool surfaces and gates on them.

A team describes its own lab as a value: `Lab(name, world, surfaces, effects, secrets, ...)` with one
`Surface(name, build)` per tool surface (see `definition`). `run_tool_eval` (the `tool-eval` command)
loads the cases, replays each on every surface against a fresh world, grades the results, and writes
the reports (`merge_tool_eval`: one report from the shards of a run split over machines); `lab_test_case` turns the same cases into unittest tests. The ticket lab,
`agent_lab.lab.tickets:lab`, is the demo and reference lab, and the default when none is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # at run time each name is imported on first use (PEP 562): `tool-eval` never loads unittest
    from .definition import Lab, LabError, Surface
    from .journal import Journal
    from .loader import load_lab, load_registry
    from .testing import lab_test_case
    from .tool_eval import Evaluation, evaluate, merge_tool_eval, run_tool_eval

_EXPORTS = {
    "Lab": "definition",
    "LabError": "definition",
    "Surface": "definition",
    "Journal": "journal",
    "load_lab": "loader",
    "load_registry": "loader",
    "lab_test_case": "testing",
    "Evaluation": "tool_eval",
    "evaluate": "tool_eval",
    "merge_tool_eval": "tool_eval",
    "run_tool_eval": "tool_eval",
}

__all__ = [
    "Evaluation",
    "Journal",
    "Lab",
    "LabError",
    "Surface",
    "evaluate",
    "lab_test_case",
    "load_lab",
    "load_registry",
    "merge_tool_eval",
    "run_tool_eval",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
