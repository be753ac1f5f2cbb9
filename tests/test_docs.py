"""The reference cannot drift from the code: every public keyword and CLI flag is documented in a topic,
every example in the README and the topics runs, every command example parses, and the README stays short.

The topic files are read from the folder (agent_lab/docs/*.md), so a topic added later is covered too."""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shlex
import subprocess
import sys
import unittest
from pathlib import Path

from agent_lab import Registry, ToolSpec
from agent_lab.cli import build_parser
from agent_lab.docs import DOCS_DIR, UnknownTopic, read_topic, topics
from agent_lab.lab import Lab, Surface

REPO = Path(__file__).resolve().parent.parent
README_LINES_AT_MOST = 300
CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.DOTALL)
EXAMPLE = re.compile(r"<!-- example -->\s*```python\n(.*?)```", re.DOTALL)
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def topic_texts() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS_DIR.glob("*.md"))}


def keywords(function) -> set[str]:
    """The parameter names a caller can pass by keyword (self, *args, **kwargs and positional-only left out)."""
    return {name for name, parameter in inspect.signature(function).parameters.items()
            if name != "self" and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)}


def public_keywords() -> dict[str, set[str]]:
    found = {"ToolSpec": keywords(ToolSpec), "Registry": keywords(Registry.__init__), "Lab": keywords(Lab),
             "Surface": keywords(Surface)}
    for name, member in inspect.getmembers(Registry, inspect.isfunction):
        if not name.startswith("_"):
            found[f"Registry.{name}"] = keywords(member)
    return found


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def cli_flags() -> dict[str, set[str]]:
    """Every long option of every subcommand, read from the real parser (bench parses its own)."""
    found = {}
    for name, command in subcommands(build_parser()).items():
        flags = {option for action in command._actions for option in action.option_strings
                 if option.startswith("--") and option != "--help"}
        found[name] = flags
    # `bench` parses its own options inside agent_lab.bench.main: read them from its add_argument calls.
    bench_source = (REPO / "agent_lab" / "bench" / "__init__.py").read_text(encoding="utf-8")
    found["bench"] = set(re.findall(r"add_argument\(\s*\"(--[a-z][a-z0-9-]*)\"", bench_source))
    return found


def is_documented(name: str, spans: set[str], code: str) -> bool:
    """Documented: a code span that is the name itself (`lease_s`), the name given a value in code
    (`Registry(lease_s=...)`), or the name among the parameters of a call shown in code
    (`resource_guard(arguments, actor)`)."""
    return (name in spans or re.search(rf"\b{name}\s*=", code) is not None
            or re.search(rf"\([^()]*\b{name}\b[^()]*\)", code) is not None)


def undocumented(texts: dict[str, str]) -> list[str]:
    pieces = [(block, span) for text in texts.values() for block, span in CODE.findall(text)]
    spans = {span.strip() for _, span in pieces if span}
    code = "\n".join(block or span for block, span in pieces)
    flags = set(re.findall(r"--[a-z][a-z0-9-]*", code))
    missing = [f"{owner}({name}=)" for owner, names in public_keywords().items() for name in sorted(names)
               if not is_documented(name, spans, code)]
    missing += [f"{command} {flag}" for command, names in cli_flags().items() for flag in sorted(names)
                if flag not in flags]
    return missing


class EveryPublicNameIsDocumentedTest(unittest.TestCase):
    def test_every_keyword_of_the_public_classes_and_every_cli_flag_is_in_a_topic(self) -> None:
        self.assertEqual(undocumented(topic_texts()), [])

    def test_a_name_left_out_of_the_topics_is_reported(self) -> None:
        texts = {name: text.replace("single_use_approval", "single-use approval") for name, text in
                 topic_texts().items()}
        self.assertIn("ToolSpec(single_use_approval=)", undocumented(texts))


class DocsCommandTest(unittest.TestCase):
    def run_docs(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "run_lab.py", "docs", *argv], cwd=REPO, capture_output=True,
                              text=True, timeout=60)

    def test_without_a_topic_it_lists_every_topic_file_with_its_summary(self) -> None:
        done = self.run_docs()
        self.assertEqual(done.returncode, 0, done.stderr)
        listed = [line.split()[0] for line in done.stdout.splitlines()]
        self.assertEqual(listed, sorted(path.stem for path in DOCS_DIR.glob("*.md")))
        for topic in topics():
            self.assertTrue(topic.summary and not topic.summary.startswith(("#", "```", "|", "<!--")), topic.name)

    def test_a_topic_prints_its_file(self) -> None:
        done = self.run_docs("specs")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, (DOCS_DIR / "specs.md").read_text(encoding="utf-8"))

    def test_an_unknown_topic_is_bad_input_naming_the_topics(self) -> None:
        for name in ("nope", "../README", "specs/../../x"):
            with self.subTest(name=name):
                done = self.run_docs(name)
                self.assertEqual(done.returncode, 2)
                self.assertIn("no topic", done.stderr)
                self.assertIn("specs", done.stderr)
                self.assertNotIn("Traceback", done.stderr)
        with self.assertRaises(UnknownTopic):
            read_topic("nope")


class ExamplesRunTest(unittest.TestCase):
    def test_every_python_example_of_the_topics_runs(self) -> None:
        ran = 0
        for name, text in topic_texts().items():
            for number, code in enumerate(EXAMPLE.findall(text)):
                with self.subTest(topic=name, example=number):
                    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                          timeout=60)
                    self.assertEqual(done.returncode, 0, done.stderr)
                    ran += 1
        self.assertGreater(ran, 5)


def command_lines(text: str) -> list[str]:
    """`python run_lab.py ...`, `python -m agent_lab ...` and `agent-lab ...` lines of sh/yaml blocks."""
    found = []
    for language, block in FENCE.findall(text):
        if language not in ("sh", "yaml", "bash", ""):
            continue
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip().removeprefix("- run:").strip()
            line = re.sub(r"\$\{\{[^}]*\}\}", "1", line)  # a CI template value: ${{ matrix.shard }}
            for prefix in ("python run_lab.py ", "python -m agent_lab ", "agent-lab "):
                if line.startswith(prefix):
                    found.append(line[len(prefix):])
    return found


def parses(argv: list[str]) -> bool:
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")
    try:
        build_parser().parse_args(argv)
        return True
    except SystemExit:
        return False
    finally:
        sys.stderr.close()
        sys.stderr = stderr


class CommandExamplesParseTest(unittest.TestCase):
    """Every command line shown parses with the real parser. Lines written as synopses ([--x], A|B, ...)
    are read for their flags only: each must be an option of that subcommand."""

    def test_every_command_example_names_a_subcommand_and_flags_it_has(self) -> None:
        texts = {"README.md": (REPO / "README.md").read_text(encoding="utf-8"), **topic_texts()}
        commands, flags = subcommands(build_parser()), cli_flags()
        checked = 0
        for name, text in texts.items():
            for line in command_lines(text):
                with self.subTest(file=name, line=line):
                    words = line.split()
                    self.assertIn(words[0], commands)
                    if "[" in line or "|" in line or "..." in line or "<" in line:
                        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line):
                            self.assertIn(flag, flags[words[0]])
                    elif words[0] != "bench":
                        self.assertTrue(parses(shlex.split(line)), f"{line!r} does not parse")
                    checked += 1
        self.assertGreater(checked, 20)


def anchor(heading: str) -> str:
    """A heading's anchor as forges render it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower()).replace(" ", "-")


class TopicLinksTest(unittest.TestCase):
    def test_every_link_between_topics_reaches_a_file_and_a_heading(self) -> None:
        texts = topic_texts()
        headings = {name: {anchor(line) for line in re.sub(r"```.*?```", "", text, flags=re.DOTALL).splitlines()
                           if re.match(r"#{1,6} ", line)} for name, text in texts.items()}
        for name, text in texts.items():
            for target, fragment in re.findall(r"\]\(([\w.-]+\.md)?(?:#([\w-]+))?\)", text):
                with self.subTest(topic=name, link=f"{target}#{fragment}"):
                    target = target or name
                    self.assertIn(target, texts)
                    if fragment:
                        self.assertIn(fragment, headings[target])


class ReadmeIsTheFrontDoorTest(unittest.TestCase):
    def test_the_readme_is_at_most_about_300_lines_and_links_every_topic(self) -> None:
        readme = (REPO / "README.md").read_text(encoding="utf-8")
        self.assertLessEqual(len(readme.splitlines()), README_LINES_AT_MOST)
        for topic in topics():
            self.assertIn(f"(agent_lab/docs/{topic.name}.md)", readme)


if __name__ == "__main__":
    unittest.main()
