"""The types people return (datetime, date, time, UUID, Decimal, Enum, tuples, dataclasses, TypedDicts):
each has one JSON form, the same in the schema `@tool` derives, in the output the registry writes and in
the parameter a handler receives (see agent_lab.jsonforms)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import subprocess
import sys
import unittest
import uuid
import zoneinfo
from pathlib import Path
from typing import Optional, TypedDict

from agent_lab import Actor, Registry, ToolCall, ToolSpec, tool
from agent_lab.adapters import export_catalog
from agent_lab.errors import Outcome
from agent_lab.jsonforms import DECIMAL_PATTERN
from agent_lab.schema import Validator

CHECKOUT = Path(__file__).resolve().parents[1]
ACTOR = Actor(id="u1", tenant="acme", permissions={"bank:read", "bank:write"})
UTC = datetime.timezone.utc
PARIS_SUMMER = datetime.timezone(datetime.timedelta(hours=2))


class Status(enum.Enum):
    OPEN = "open"
    SETTLED = "settled"


class Line(TypedDict):
    label: str
    amount: decimal.Decimal


@dataclasses.dataclass
class Payment:
    """A payment as the bank books it."""

    id: uuid.UUID
    amount: decimal.Decimal
    booked_at: datetime.datetime
    value_date: datetime.date
    cutoff: datetime.time
    status: Status
    lines: list[Line]
    fees: tuple[decimal.Decimal, ...] = ()
    checked: bool = dataclasses.field(default=False, init=False)


@dataclasses.dataclass
class Window:
    start: datetime.date
    end: datetime.date

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("secret internal detail")


PAYMENT_ID = uuid.UUID("4f6c1b2e-8d3a-4c5e-9f10-2a3b4c5d6e7f")
RECEIVED: list[dict] = []


@tool(required_permission="bank:read")
def book(id: uuid.UUID, amount: decimal.Decimal, booked_at: datetime.datetime, value_date: datetime.date,
         cutoff: datetime.time, status: Status, lines: list[Line]) -> Payment:
    """Book a payment."""
    RECEIVED.append({"id": id, "amount": amount, "booked_at": booked_at, "value_date": value_date,
                     "cutoff": cutoff, "status": status, "lines": lines})
    return Payment(id=id, amount=amount, booked_at=booked_at, value_date=value_date, cutoff=cutoff,
                   status=status, lines=lines, fees=(decimal.Decimal("0.30"),))


@tool(required_permission="bank:read")
def statement(month: datetime.date) -> list[Line]:
    """A month's statement lines."""
    return [{"label": "rent", "amount": decimal.Decimal("-950.00")}, {"label": month.isoformat(),
                                                                      "amount": decimal.Decimal("1E+2")}]


ARGUMENTS = {
    "id": str(PAYMENT_ID), "amount": "12.50", "booked_at": "2026-08-04T09:30:00.123456789+02:00",
    "value_date": "2026-08-05", "cutoff": "16:00:00Z", "status": "open",
    "lines": [{"label": "coffee", "amount": "12.50"}],
}


def invoke(spec: ToolSpec, handler, arguments: dict, **options):
    with Registry() as registry:
        registry.register(spec, handler)
        return registry.invoke(ToolCall(spec.name, arguments), actor=ACTOR, **options)


class SchemaTest(unittest.TestCase):
    def test_each_type_maps_to_one_schema(self) -> None:
        properties = book.spec.input_schema["properties"]
        self.assertEqual(properties["id"], {"type": "string", "format": "uuid"})
        self.assertEqual(properties["amount"], {"type": "string", "pattern": DECIMAL_PATTERN})
        self.assertEqual(properties["booked_at"], {"type": "string", "format": "date-time"})
        self.assertEqual(properties["value_date"], {"type": "string", "format": "date"})
        self.assertEqual(properties["cutoff"], {"type": "string", "format": "time"})
        self.assertEqual(properties["status"], {"type": "string", "enum": ["open", "settled"]})
        self.assertEqual(properties["lines"]["items"]["properties"]["amount"], properties["amount"])

    def test_a_dataclass_return_lists_every_field_it_writes_including_those_init_does_not_take(self) -> None:
        output = book.spec.output_schema
        self.assertEqual(output["required"], ["id", "amount", "booked_at", "value_date", "cutoff", "status",
                                              "lines", "fees", "checked"])
        self.assertEqual(output["properties"]["fees"], {"type": "array", "items": {
            "type": "string", "pattern": DECIMAL_PATTERN}})

    def test_a_list_of_typeddicts_gets_an_output_schema(self) -> None:
        self.assertEqual(statement.spec.output_schema["type"], "array")
        self.assertEqual(statement.spec.output_schema["items"]["required"], ["label", "amount"])

    def test_a_return_annotation_without_structure_still_gets_none(self) -> None:
        @tool
        def now() -> datetime.datetime:
            """Now."""
            return datetime.datetime.now(UTC)

        @tool
        def raw() -> list[dict]:
            """Raw."""
            return []

        self.assertIsNone(now.spec.output_schema)
        self.assertIsNone(raw.spec.output_schema)

    def test_the_schemas_export_in_every_format_strict_included(self) -> None:
        for fmt in ("openai", "openai-chat", "anthropic", "mcp"):
            for strict in (False, True) if fmt.startswith("openai") else (False,):
                with self.subTest(fmt=fmt, strict=strict):
                    [exported] = export_catalog([book.spec], fmt, strict=strict)
                    self.assertIn("booked_at", json.dumps(exported))

    def test_the_decimal_pattern_is_linear_on_pythons_re(self) -> None:
        self.assertEqual([finding.safety.engine for finding in Validator({"pattern": DECIMAL_PATTERN}).patterns],
                         ["re"])


class ParametersTest(unittest.TestCase):
    def setUp(self) -> None:
        RECEIVED.clear()

    def test_the_handler_receives_python_values_and_aware_datetimes(self) -> None:
        result = invoke(book.spec, book.handler, ARGUMENTS)
        self.assertTrue(result.ok, result.error)
        [got] = RECEIVED
        self.assertEqual(got["id"], PAYMENT_ID)
        self.assertEqual(got["amount"], decimal.Decimal("12.50"))
        self.assertEqual(str(got["amount"]), "12.50")  # exactly as written, trailing zero kept
        self.assertEqual(got["booked_at"], datetime.datetime(2026, 8, 4, 9, 30, 0, 123456, tzinfo=PARIS_SUMMER))
        self.assertEqual(got["value_date"], datetime.date(2026, 8, 5))
        self.assertEqual(got["cutoff"], datetime.time(16, 0, tzinfo=UTC))
        self.assertIs(got["status"], Status.OPEN)
        self.assertEqual(got["lines"], [{"label": "coffee", "amount": decimal.Decimal("12.50")}])

    def test_a_naive_datetime_or_a_number_for_a_decimal_is_refused_by_the_schema(self) -> None:
        for field, value in (("booked_at", "2026-08-04T09:30:00"), ("cutoff", "16:00:00"), ("amount", 12.5),
                             ("amount", "1e3"), ("id", "not-a-uuid"), ("value_date", "2026-02-30")):
            with self.subTest(field=field, value=value):
                result = invoke(book.spec, book.handler, {**ARGUMENTS, field: value})
                self.assertEqual(result.error.code, "invalid_arguments")
                self.assertEqual(result.error.details["violations"][0]["instance_path"], "/" + field)
        self.assertEqual(RECEIVED, [])

    def test_json_the_schema_accepts_but_python_cannot_hold_is_invalid_arguments_with_its_pointer(self) -> None:
        for field, value, reason in (("booked_at", "2026-12-31T23:59:60Z", "leap second"),
                                     ("value_date", "0000-01-01", "year")):
            with self.subTest(field=field):
                result = invoke(book.spec, book.handler, {**ARGUMENTS, field: value})
                self.assertEqual((result.error.code, result.outcome), ("invalid_arguments", Outcome.FAILED))
                self.assertEqual(result.error.next_action.value, "fix_arguments")
                [violation] = result.error.details["violations"]
                self.assertEqual(violation["instance_path"], "/" + field)
                self.assertIn(reason, violation["message"])
                self.assertNotIn(str(value), result.error.message)
        self.assertEqual(RECEIVED, [])

    def test_a_dataclass_that_refuses_its_fields_is_invalid_arguments_without_its_exception_text(self) -> None:
        ran = []

        def plan(window: Window) -> dict:
            """Plan."""
            ran.append(window)
            return {}

        planned = tool(plan)
        result = invoke(planned.spec, planned.handler, {"window": {"start": "2026-08-05", "end": "2026-08-01"}})
        self.assertEqual(result.error.code, "invalid_arguments")
        self.assertEqual(result.error.details["violations"][0]["instance_path"], "/window")
        self.assertNotIn("secret internal detail", json.dumps(result.to_model()))
        self.assertEqual(ran, [])

    def test_a_keyed_write_refused_by_a_python_type_frees_its_key_for_the_corrected_call(self) -> None:
        effects = []

        @tool(effect="write", idempotency_key="request_id", required_permission="bank:write")
        def schedule(request_id: str, at: datetime.datetime) -> dict:
            """Schedule a transfer."""
            effects.append(at)
            return {"scheduled": True}

        with Registry() as registry:
            registry.register(schedule.spec, schedule.handler)
            refused = registry.invoke(ToolCall("schedule", {"request_id": "r-1", "at": "2026-12-31T23:59:60Z"}),
                                      actor=ACTOR)
            fixed = registry.invoke(ToolCall("schedule", {"request_id": "r-1", "at": "2026-12-31T23:59:59Z"}),
                                    actor=ACTOR)
            again = registry.invoke(ToolCall("schedule", {"request_id": "r-1", "at": "2026-12-31T23:59:59Z"}),
                                    actor=ACTOR)
        self.assertEqual(refused.error.code, "invalid_arguments")
        self.assertTrue(fixed.ok, fixed.error)
        self.assertTrue(again.replayed)
        self.assertEqual(len(effects), 1)

    def test_arguments_are_json_only_a_python_value_in_a_tool_call_is_refused_not_converted(self) -> None:
        result = invoke(book.spec, book.handler, {**ARGUMENTS, "booked_at": datetime.datetime(2026, 8, 4, tzinfo=UTC)})
        self.assertEqual(result.error.code, "invalid_arguments")


class OutputsTest(unittest.TestCase):
    def test_each_type_is_written_in_the_form_its_schema_describes(self) -> None:
        result = invoke(book.spec, book.handler, ARGUMENTS)
        self.assertTrue(result.ok, result.error)
        self.assertEqual(result.output, {
            "id": str(PAYMENT_ID), "amount": "12.50", "booked_at": "2026-08-04T09:30:00.123456+02:00",
            "value_date": "2026-08-05", "cutoff": "16:00:00+00:00", "status": "open",
            "lines": [{"label": "coffee", "amount": "12.50"}], "fees": ["0.30"], "checked": False})
        self.assertTrue(Validator(book.spec.output_schema, format_assertion=True).is_valid(result.output))

    def test_a_list_of_typeddicts_is_checked_against_its_schema_and_decimals_never_use_an_exponent(self) -> None:
        result = invoke(statement.spec, statement.handler, {"month": "2026-08-01"})
        self.assertEqual(result.output, [{"label": "rent", "amount": "-950.00"},
                                         {"label": "2026-08-01", "amount": "100"}])

    def test_any_handler_may_return_them_not_only_a_decorated_one(self) -> None:
        spec = ToolSpec(name="when", description="When.", input_schema={"type": "object"})
        moment = datetime.datetime(2026, 3, 29, 3, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
        result = invoke(spec, lambda arguments: {"at": moment, "pair": (1, "a"), "ids": {"x": uuid.UUID(int=1)}}, {})
        self.assertEqual(result.output, {"at": "2026-03-29T03:00:00+02:00", "pair": [1, "a"],
                                         "ids": {"x": "00000000-0000-0000-0000-000000000001"}})

    def test_what_has_no_json_form_is_invalid_tool_output_saying_where_and_why(self) -> None:
        spec = ToolSpec(name="when", description="When.", input_schema={"type": "object"})
        odd_offset = datetime.timezone(datetime.timedelta(hours=1, seconds=30))
        for value, why in ((datetime.datetime(2026, 8, 4, 9, 30), "without a timezone"),
                           (datetime.time(9, 30), "without a timezone"),
                           (datetime.time(9, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), "no UTC offset"),
                           (datetime.datetime(2026, 8, 4, tzinfo=odd_offset), "whole minutes"),
                           (decimal.Decimal("NaN"), "not a finite number"),
                           (decimal.Decimal("1E+100000"), "plain notation")):
            with self.subTest(value=repr(value)):
                result = invoke(spec, lambda arguments: {"rows": [{"at": value}]}, {})
                self.assertEqual((result.error.code, result.outcome), ("invalid_tool_output", Outcome.FAILED))
                [violation] = result.error.details["violations"]
                self.assertEqual(violation["instance_path"], "/rows/0/at")
                self.assertIn(why, violation["message"])

    def test_a_tzinfo_that_raises_is_invalid_tool_output_not_an_internal_error(self) -> None:
        class Broken(datetime.tzinfo):
            def utcoffset(self, moment: object) -> datetime.timedelta:
                raise RuntimeError("boom")

        spec = ToolSpec(name="when", description="When.", input_schema={"type": "object"})
        result = invoke(spec, lambda arguments: {"at": datetime.datetime(2026, 1, 1, tzinfo=Broken())}, {})
        self.assertEqual(result.error.code, "invalid_tool_output")

    def test_a_write_whose_output_has_no_json_form_is_outcome_unknown(self) -> None:
        spec = ToolSpec(name="post", description="Post.", input_schema={"type": "object"}, effect="write",
                        required_permission="bank:write")
        result = invoke(spec, lambda arguments: {"at": datetime.datetime(2026, 1, 1)}, {})
        self.assertEqual((result.error.code, result.outcome), ("invalid_tool_output", Outcome.UNKNOWN))


class NothingImportedTest(unittest.TestCase):
    def test_the_library_imports_neither_pydantic_nor_uuid_on_its_own(self) -> None:
        source = ("import sys, agent_lab\n"
                  "from agent_lab import tool, Registry, ToolCall, Actor\n"
                  "import datetime\n"
                  "@tool\n"
                  "def when(day: datetime.date) -> dict:\n"
                  "    '''When.'''\n"
                  "    return {'day': day}\n"
                  "with Registry() as r:\n"
                  "    r.register(when.spec, when.handler)\n"
                  "    assert r.invoke(ToolCall('when', {'day': '2026-08-04'}), actor=Actor(id='u', tenant='t')).ok\n"
                  "print(sorted(m for m in ('pydantic', 'uuid') if m in sys.modules))\n")
        done = subprocess.run([sys.executable, "-c", source], cwd=CHECKOUT, capture_output=True, text=True,
                              timeout=60, check=False)
        self.assertEqual((done.returncode, done.stdout.strip(), done.stderr), (0, "[]", ""))


if __name__ == "__main__":
    unittest.main()
