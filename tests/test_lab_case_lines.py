"""Any case line the loader accepts replays without a traceback; a value the replay cannot use is FILE:LINE, exit 2.

A seeded generator walks `case_schema.json` and writes a few hundred schema-valid case lines, biased
towards what breaks replays: empty and odd strings, integers of thousands of digits, huge floats,
references to other calls, approvals built from other parts, markers in odd places, world options.
Each line runs through the real command line against the files lab (and a sample against the ticket
lab); each must end as a gate verdict (0 or 1) or as bad input whose every stderr line is FILE:LINE.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import tempfile
import unittest
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

from agent_lab.cli import main
from agent_lab.lab import replay
from agent_lab.lab import load_lab
from agent_lab.lab.cases import CaseFileError, case_schema, load_cases
from agent_lab.schema import Validator

REPO = Path(__file__).resolve().parent.parent
FILES_LAB = f"{REPO / 'tests' / 'labs' / 'files_lab.py'}:lab"
TICKET_LAB = "agent_lab.lab.tickets:lab"
SEED = 20260101
FILES_LINES = 300
TICKET_LINES = 60
BATCH = 10  # accepted lines per case file (one file's report run covers ten lines)

FILES_NAMES = ["files-naive-v1", "files-typed-v2", "files-typed-v3", "baseline", "candidate", "files-typed-v9"]
TICKET_NAMES = ["wide-tool-v1", "typed-registry-v2", "baseline", "candidate"]
FILES_TOOLS = ["read_file", "write_file", "delete_file", "stat_file", "", "no_such_tool"]
TICKET_TOOLS = ["get_ticket", "record_ticket_followup", "issue_ticket_credit", "ticket_operation", "", "get_tiket"]
PATHS = ["/acme/readme.txt", "/acme/plan.txt", "/globex/notes.txt", "/acme/new.txt"]


class CaseLineGenerator:
    """Schema-valid case lines from `case_schema.json`, one random walk per line."""

    def __init__(self, seed: int, *, surfaces: list[str], tools: list[str]) -> None:
        self.random = random.Random(seed)
        self.schema = case_schema()
        self.surfaces = surfaces
        self.tools = tools

    def line(self, number: int) -> dict[str, Any]:
        case = self.value(self.schema, "")
        case["case_id"] = f"case-{number}"
        if self.random.random() < 0.8:  # most lines are made coherent, so they reach the replay
            self.make_coherent(case)
        return case

    def make_coherent(self, case: dict[str, Any]) -> None:
        """Keep the line schema-valid but give it what the loader asks beyond the schema: surfaces the
        lab has, references and waits that can be met, and an expectation that can fail."""
        valid = [name for name in self.surfaces if name not in ("baseline", "candidate") and not name.endswith("9")]
        if isinstance(case["calls"], dict):
            chosen = self.random.sample(valid, self.random.randint(1, len(valid)))
            steps = list(case["calls"].values())
            case["calls"] = {name: steps[index % len(steps)] for index, name in enumerate(chosen)}
        for steps in ([case["calls"]] if isinstance(case["calls"], list) else case["calls"].values()):
            answered: list[int] = []  # calls whose answer exists by the current step
            pending: list[int] = []  # background calls not settled yet
            calls = 0
            for index, step in enumerate(steps):
                if step.get("do") == "await_write_started" and not pending:
                    steps[index] = step = {"do": "settle"}
                if step.get("do") in ("settle", "restart"):
                    answered += pending
                    pending = []
                if "arguments" in step:
                    step["arguments"] = self.references(step["arguments"], answered)
                    (pending if step.get("background") else answered).append(calls)
                    calls += 1
            if not any("tool" in step for step in steps):
                steps.append({"tool": self.random.choice(self.tools), "arguments": {}})
        case["world"] = self.random.choice([{}, {"write_delay_ms": 5, "slow_writes": 1}]) if "world" in case else {}
        expected = {key: value for key, value in case["expected"].items()
                    if key not in ("steps", "same_output", "same_error") and key not in self.surfaces}
        outcome = self.random.choice(["succeeded", "rejected", "failed", "unknown"])
        expected["outcome"] = outcome
        expected["error_code"] = None if outcome == "succeeded" else self.random.choice(["not_found", "tool_timeout"])
        case["expected"] = expected

    def references(self, value: Any, answered: list[int]) -> Any:
        """`value` with each `$from_call` object naming an answered call (plain data when there is none)."""
        if isinstance(value, dict):
            if "$from_call" in value:
                if not answered:
                    return "replaced"
                return {"$from_call": self.random.choice(answered),
                        "pointer": self.random.choice(["", "/output", "/output/path", "/error/code", "/x/~1y"])}
            return {key: self.references(item, answered) for key, item in value.items()}
        if isinstance(value, list):
            return [self.references(item, answered) for item in value]
        return value


    # -- the walk ----------------------------------------------------------------------------------

    def value(self, schema: Any, where: str) -> Any:
        if schema is True:
            return self.any_json(3)
        if "$ref" in schema:
            return self.value(self.resolve(schema["$ref"]), where)
        special = self.special(where)
        if special is not None:
            return special()
        if "if" in schema:
            return self.conditional(schema, where)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.random.choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = self.random.choice(kind)
        if kind == "object" or (kind is None and "properties" in schema):
            return self.object(schema, where)
        if kind == "array":
            return self.array(schema, where)
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.random.random() < 0.5
        if kind == "null":
            return None
        return self.any_json(2)

    def resolve(self, reference: str) -> Any:
        node = self.schema
        for part in reference.lstrip("#/").split("/"):
            node = node[part]
        return node

    def conditional(self, schema: dict[str, Any], where: str) -> Any:
        if where.endswith("/calls"):  # if array: one list for all, else keyed by surface
            if self.random.random() < 0.5:
                return self.value(schema["then"], where)
            return self.value(schema["else"], where)
        if where.endswith("/approval"):
            return self.value(schema["then"], where) if self.random.random() < 0.6 else True
        # a step: a marker now and then, else a call
        branch = "then" if self.random.random() < 0.25 else "else"
        return self.value(schema[branch], where)

    def object(self, schema: dict[str, Any], where: str) -> dict[str, Any]:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        result: dict[str, Any] = {}
        for name, child in properties.items():
            if name in required or self.random.random() < 0.35:
                result[name] = self.value(child, f"{where}/{name}")
        extra = schema.get("additionalProperties", True)
        if isinstance(extra, dict) and self.random.random() < 0.6:
            for _ in range(self.random.randint(1, 3)):
                result[self.random.choice(self.surfaces)] = self.value(extra, f"{where}/*")
        minimum = schema.get("minProperties", 0)
        maximum = schema.get("maxProperties")
        if maximum is not None and len(result) > maximum:  # a check: path plus exactly one operation
            keep = ["path"] + [key for key in result if key != "path"][: maximum - 1]
            result = {key: result[key] for key in keep}
        while len(result) < minimum:
            missing = [name for name in properties if name not in result]
            if missing:
                name = self.random.choice(missing)
                result[name] = self.value(properties[name], f"{where}/{name}")
            else:
                result[self.random.choice(self.surfaces)] = self.value(extra, f"{where}/*")
        return result

    def array(self, schema: dict[str, Any], where: str) -> list[Any]:
        low = schema.get("minItems", 0)
        high = min(schema.get("maxItems", low + 4), low + 5)
        items = [self.value(schema.get("items", True), f"{where}/[]") for _ in range(self.random.randint(low, high))]
        if schema.get("uniqueItems"):
            unique: list[Any] = []
            for item in items:
                if json.dumps(item, sort_keys=True) not in {json.dumps(kept, sort_keys=True) for kept in unique}:
                    unique.append(item)
            items = unique
        return items

    def string(self, schema: dict[str, Any]) -> str:
        low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
        alphabet = "abcXYZ019 -_/.:é中\u2028\"\\\x00\x1f😀"
        text = "".join(self.random.choice(alphabet) for _ in range(self.random.randint(low, min(high, 24))))
        if len(text) < low:
            text += "x" * (low - len(text))
        return text[:high]

    def integer(self, schema: dict[str, Any]) -> int:
        low = schema.get("minimum", -(10 ** 6))
        high = schema.get("maximum", 10 ** 6)
        if self.random.random() < 0.1 and "maximum" not in schema:
            return int("9" * self.random.choice([30, 4250]))
        return self.random.randint(low, high)

    def number(self, schema: dict[str, Any]) -> float:
        choice = self.random.choice([0.5, 1.0, 300.0, 1e9, 1.7e308, 5e-324, 86400.25])
        if "exclusiveMinimum" in schema and choice <= schema["exclusiveMinimum"]:
            choice = 1.0
        return choice

    def any_json(self, depth: int) -> Any:
        roll = self.random.random()
        if depth <= 0 or roll < 0.35:
            return self.random.choice([None, True, False, 0, -1, 1.5, 1e308, -0.0, int("7" * 4250), "", "x",
                                       "\ud83d\ude00", "shr-0000", 2 ** 64, self.random.choice(PATHS)])
        if roll < 0.45:
            return {"$from_call": self.random.choice([0, 1, 2, -1, 99, "0", True]),
                    "pointer": self.random.choice(["", "/output/path", "/error/code", "output", 5])}
        if roll < 0.75:
            keys = ["path", "content", "request_id", "ticket_id", "note", "action_id", "", "$from_call"]
            return {self.random.choice(keys): self.any_json(depth - 1) for _ in range(self.random.randint(0, 4))}
        return [self.any_json(depth - 1) for _ in range(self.random.randint(0, 3))]

    def special(self, where: str) -> Any:
        """Values a schema walk alone would almost never hit: the lab's own names and shapes."""
        if where.endswith("/tool"):
            return lambda: self.random.choice(self.tools)
        if where.endswith("/calls/*") or where.endswith("/expected/*"):
            return None
        if where == "/world":
            return lambda: self.random.choice([{}, {"write_delay_ms": self.random.choice([0, 5, 20]),
                                                    "slow_writes": self.random.choice([0, 1, 3])},
                                               {"lookup_delay_ms": 5}, {"unknown": 1}])
        if where.endswith("/arguments") and self.random.random() < 0.6:
            return lambda: {"path": self.random.choice(PATHS), "content": "x", "request_id": "req-" + "0" * 8,
                            "ticket_id": "T-1001", "note": "n", "action_id": "act-00000001"}
        if where.endswith("/path") and "/checks" in where:
            return lambda: self.random.choice(["", "/output", "/output/path", "/error/code", "/nope/0"])
        return None


class CaseLinesNeverCrashTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.validator = Validator(case_schema())
        patch = mock.patch.object(replay, "WAIT_LIMIT_S", 0.05)  # generated steps wait for writes that never start
        patch.start()
        self.addCleanup(patch.stop)

    def run_cli(self, lab: str, path: Path, *, lines: int) -> int:
        """tool-eval on one file: a gate verdict, or exit 2 with every problem at FILE:LINE of the file."""
        out, err = io.StringIO(), io.StringIO()
        # stderr must hold the command's problems only: a ResourceWarning for an object an earlier test left
        # (a retired tools' event loop, collected whenever the collector runs) is not one of them
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            code = main(["tool-eval", "--lab", lab, "--cases", str(path), "--out", str(self.dir / "out")])
        problems = err.getvalue().splitlines()
        self.assertIn(code, (0, 1, 2), err.getvalue())
        if code == 2:
            self.assertTrue(problems, "exit 2 without a message")
            for problem in problems:
                self.assertRegex(problem, rf"^{re.escape(str(path))}:([1-9][0-9]*): \S")
                self.assertLessEqual(int(problem[len(str(path)) + 1:].split(":", 1)[0]), lines)
        else:
            self.assertEqual(problems, [])
        return code

    def check_lines(self, reference: str, generator: CaseLineGenerator, count: int) -> dict[str, int]:
        """Every generated line on its own through the loader; the accepted ones through the real command
        line, ten to a file (a file refused during its replay is run again line by line)."""
        lab = load_lab(reference)
        outcomes = {"replayed": 0, "refused": 0}
        accepted: list[str] = []
        made = 0
        while made < count:
            case = generator.line(made)
            if not self.validator.is_valid(case):  # the walk is not perfect; only schema-valid lines count
                continue
            made += 1
            text = json.dumps(case)
            path = self.dir / f"line-{made}.jsonl"
            path.write_text(text + "\n", encoding="utf-8")
            try:
                load_cases([str(path)], lab=lab)
            except CaseFileError:
                with self.subTest(line=text[:500]):
                    self.assertEqual(self.run_cli(reference, path, lines=1), 2)
                outcomes["refused"] += 1
                continue
            accepted.append(text)
        for start in range(0, len(accepted), BATCH):
            batch = accepted[start:start + BATCH]
            path = self.dir / f"batch-{start}.jsonl"
            path.write_text("".join(text + "\n" for text in batch), encoding="utf-8")
            with self.subTest(batch=start):
                if self.run_cli(reference, path, lines=len(batch)) != 2:
                    outcomes["replayed"] += len(batch)
                    continue
            for number, text in enumerate(batch):
                path = self.dir / f"batch-{start}-{number}.jsonl"
                path.write_text(text + "\n", encoding="utf-8")
                with self.subTest(line=text[:500]):
                    outcomes["refused" if self.run_cli(reference, path, lines=1) == 2 else "replayed"] += 1
        return outcomes

    def test_every_schema_valid_line_replays_or_is_refused_as_file_line_on_the_files_lab(self) -> None:
        generator = CaseLineGenerator(SEED, surfaces=FILES_NAMES, tools=FILES_TOOLS)
        outcomes = self.check_lines(FILES_LAB, generator, FILES_LINES)
        self.assertGreater(outcomes["replayed"], FILES_LINES // 5, outcomes)  # the walk reaches the replay often
        self.assertGreater(outcomes["refused"], 0, outcomes)

    def test_every_schema_valid_line_replays_or_is_refused_as_file_line_on_the_ticket_lab(self) -> None:
        generator = CaseLineGenerator(SEED + 1, surfaces=TICKET_NAMES, tools=TICKET_TOOLS)
        outcomes = self.check_lines(TICKET_LAB, generator, TICKET_LINES)
        self.assertGreater(outcomes["replayed"], 0, outcomes)


class ValuesTheReplayCannotUseTest(unittest.TestCase):
    """The three lines of the adversarial review: once a traceback and exit 1, now FILE:LINE and exit 2."""

    WRITE = {"tool": "record_ticket_followup",
             "arguments": {"ticket_id": "T-1001", "note": "Called back.", "action_id": "act-00000001"}}

    def run_line(self, step: dict[str, Any]) -> tuple[int, str, str]:
        case = {"case_id": "odd", "intent": "An odd value.", "actor": {"id": "a", "tenant": "acme",
                                                                      "permissions": ["tickets:write"]},
                "calls": {"candidate": [step], "baseline": [{"tool": "ticket_operation", "arguments": {}}]},
                "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1}}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "odd.jsonl"
            path.write_text(json.dumps(case) + "\n", encoding="utf-8")
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["tool-eval", "--lab", TICKET_LAB, "--cases", str(path), "--out", str(Path(tmp) / "out")])
            return code, err.getvalue().replace(str(path), "FILE"), out.getvalue()

    def test_an_approval_for_an_empty_tenant_or_tool(self) -> None:
        for part in ("tenant", "tool"):
            with self.subTest(part=part):
                code, stderr, stdout = self.run_line({**self.WRITE, "approval": {part: ""}})
                self.assertEqual((code, stdout), (2, ""))
                self.assertEqual(stderr, f"FILE:1: 'calls/candidate/0/approval/{part}' must be at least 1 character long\n")

    def test_an_approved_argument_too_wide_to_fingerprint(self) -> None:
        step = {**self.WRITE, "arguments": {**self.WRITE["arguments"], "note": int("9" * 4250)}, "approval": True}
        code, stderr, stdout = self.run_line(step)
        self.assertEqual((code, stdout), (2, ""))
        self.assertTrue(stderr.startswith("FILE:1: 'calls/candidate/0/approval' cannot be replayed: "), stderr)
        self.assertEqual(len(stderr.splitlines()), 1)

    def test_a_number_too_large_for_a_float_is_refused_when_read(self) -> None:
        code, stderr, _ = self.run_line({**self.WRITE, "approval": {"ttl_s": "TTL"}})
        self.assertEqual(code, 2)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "huge.jsonl"
            path.write_text('{"case_id": 1e400}\n', encoding="utf-8")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(["tool-eval", "--cases", str(path), "--out", str(Path(tmp) / "out")])
        self.assertEqual((code, err.getvalue()), (2, f"{path}:1: a number too large to read\n"))


if __name__ == "__main__":
    unittest.main()
