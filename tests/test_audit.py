"""Audit sinks: one record shape, one JSON line per record, never a serialisation error."""

import json
import os
import tempfile
import threading
import unittest

from agent_lab.audit import (
    AUDIT_FIELDS,
    AUDIT_STEPS,
    MAX_AUDIT_DEPTH,
    AuditSink,
    JsonlAuditSink,
    MemoryAuditSink,
    audit_record,
    read_audit_file,
)
from agent_lab.errors import Outcome


def sample_record(**overrides):
    fields = dict(
        call_id="call-1", tool="get_ticket", actor_id="u1", tenant="acme", fingerprint="sha256:ab",
        step="record", outcome=Outcome.SUCCEEDED, error_code=None, duration_ms=1.5, replayed=False,
        approval_id=None,
    )
    fields.update(overrides)
    return audit_record(**fields)


class AuditRecordTest(unittest.TestCase):
    def test_fields_are_the_documented_ones(self):
        self.assertEqual(
            AUDIT_FIELDS,
            ("call_id", "tool", "actor_id", "tenant", "fingerprint", "step", "outcome", "error_code",
             "duration_ms", "replayed", "approval_id", "receipt", "attempt"),
        )
        self.assertEqual(AUDIT_STEPS[0], "route")
        self.assertEqual(AUDIT_STEPS[-1], "record")

    def test_missing_fields_are_filled_with_none(self):
        record = audit_record(tool="t", step="route", outcome="rejected", error_code="tool_not_found")
        self.assertEqual(list(record), list(AUDIT_FIELDS))
        self.assertIsNone(record["call_id"])
        self.assertIsNone(record["approval_id"])
        self.assertEqual(record["error_code"], "tool_not_found")

    def test_unknown_field_names_are_refused(self):
        with self.assertRaises(TypeError) as caught:
            audit_record(tool="t", arguments={"secret": "x"})
        self.assertIn("arguments", str(caught.exception))

    def test_enum_values_become_plain_strings(self):
        record = sample_record(outcome=Outcome.UNKNOWN)
        self.assertEqual(record["outcome"], "unknown")
        self.assertIs(type(record["outcome"]), str)


class JsonlAuditSinkTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.path = os.path.join(self.directory.name, "audit.jsonl")

    def test_is_an_audit_sink(self):
        self.assertIsInstance(JsonlAuditSink(self.path), AuditSink)
        self.assertIsInstance(MemoryAuditSink(), AuditSink)

    def test_each_record_is_one_compact_sorted_json_line(self):
        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(call_id="c1"))
            sink.write(sample_record(call_id="c2", tool="créer_ticket"))
        with open(self.path, encoding="utf-8") as file:
            lines = file.read().split("\n")
        self.assertEqual(lines[-1], "")
        self.assertEqual(len(lines), 3)
        first = json.loads(lines[0])
        self.assertEqual(lines[0], json.dumps(first, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
        self.assertEqual(first["call_id"], "c1")
        self.assertIn("créer_ticket", lines[1])  # non-ASCII written as itself

    def test_file_is_not_created_until_the_first_write(self):
        sink = JsonlAuditSink(self.path)
        self.assertFalse(os.path.exists(self.path))
        sink.write(sample_record())
        self.assertTrue(os.path.exists(self.path))
        sink.close()

    def test_each_write_is_readable_before_close(self):
        sink = JsonlAuditSink(self.path)
        self.addCleanup(sink.close)
        sink.write(sample_record(call_id="c1"))
        self.assertEqual([r["call_id"] for r in read_audit_file(self.path)], ["c1"])

    def test_records_are_appended_to_an_existing_file(self):
        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(call_id="first-run"))
        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(call_id="second-run"))
        self.assertEqual([r["call_id"] for r in read_audit_file(self.path)], ["first-run", "second-run"])

    def test_close_is_idempotent_and_writing_after_close_is_refused(self):
        sink = JsonlAuditSink(self.path)
        sink.write(sample_record())
        sink.close()
        sink.close()
        with self.assertRaises(ValueError):
            sink.write(sample_record())

    def test_non_json_values_become_type_placeholders_instead_of_errors(self):
        class Opaque:
            pass

        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(call_id=b"bytes", fingerprint=Opaque(), duration_ms=float("nan"),
                                     approval_id={1: {2, 3}, (4,): "x"}))
        (record,) = read_audit_file(self.path)
        self.assertEqual(record["call_id"], "<non-JSON: bytes>")
        self.assertEqual(record["fingerprint"], "<non-JSON: Opaque>")
        self.assertEqual(record["duration_ms"], "<non-finite number>")
        self.assertEqual(record["approval_id"], {"1": "<non-JSON: set>", "<non-JSON: tuple>": "x"})

    def test_deeply_nested_or_cyclic_values_are_cut_instead_of_raising(self):
        loop = []
        loop.append(loop)
        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(approval_id=loop))
        (record,) = read_audit_file(self.path)
        value, levels = record, 1  # the record is the first level
        value = value["approval_id"]
        while isinstance(value, list):
            value, levels = value[0], levels + 1
        self.assertEqual(value, "<nested too deep>")
        self.assertEqual(levels, MAX_AUDIT_DEPTH)

    def test_characters_that_split_lines_stay_inside_their_line(self):
        tricky = "a\nb\u2028c\u2029d\x85e\rf\ud800g"
        with JsonlAuditSink(self.path) as sink:
            sink.write(sample_record(call_id=tricky))
            sink.write(sample_record(call_id="next"))
        with open(self.path, "rb") as file:
            data = file.read()
        self.assertEqual(data.count(b"\n"), 2)
        self.assertEqual(len(data.decode("utf-8").splitlines()), 2)
        self.assertEqual([r["call_id"] for r in read_audit_file(self.path)], [tricky, "next"])

    def test_concurrent_writers_never_interleave_lines(self):
        sink = JsonlAuditSink(self.path)
        self.addCleanup(sink.close)
        padding = "x" * 3000

        def write_many(worker):
            for index in range(50):
                sink.write(sample_record(call_id=f"{worker}-{index}", tool=padding))

        threads = [threading.Thread(target=write_many, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        records = read_audit_file(self.path)
        self.assertEqual(len(records), 400)
        self.assertEqual(len({r["call_id"] for r in records}), 400)

    def test_records_that_are_not_mappings_are_refused(self):
        with JsonlAuditSink(self.path) as sink, self.assertRaises(TypeError):
            sink.write(["not", "a", "record"])  # type: ignore[arg-type]


class RegistryAuditShapeTest(unittest.TestCase):
    """The registry writes one record per invoke, in exactly the documented shape."""

    def test_registry_writes_one_record_per_invoke_with_every_audit_field(self):
        from agent_lab.calls import ToolCall
        from agent_lab.policy import Actor
        from agent_lab.registry import STEPS, Registry
        from agent_lab.spec import ToolSpec

        self.assertEqual(AUDIT_STEPS, STEPS)
        sink = MemoryAuditSink()
        spec = ToolSpec(name="echo", description="Echo a word.", input_schema={
            "type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})
        actor = Actor(id="u1", tenant="acme")
        with Registry(audit=sink) as registry:
            registry.register(spec, lambda arguments: {"word": arguments["word"]})
            registry.invoke(ToolCall("echo", {"word": "hi"}, call_id="c-ok"), actor=actor)
            registry.invoke(ToolCall("echo", {"word": 3}, call_id="c-bad"), actor=actor)
            registry.invoke(ToolCall("nope", {}, call_id="c-missing"), actor=actor)
        self.assertEqual(len(sink.records), 3)
        for record in sink.records:
            self.assertEqual(sorted(record), sorted(AUDIT_FIELDS))
            self.assertIn(record["step"], AUDIT_STEPS)
        ok, bad, missing = sink.records
        self.assertEqual(
            (ok["call_id"], ok["outcome"], ok["error_code"], ok["step"]), ("c-ok", "succeeded", None, "record")
        )
        self.assertEqual((bad["outcome"], bad["error_code"], bad["step"]), ("rejected", "invalid_arguments", "schema"))
        self.assertEqual((missing["error_code"], missing["step"]), ("tool_not_found", "route"))
        self.assertEqual((ok["actor_id"], ok["tenant"]), ("u1", "acme"))


class MemoryAuditSinkTest(unittest.TestCase):
    def test_keeps_plain_copies_of_records_in_order(self):
        sink = MemoryAuditSink()
        record = sample_record(call_id="c1")
        sink.write(record)
        record["call_id"] = "changed later"
        sink.write(sample_record(call_id="c2", outcome=Outcome.FAILED))
        self.assertEqual([r["call_id"] for r in sink.records], ["c1", "c2"])
        self.assertEqual(sink.records[1]["outcome"], "failed")

    def test_holds_the_same_shape_a_file_would(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        path = os.path.join(directory.name, "a.jsonl")
        record = sample_record(fingerprint=b"x", duration_ms=float("inf"))
        memory = MemoryAuditSink()
        memory.write(record)
        with JsonlAuditSink(path) as sink:
            sink.write(record)
        self.assertEqual(memory.records, read_audit_file(path))

    def test_close_is_idempotent_and_writing_after_close_is_refused(self):
        sink = MemoryAuditSink()
        sink.close()
        sink.close()
        with self.assertRaises(ValueError):
            sink.write(sample_record())


if __name__ == "__main__":
    unittest.main()
