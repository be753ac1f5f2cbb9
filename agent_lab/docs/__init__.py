"""The reference, shipped with the package: one Markdown file per concern in this folder.

`agent-lab docs` lists the topics and `agent-lab docs TOPIC` prints one, so an installed copy answers
the same questions as the repository's README links do. Topics are found by listing the folder, not
from a table here: a topic file added by anyone is in the index as soon as it is in the folder.
Each file opens with `# Title` and a one-line summary on the next non-empty line, which the list shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DOCS_DIR", "Topic", "UnknownTopic", "read_topic", "topics"]

DOCS_DIR = Path(__file__).resolve().parent
"""Where the topic files live (package data: `agent_lab/docs/*.md`)."""


class UnknownTopic(LookupError):
    """A topic name that no file in the folder has; the message lists the names that exist."""


@dataclass(frozen=True)
class Topic:
    """One reference file: its name (the file name without `.md`), title and one-line summary."""

    name: str
    title: str
    summary: str
    path: Path


def _describe(path: Path) -> Topic:
    title, summary = path.stem, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text:
            continue
        if text.startswith("# ") and title == path.stem:
            title = text[2:].strip()
            continue
        summary = text.lstrip("> ").strip()
        break
    return Topic(name=path.stem, title=title, summary=summary, path=path)


def topics() -> list[Topic]:
    """Every topic in the folder, sorted by name."""
    return [_describe(path) for path in sorted(DOCS_DIR.glob("*.md"), key=lambda path: path.stem)]


def read_topic(name: str) -> str:
    """The text of one topic. A name that is not a plain topic name (a path, `..`) is unknown too."""
    known = {topic.name: topic for topic in topics()}
    topic = known.get(name.removesuffix(".md"))
    if topic is None:
        raise UnknownTopic(f"docs: no topic {name!r}; the topics are: {', '.join(sorted(known))}")
    return topic.path.read_text(encoding="utf-8")
