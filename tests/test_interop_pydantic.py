"""`@tool` with pydantic v2 models as parameters and return types, against the real pydantic.

The schema comes from the model, and it is the one schema: exported to every host (OpenAI strict
included) and enforced by our validator before the handler runs; the handler gets the model instance;
a returned model is written with `model_dump(mode="json")` and checked against the model's
serialization schema. The model's own validators, which no schema can show, get the last word: what
they refuse is `invalid_arguments` with a JSON Pointer, never an exception out of `invoke`.

Skips without pydantic (`.ci/run` installs it in the interop venv, where no test may skip).
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import unittest
import uuid
from typing import Annotated, Literal, Optional, Union

from agent_lab import Actor, Registry, ToolCall, tool
from agent_lab.adapters import HostBridge, export_catalog
from agent_lab.errors import Outcome
from agent_lab.schema import Validator


def optional_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


pydantic = optional_module("pydantic")
jsonschema = optional_module("jsonschema")
SKIP = "pydantic is not installed (.ci/run installs it in the interop venv, where no test may skip)"
ACTOR = Actor(id="teller-1", tenant="acme", permissions={"bank:write", "bank:read"})
FORMATS = (("openai", False), ("openai", True), ("openai-chat", False), ("openai-chat", True),
           ("anthropic", False), ("mcp", False))

if pydantic is not None:
    class Address(pydantic.BaseModel):
        """A postal address."""

        street: str
        postcode: str = pydantic.Field(pattern=r"^[0-9]{5}$")

    class TransferIn(pydantic.BaseModel):
        """A transfer to make."""

        amount: decimal.Decimal = pydantic.Field(gt=0)
        to: Address
        copy_to: Optional[Address] = None
        execute_at: datetime.datetime
        memo: str = pydantic.Field(default="", max_length=40)
        tags: list[str] = []

        @pydantic.field_validator("memo")
        @classmethod
        def memo_is_not_shouted(cls, memo: str) -> str:
            if memo and memo.isupper():
                raise ValueError("write the memo in lower case")
            return memo

        @pydantic.model_validator(mode="after")
        def not_to_the_sanctioned_postcode(self) -> "TransferIn":
            if self.to.postcode == "00000":
                raise ValueError("transfers to this postcode are blocked")
            return self

    class TransferOut(pydantic.BaseModel):
        id: uuid.UUID
        amount: decimal.Decimal
        booked_at: datetime.datetime
        to: Address
        from_account: str = pydantic.Field(serialization_alias="from")

    class Card(pydantic.BaseModel):
        kind: Literal["card"]
        last4: str = pydantic.Field(pattern=r"^[0-9]{4}$")

    class Iban(pydantic.BaseModel):
        kind: Literal["iban"]
        iban: str

    class Refund(pydantic.BaseModel):
        """A refund to one payment method."""

        method: Annotated[Union[Card, Iban], pydantic.Field(discriminator="kind")]
        amount: decimal.Decimal

    class Folder(pydantic.BaseModel):
        name: str
        children: list["Folder"] = []

    class Booking(pydantic.BaseModel):
        at: datetime.datetime


EFFECTS: list[object] = []


def transfer_tool():
    @tool(effect="write", idempotency_key="request_id", required_permission="bank:write")
    def transfer(request_id: str, transfer: TransferIn) -> TransferOut:
        """Move money to an address."""
        EFFECTS.append(transfer)
        return TransferOut(id=uuid.UUID(int=7), amount=transfer.amount, booked_at=transfer.execute_at,
                           to=transfer.to, from_account="ACME-1")

    return transfer


def good_transfer(**changes) -> dict:
    transfer = {"amount": "12.50", "to": {"street": "1 Main St", "postcode": "75011"},
                "execute_at": "2026-08-04T09:30:00+02:00"}
    transfer.update(changes)
    return {"request_id": "r-1", "transfer": transfer}


@unittest.skipIf(pydantic is None, SKIP)
class OneSchemaTest(unittest.TestCase):
    def setUp(self) -> None:
        EFFECTS.clear()
        self.transfer = transfer_tool()

    def test_the_input_schema_is_the_models_with_its_defs_at_the_root(self) -> None:
        schema = self.transfer.spec.input_schema
        model = TransferIn.model_json_schema()
        self.assertEqual(schema["properties"]["transfer"], {k: v for k, v in model.items() if k != "$defs"})
        self.assertEqual(schema["$defs"], model["$defs"])
        self.assertEqual(schema["required"], ["request_id", "transfer"])

    def test_the_output_schema_is_the_models_serialization_schema(self) -> None:
        output = self.transfer.spec.output_schema
        self.assertEqual(output["properties"]["amount"]["type"], "string")  # how a Decimal is written
        self.assertIn("from", output["properties"])  # the alias it is written under

    def test_exported_in_all_four_formats_and_enforced_an_invalid_field_is_refused_before_the_handler(self) -> None:
        printed = {}
        for fmt, strict in FORMATS:
            [exported] = export_catalog([self.transfer.spec], fmt, strict=strict)
            printed[f"{fmt}{' strict' if strict else ''}"] = exported
            text = json.dumps(exported)
            self.assertIn("#/$defs/Address", text)
            self.assertIn('"postcode"', text)
        strict_parameters = printed["openai strict"]["parameters"]
        address = strict_parameters["$defs"]["Address"]
        self.assertEqual((address["additionalProperties"], address["required"]), (False, ["street", "postcode"]))
        if jsonschema is not None:
            for exported in printed.values():
                schema = exported.get("parameters") or exported.get("function", {}).get("parameters") \
                    or exported.get("input_schema") or exported.get("inputSchema")
                jsonschema.Draft202012Validator.check_schema(schema)
        with Registry() as registry:
            registry.register(self.transfer.spec, self.transfer.handler)
            refused = registry.invoke(ToolCall("transfer", good_transfer(to={"street": "x", "postcode": "7501"})),
                                      actor=ACTOR)
        self.assertEqual((refused.error.code, refused.outcome), ("invalid_arguments", Outcome.REJECTED))
        self.assertEqual(refused.error.details["violations"][0]["instance_path"], "/transfer/to/postcode")
        self.assertEqual(EFFECTS, [])  # refused by our validator, from the model's schema

    def test_a_strict_host_call_reaches_the_handler_as_the_model_instance(self) -> None:
        with Registry() as registry:
            registry.register(self.transfer.spec, self.transfer.handler)
            bridge = HostBridge(registry, "openai", strict=True, actor=ACTOR)
            arguments = good_transfer(copy_to=None, memo=None, tags=None)  # strict: every property, null = absent
            call = bridge.parse_call({"type": "function_call", "call_id": "c1", "name": "transfer",
                                      "arguments": json.dumps(arguments)})
            result = registry.invoke(call, actor=ACTOR)
        self.assertTrue(result.ok, result.error)
        [received] = EFFECTS
        self.assertIsInstance(received, TransferIn)
        self.assertEqual((received.amount, received.memo, received.tags), (decimal.Decimal("12.50"), "", []))
        self.assertEqual(received.execute_at.utcoffset(), datetime.timedelta(hours=2))
        self.assertEqual(result.output, {"id": "00000000-0000-0000-0000-000000000007", "amount": "12.50",
                                         "booked_at": "2026-08-04T09:30:00+02:00",
                                         "to": {"street": "1 Main St", "postcode": "75011"}, "from": "ACME-1"})
        self.assertTrue(Validator(self.transfer.spec.output_schema, format_assertion=True).is_valid(result.output))


@unittest.skipIf(pydantic is None, SKIP)
class ModelValidatorsTest(unittest.TestCase):
    def setUp(self) -> None:
        EFFECTS.clear()
        self.transfer = transfer_tool()

    def test_what_a_models_own_validator_refuses_is_invalid_arguments_with_a_pointer_and_the_function_never_runs(self) -> None:
        with Registry() as registry:
            registry.register(self.transfer.spec, self.transfer.handler)
            shouted = registry.invoke(ToolCall("transfer", good_transfer(memo="PAY NOW")), actor=ACTOR)
            blocked = registry.invoke(ToolCall("transfer", good_transfer(to={"street": "x", "postcode": "00000"})),
                                      actor=ACTOR)
        self.assertEqual((shouted.error.code, shouted.outcome), ("invalid_arguments", Outcome.FAILED))
        self.assertEqual(shouted.error.next_action.value, "fix_arguments")
        [violation] = shouted.error.details["violations"]
        self.assertEqual((violation["instance_path"], violation["keyword"]), ("/transfer/memo", "pydantic:value_error"))
        self.assertIn("write the memo in lower case", violation["message"])
        self.assertNotIn("PAY NOW", json.dumps(shouted.to_model()))  # pydantic's input is never echoed
        self.assertEqual(blocked.error.details["violations"][0]["instance_path"], "/transfer")
        self.assertEqual(EFFECTS, [])

    def test_a_string_pydantic_cannot_read_is_invalid_arguments_that_says_why(self) -> None:
        with Registry() as registry:
            registry.register(self.transfer.spec, self.transfer.handler)
            result = registry.invoke(ToolCall("transfer", good_transfer(memo="caf\ud800")), actor=ACTOR)
        self.assertEqual(result.error.code, "invalid_arguments")
        self.assertIn("lone surrogate", result.error.message)
        self.assertEqual(EFFECTS, [])

    def test_the_key_of_a_refused_write_is_free_for_the_corrected_call_which_runs_once(self) -> None:
        with Registry() as registry:
            registry.register(self.transfer.spec, self.transfer.handler)
            refused = registry.invoke(ToolCall("transfer", good_transfer(memo="PAY NOW")), actor=ACTOR)
            fixed = registry.invoke(ToolCall("transfer", good_transfer(memo="pay now")), actor=ACTOR)
            retried = registry.invoke(ToolCall("transfer", good_transfer(memo="pay now")), actor=ACTOR)
        self.assertEqual(refused.error.code, "invalid_arguments")
        self.assertTrue(fixed.ok, fixed.error)
        self.assertTrue(retried.replayed)
        self.assertEqual(len(EFFECTS), 1)

    def test_a_strict_model_reads_dates_from_json_strings_as_it_would_from_the_wire(self) -> None:
        class StrictStamp(pydantic.BaseModel):
            model_config = pydantic.ConfigDict(strict=True)
            at: datetime.datetime

        got = []

        def stamp(value: StrictStamp) -> dict:
            """Stamp."""
            got.append(value.at)
            return {}

        stamp.__annotations__["value"] = StrictStamp
        stamped = tool(stamp)
        with Registry() as registry:
            registry.register(stamped.spec, stamped.handler)
            result = registry.invoke(ToolCall("stamp", {"value": {"at": "2026-01-01T00:00:00Z"}}), actor=ACTOR)
        self.assertTrue(result.ok, result.error)
        self.assertEqual(got, [datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)])


@unittest.skipIf(pydantic is None, SKIP)
class ShapesTest(unittest.TestCase):
    def test_optional_list_nested_recursive_and_discriminated_models(self) -> None:
        seen = []

        @tool
        def file_refunds(refunds: list[Refund], root: Optional[Folder] = None) -> list[Refund]:
            """File refunds."""
            seen.append((refunds, root))
            return refunds

        schema = file_refunds.spec.input_schema
        self.assertEqual(sorted(schema["$defs"]), ["Card", "Folder", "Iban"])
        method = schema["properties"]["refunds"]["items"]["properties"]["method"]
        self.assertEqual(method["anyOf"], [{"$ref": "#/$defs/Card"}, {"$ref": "#/$defs/Iban"}])  # not oneOf
        self.assertNotIn("discriminator", method)
        for fmt, strict in FORMATS:
            export_catalog([file_refunds.spec], fmt, strict=strict)  # strict refuses oneOf, takes anyOf
        arguments = {"refunds": [{"method": {"kind": "iban", "iban": "FR76"}, "amount": "5"},
                                 {"method": {"kind": "card", "last4": "4242"}, "amount": "7.10"}],
                     "root": {"name": "a", "children": [{"name": "b"}]}}
        with Registry() as registry:
            registry.register(file_refunds.spec, file_refunds.handler)
            result = registry.invoke(ToolCall("file_refunds", arguments), actor=ACTOR)
            both = registry.invoke(ToolCall("file_refunds", {"refunds": [
                {"method": {"kind": "card", "last4": "4242", "iban": "x"}, "amount": "1"}]}), actor=ACTOR)
        self.assertTrue(result.ok, result.error)
        refunds, root = seen[0]
        self.assertEqual([type(refund.method).__name__ for refund in refunds], ["Iban", "Card"])
        self.assertEqual(root.children[0].name, "b")
        self.assertEqual(result.output, [{"method": {"kind": "iban", "iban": "FR76"}, "amount": "5"},
                                         {"method": {"kind": "card", "last4": "4242"}, "amount": "7.10"}])
        self.assertTrue(both.ok)  # pydantic ignores the extra key, and so does the schema it wrote

    def test_a_returned_model_that_breaks_its_serialization_schema_is_invalid_tool_output(self) -> None:
        @tool
        def book() -> Booking:
            """Book."""
            return Booking(at=datetime.datetime(2026, 1, 1))  # naive: no RFC 3339 date-time

        with Registry() as registry:
            registry.register(book.spec, book.handler)
            result = registry.invoke(ToolCall("book", {}), actor=ACTOR)
        self.assertEqual(result.error.code, "invalid_tool_output")
        self.assertEqual(result.error.details["violations"][0]["instance_path"], "/at")

    def test_a_model_returned_by_a_plain_handler_is_dumped_too(self) -> None:
        from agent_lab import ToolSpec

        spec = ToolSpec(name="last", description="Last booking.", input_schema={"type": "object"})
        with Registry() as registry:
            registry.register(spec, lambda arguments: {"booking": Booking(
                at=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))})
            result = registry.invoke(ToolCall("last", {}), actor=ACTOR)
        self.assertEqual(result.output, {"booking": {"at": "2026-01-01T00:00:00Z"}})

    def test_field_constraints_on_plain_parameters_are_enforced_and_validators_refused_at_decoration(self) -> None:
        @tool
        def pick(count: Annotated[int, pydantic.Field(ge=1, le=5, description="How many.")]) -> dict:
            """Pick."""
            return {"count": count}

        self.assertEqual(pick.spec.input_schema["properties"]["count"],
                         {"type": "integer", "description": "How many.", "minimum": 1, "maximum": 5})
        with Registry() as registry:
            registry.register(pick.spec, pick.handler)
            self.assertEqual(registry.invoke(ToolCall("pick", {"count": 9}), actor=ACTOR).error.code,
                             "invalid_arguments")

        def checked(count: Annotated[int, pydantic.AfterValidator(lambda value: value)]) -> dict:
            """Checked."""
            return {}

        checked.__annotations__["count"] = Annotated[int, pydantic.AfterValidator(lambda value: value)]
        with self.assertRaisesRegex(TypeError, "runs only inside a pydantic model"):
            tool(checked)

    def test_a_pattern_in_pythons_regex_syntax_is_refused_at_decoration(self) -> None:
        class Code(pydantic.BaseModel):
            code: str = pydantic.Field(pattern=r"^(?P<prefix>[A-Z]{2})[0-9]+$")

        def lookup(code: Code) -> dict:
            """Look up."""
            return {}

        lookup.__annotations__["code"] = Code
        with self.assertRaisesRegex(TypeError, "lookup: parameter 'code': the JSON Schema pydantic writes for Code"):
            tool(lookup)

    def test_two_different_models_with_one_name_are_refused(self) -> None:
        def make(name: str):
            return pydantic.create_model("Item", **{name: (str, ...)})

        def both(a: object, b: object) -> dict:
            """Both."""
            return {}

        both.__annotations__.update(a=pydantic.create_model("Pair", item=(make("x"), ...)),
                                    b=pydantic.create_model("Other", item=(make("y"), ...)))
        with self.assertRaisesRegex(TypeError, "both called 'Item'"):
            tool(both)


if __name__ == "__main__":
    unittest.main()
