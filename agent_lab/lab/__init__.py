"""The contract lab: a domain-free engine that replays cases on a lab's tool surfaces and gates on them.

A team describes its own lab as a value: `Lab(name, world, surfaces, effects, secrets, ...)` with one
`Surface(name, build)` per tool surface (see `definition`). `run_tool_eval` (the `tool-eval` command)
loads the cases, replays each on every surface against a fresh world, grades the results, and writes
the reports; `lab_test_case` turns the same cases into unittest tests. The ticket lab,
`agent_lab.lab.tickets:lab`, is the demo and reference lab, and the default when none is configured.
"""

from __future__ import annotations

from .definition import Lab, LabError, Surface
from .journal import Journal
from .loader import load_lab, load_registry
from .testing import lab_test_case
from .tool_eval import Evaluation, evaluate, run_tool_eval

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
    "run_tool_eval",
]
