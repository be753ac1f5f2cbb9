"""The task set shipped for the built-in ticket lab (package data; `datasets/model-tasks.jsonl` in the
repository is the same file, and a test checks that they are identical)."""

from pathlib import Path

__all__ = ["SHIPPED_TASKS"]

SHIPPED_TASKS = Path(__file__).with_name("tasks") / "tickets.jsonl"
