"""Tools from Python signatures: the schema `@tool` derives, what it refuses, and how it calls back."""

import asyncio
import dataclasses
import enum
import typing
import unittest
from typing import Annotated, Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, TypedDict, Union

from agent_lab.context import CallContext
from agent_lab.policy import Actor
from agent_lab.schema import Validator
from agent_lab.signature import (
    Describe,
    Len,
    Pattern,
    Range,
    handler_for,
    input_schema_from_function,
    spec_from_function,
    tool,
)
from agent_lab.spec import Effect

try:
    import jsonschema
except ImportError:  # optional: the differential meta-schema check skips without it
    jsonschema = None


# -- types used by the functions under test (module level, so their hints resolve) ----------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.Enum):
    ONE = 1
    TWO = 2


class Filters(TypedDict, total=False):
    """Optional filters for a search."""

    status: Literal["open", "closed"]
    tags: List[str]


class _QueryBase(TypedDict):
    text: str


class Query(_QueryBase, total=False):  # `text` required, `limit` optional: works on 3.10 and later
    limit: int


@dataclasses.dataclass
class Point:
    """A point on the board."""

    x: int
    y: int = 0


@dataclasses.dataclass
class Segment:
    start: Point
    end: Point
    label: Optional[str] = None


@dataclasses.dataclass
class Node:
    value: int
    children: "List[Node]"


@dataclasses.dataclass
class Report:
    total: int
    names: List[str]


def search_tickets(
    query: str,
    filters: Filters,
    status: Literal["open", "pending", "closed"],
    assignee: Optional[str] = None,
    labels: List[str] = [],  # noqa: B006 - a default the schema shows
) -> dict:
    """Search tickets by text and filters."""
    return {}


def schema_of(fn: Callable[..., Any]) -> dict:
    return input_schema_from_function(fn)


def property_of(annotation: Any) -> dict:
    """The schema a single required parameter with this annotation gets."""

    def probe(value):  # noqa: ANN001 - the annotation is attached below
        """Probe."""

    probe.__annotations__ = {"value": annotation}
    return schema_of(probe)["properties"]["value"]


class RoundTripTest(unittest.TestCase):
    def test_a_function_with_typeddict_literal_optional_and_list_gives_a_valid_2020_12_schema(self):
        schema = schema_of(search_tickets)
        Validator(schema)  # our meta-schema check raises SchemaError if the schema is not 2020-12
        self.assertEqual(schema["required"], ["query", "filters", "status"])
        self.assertIs(schema["additionalProperties"], False)
        validator = Validator(schema)
        self.assertTrue(validator.is_valid({"query": "printer", "filters": {"status": "open"}, "status": "open"}))
        self.assertTrue(validator.is_valid(
            {"query": "x", "filters": {}, "status": "closed", "assignee": None, "labels": ["a"]}
        ))
        self.assertFalse(validator.is_valid({"query": "x", "filters": {"status": "other"}, "status": "open"}))
        self.assertFalse(validator.is_valid({"query": "x", "filters": {}, "status": "open", "extra": 1}))
        self.assertFalse(validator.is_valid({"query": "x", "filters": {}, "status": "open", "labels": [1]}))

    def test_toolspec_from_function_is_the_same_spec_as_spec_from_function(self):
        from agent_lab import ToolSpec

        built = ToolSpec.from_function(search_tickets, required_permission="tickets:read")
        self.assertEqual(built, spec_from_function(search_tickets, required_permission="tickets:read"))
        self.assertEqual(built.required_permission, "tickets:read")

    @unittest.skipIf(jsonschema is None, "python-jsonschema is not installed (pip install jsonschema)")
    def test_python_jsonschema_accepts_the_derived_schema_as_draft_2020_12(self):
        for fn in (search_tickets, uses_everything):
            with self.subTest(fn=fn.__name__):
                jsonschema.Draft202012Validator.check_schema(schema_of(fn))

    def test_every_supported_annotation_at_once_passes_our_meta_schema_check(self):
        Validator(schema_of(uses_everything))


def uses_everything(
    text: Annotated[str, Len(1, 80), Pattern(r"^[a-z ]+$"), "Words to look for."],
    count: Annotated[int, Range(ge=1, le=10)],
    ratio: Annotated[float, Range(gt=0, lt=1)],
    flag: bool,
    nothing: None,
    items: List[int],
    pair: Tuple[int, str],
    many: Tuple[str, ...],
    scores: Dict[str, float],
    either: Union[int, str],
    maybe: Optional[Point],
    priority: Priority,
    level: Level,
    query: Query,
    segment: Segment,
    sequence: Sequence[str],
    tags: Annotated[List[str], Len(max=5), Describe("At most five tags.")],
) -> None:
    """Touch every supported annotation."""


class AnnotationTest(unittest.TestCase):
    def test_primitives_map_to_json_types_and_bool_is_not_an_integer(self):
        self.assertEqual(property_of(str), {"type": "string"})
        self.assertEqual(property_of(int), {"type": "integer"})
        self.assertEqual(property_of(float), {"type": "number"})
        self.assertEqual(property_of(bool), {"type": "boolean"})
        self.assertEqual(property_of(None), {"type": "null"})

    def test_list_of_t_is_an_array_of_t(self):
        self.assertEqual(property_of(List[int]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(property_of(list[str]), {"type": "array", "items": {"type": "string"}})

    def test_fixed_tuple_uses_prefix_items_and_closes_the_array(self):
        schema = property_of(Tuple[int, str])
        self.assertEqual(schema["prefixItems"], [{"type": "integer"}, {"type": "string"}])
        self.assertIs(schema["items"], False)
        self.assertEqual((schema["minItems"], schema["maxItems"]), (2, 2))
        self.assertFalse(Validator(schema).is_valid([1, "a", 3]))
        self.assertFalse(Validator(schema).is_valid([1]))

    def test_variadic_tuple_is_an_array_of_its_item(self):
        self.assertEqual(property_of(Tuple[str, ...]), {"type": "array", "items": {"type": "string"}})

    def test_dict_with_str_keys_uses_additional_properties(self):
        self.assertEqual(property_of(Dict[str, int]), {"type": "object", "additionalProperties": {"type": "integer"}})

    def test_a_new_type_is_described_by_the_type_it_wraps(self):
        UserId = typing.NewType("UserId", str)  # noqa: N806
        self.assertEqual(property_of(UserId), {"type": "string"})
        self.assertEqual(property_of(Annotated[UserId, Len(1, 8)]), {"type": "string", "minLength": 1, "maxLength": 8})

        def fn(user: UserId, ids: List[UserId]):
            """Takes NewTypes."""
            return [user, ids]

        self.assertEqual(handler_for(fn)({"user": "u1", "ids": ["u2"]}), ["u1", ["u2"]])

    def test_optional_of_a_primitive_becomes_a_type_list(self):
        self.assertEqual(property_of(Optional[str]), {"type": ["string", "null"]})
        self.assertEqual(property_of(Union[int, str]), {"type": ["integer", "string"]})

    def test_union_of_structured_types_becomes_any_of(self):
        schema = property_of(Optional[Point])
        self.assertEqual(len(schema["anyOf"]), 2)
        self.assertEqual(schema["anyOf"][1], {"type": "null"})
        self.assertEqual(schema["anyOf"][0]["required"], ["x"])

    def test_literal_becomes_an_enum_with_its_type(self):
        self.assertEqual(property_of(Literal["a", "b"]), {"type": "string", "enum": ["a", "b"]})
        self.assertEqual(property_of(Literal[1, "x"]), {"type": ["integer", "string"], "enum": [1, "x"]})

    def test_enum_class_becomes_an_enum_of_its_values(self):
        self.assertEqual(property_of(Priority), {"type": "string", "enum": ["low", "high"]})
        self.assertEqual(property_of(Level), {"type": "integer", "enum": [1, 2]})

    def test_typeddict_required_and_optional_keys_follow_totality(self):
        schema = property_of(Query)
        self.assertEqual(schema["required"], ["text"])
        self.assertEqual(set(schema["properties"]), {"text", "limit"})
        self.assertIs(schema["additionalProperties"], False)
        self.assertNotIn("required", property_of(Filters))
        self.assertEqual(property_of(Filters)["description"], "Optional filters for a search.")

    @unittest.skipUnless(hasattr(typing, "NotRequired"), "typing.NotRequired needs Python 3.11")
    def test_typeddict_with_not_required_keys(self):
        NotRequired = typing.NotRequired  # noqa: N806  # novermin (guarded by skipUnless)
        WithNotRequired = TypedDict("WithNotRequired", {"id": str, "note": NotRequired[str]})  # noqa: N806
        schema = property_of(WithNotRequired)
        self.assertEqual(schema["required"], ["id"])
        self.assertEqual(schema["properties"]["note"], {"type": "string"})

    def test_an_explicit_not_required_wins_over_the_classes_required_keys(self):
        # typing.TypedDict on Python 3.10 does not know typing_extensions.NotRequired and lists such a key
        # in __required_keys__; the wrapper in the annotation says what the author meant.
        NotRequired = getattr(typing, "NotRequired", None)  # noqa: N806
        if NotRequired is None:
            try:
                from typing_extensions import NotRequired  # noqa: N806
            except ImportError:
                self.skipTest("needs typing.NotRequired (3.11) or typing_extensions")
        Note = TypedDict("Note", {"id": str, "text": NotRequired[str]})  # noqa: N806
        Note.__required_keys__ = frozenset({"id", "text"})  # what Python 3.10 computes
        Note.__optional_keys__ = frozenset()
        schema = property_of(Note)
        self.assertEqual(schema["required"], ["id"])
        self.assertEqual(schema["properties"]["text"], {"type": "string"})

    def test_dataclass_fields_defaults_and_nesting(self):
        schema = property_of(Segment)
        self.assertEqual(schema["required"], ["start", "end"])
        self.assertEqual(schema["properties"]["start"]["properties"]["y"], {"type": "integer", "default": 0})
        self.assertEqual(schema["properties"]["label"], {"type": ["string", "null"], "default": None})
        self.assertEqual(property_of(Point)["description"], "A point on the board.")
        self.assertNotIn("description", schema)  # the dataclass-generated docstring is not a description

    def test_markers_become_constraints(self):
        schema = schema_of(uses_everything)["properties"]
        self.assertEqual(schema["text"]["minLength"], 1)
        self.assertEqual(schema["text"]["maxLength"], 80)
        self.assertEqual(schema["text"]["pattern"], "^[a-z ]+$")
        self.assertEqual(schema["text"]["description"], "Words to look for.")
        self.assertEqual((schema["count"]["minimum"], schema["count"]["maximum"]), (1, 10))
        self.assertEqual((schema["ratio"]["exclusiveMinimum"], schema["ratio"]["exclusiveMaximum"]), (0, 1))
        self.assertEqual(schema["tags"]["maxItems"], 5)
        self.assertEqual(schema["tags"]["description"], "At most five tags.")

    def test_a_marker_on_an_optional_value_constrains_the_value_not_the_null(self):
        schema = property_of(Annotated[Optional[str], Len(max=3)])
        validator = Validator(schema)
        self.assertTrue(validator.is_valid(None))
        self.assertTrue(validator.is_valid("abc"))
        self.assertFalse(validator.is_valid("abcd"))

    def test_defaults_make_parameters_optional_and_are_shown_when_json(self):
        def fn(a: int, b: int = 3, c: Priority = Priority.HIGH, d: Optional[str] = None, e: Point = Point(1)):
            """Defaults."""

        schema = schema_of(fn)
        self.assertEqual(schema["required"], ["a"])
        self.assertEqual(schema["properties"]["b"]["default"], 3)
        self.assertEqual(schema["properties"]["c"]["default"], "high")
        self.assertIsNone(schema["properties"]["d"]["default"])
        self.assertEqual(schema["properties"]["e"]["default"], {"x": 1, "y": 0})

    def test_a_default_the_schema_would_refuse_is_not_shown_but_still_optional(self):
        def fn(a: int = True, b: str = 5, c: bool = 0, d: Annotated[int, Range(ge=1)] = 0, e: int = 2):
            """Defaults of the wrong type or out of range."""

        properties = schema_of(fn)["properties"]
        for name in "abcd":
            with self.subTest(parameter=name):
                self.assertNotIn("default", properties[name])
        self.assertEqual(properties["e"]["default"], 2)
        self.assertNotIn("required", schema_of(fn))

    def test_a_default_that_is_not_json_is_not_shown_but_still_optional(self):
        def fn(a: float = float("nan")):
            """NaN default."""

        schema = schema_of(fn)
        self.assertNotIn("default", schema["properties"]["a"])
        self.assertNotIn("required", schema)


class RefusalTest(unittest.TestCase):
    def assert_refused(self, fn: Callable[..., Any], parameter: str) -> None:
        with self.assertRaises(TypeError) as caught:
            schema_of(fn)
        message = str(caught.exception)
        self.assertIn(fn.__qualname__, message)
        self.assertIn(repr(parameter), message)

    def test_unexpressible_annotations_are_refused_naming_the_parameter(self):
        for annotation in (Any, object, bytes, set, frozenset, typing.Set[int], Callable[[int], int], list, dict,
                           Dict[int, str], complex):
            with self.subTest(annotation=annotation):

                def fn(value):  # noqa: ANN001
                    """Refused."""

                fn.__annotations__ = {"value": annotation}
                self.assert_refused(fn, "value")

    def test_a_nested_unexpressible_field_names_the_parameter_and_the_field(self):
        @dataclasses.dataclass
        class Holder:
            blob: bytes

        def fn(holder: Holder):
            """Nested."""

        with self.assertRaises(TypeError) as caught:
            schema_of(fn)
        self.assertIn("'holder'", str(caught.exception))
        self.assertIn("blob", str(caught.exception))

    def test_star_args_and_star_star_kwargs_are_refused(self):
        def variadic(*names: str):
            """Refused."""

        def keywords(**options: str):
            """Refused."""

        self.assert_refused(variadic, "names")
        self.assert_refused(keywords, "options")

    def test_positional_only_parameters_are_refused(self):
        def positional(a: int, /, b: int):
            """Refused."""

        self.assert_refused(positional, "a")

    def test_a_parameter_without_annotation_is_refused(self):
        def bare(a):  # noqa: ANN001
            """Refused."""

        self.assert_refused(bare, "a")

    def test_an_unresolvable_forward_reference_is_refused(self):
        def forward(a: "NoSuchType"):  # noqa: F821
            """Refused."""

        self.assert_refused(forward, "a")

    def test_a_dataclass_whose_init_needs_more_than_its_fields_is_refused(self):
        @dataclasses.dataclass
        class Scaled:
            value: int
            scale: dataclasses.InitVar[int]

            def __post_init__(self, scale: int) -> None:
                self.value *= scale

        def fn(item: Scaled):
            """Takes a dataclass with a required InitVar."""

        self.assert_refused(fn, "item")

    def test_recursive_types_are_refused(self):
        def tree(root: Node):
            """Refused."""

        self.assert_refused(tree, "root")

    def test_markers_on_the_wrong_type_are_refused(self):
        def wrong_len(a: Annotated[int, Len(max=3)]):
            """Refused."""

        def wrong_range(a: Annotated[str, Range(ge=1)]):
            """Refused."""

        def wrong_pattern(a: Annotated[int, Pattern("^a$")]):
            """Refused."""

        for fn in (wrong_len, wrong_range, wrong_pattern):
            with self.subTest(fn=fn.__name__):
                self.assert_refused(fn, "a")

    def test_a_pattern_that_is_not_a_regex_is_refused_at_decoration(self):
        def bad_pattern(a: Annotated[str, Pattern("(unclosed")]):
            """Refused."""

        def python_only_pattern(a: Annotated[str, Pattern("(?P<word>a)")]):
            """Refused: Python's named-group syntax is not ECMA-262."""

        def lookbehind_pattern(a: Annotated[str, Pattern("(?<=a+)b")]):
            """Refused: valid ECMA-262, but Python's re cannot run a variable-width look-behind."""

        self.assert_refused(bad_pattern, "a")
        self.assert_refused(python_only_pattern, "a")
        with self.assertRaises(TypeError) as refused:
            input_schema_from_function(lookbehind_pattern)
        self.assertIn("valid ECMA-262 but not supported here", str(refused.exception))
        self.assertEqual(str(refused.exception).count("ECMA-262"), 1)

    def test_markers_check_their_own_arguments(self):
        with self.assertRaises(ValueError):
            Len(min=3, max=1)
        with self.assertRaises(ValueError):
            Len(min=True)
        with self.assertRaises(ValueError):
            Range(ge=1, gt=1)
        with self.assertRaises(ValueError):
            Range(le=float("inf"))

    def test_a_tool_without_docstring_or_description_is_refused(self):
        def silent(a: int):
            pass

        with self.assertRaises(TypeError) as caught:
            spec_from_function(silent)
        self.assertIn("description", str(caught.exception))


class DocstringTest(unittest.TestCase):
    def test_rest_params_describe_properties_and_the_summary_is_the_description(self):
        def fn(ticket_id: str, note: str, limit: int = 5) -> None:
            """Add a note to a ticket.

            The note is visible to the customer.

            :param ticket_id: The ticket, e.g. T-1001.
            :param str note: What to write,
                on more than one line.
            :param limit: Unused.
            :returns: nothing.
            """

        spec = spec_from_function(fn)
        self.assertEqual(spec.description, "Add a note to a ticket.\n\nThe note is visible to the customer.")
        properties = spec.input_schema["properties"]
        self.assertEqual(properties["ticket_id"]["description"], "The ticket, e.g. T-1001.")
        self.assertEqual(properties["note"]["description"], "What to write, on more than one line.")
        self.assertEqual(properties["limit"]["description"], "Unused.")

    def test_google_args_section_describes_properties(self):
        def fn(ticket_id: str, amount_cents: int) -> None:
            """Issue a credit.

            Args:
                ticket_id: The ticket to credit.
                amount_cents (int): How much, in cents,
                    between 1 and 100000.

            Returns:
                The credit.
            """

        schema = schema_of(fn)
        self.assertEqual(schema["properties"]["ticket_id"]["description"], "The ticket to credit.")
        self.assertEqual(
            schema["properties"]["amount_cents"]["description"], "How much, in cents, between 1 and 100000."
        )
        self.assertEqual(spec_from_function(fn).description, "Issue a credit.")

    def test_an_annotated_description_wins_over_the_docstring(self):
        def fn(a: Annotated[str, "From the annotation."]) -> None:
            """Doc.

            :param a: From the docstring.
            """

        self.assertEqual(schema_of(fn)["properties"]["a"]["description"], "From the annotation.")


class ContextTest(unittest.TestCase):
    def test_ctx_parameter_is_injected_and_hidden_from_the_schema(self):
        def by_name(a: int, ctx) -> None:  # noqa: ANN001
            """By name."""

        def by_annotation(a: int, context: CallContext) -> None:
            """By annotation."""

        for fn in (by_name, by_annotation):
            with self.subTest(fn=fn.__name__):
                schema = schema_of(fn)
                self.assertEqual(list(schema["properties"]), ["a"])
                self.assertEqual(schema["required"], ["a"])

    def test_the_handler_passes_the_context_under_the_parameter_name(self):
        def fn(a: int, context: CallContext) -> dict:
            """Echo the tool name."""
            return {"a": a, "tool": context.tool}

        ctx = CallContext(call_id="c1", tool="fn", actor=Actor(id="u", tenant="t"))
        self.assertEqual(handler_for(fn)({"a": 1}, ctx), {"a": 1, "tool": "fn"})


class DecoratorTest(unittest.TestCase):
    def test_the_decorated_function_stays_callable_and_carries_its_spec(self):
        @tool(effect="write", required_permission="tickets:write", idempotency_key="action_id", timeout_ms=500)
        def add_note(ticket_id: str, action_id: str, note: str = "") -> dict:
            """Add a note."""
            return {"ticket_id": ticket_id, "note": note}

        self.assertEqual(add_note("T-1", "a" * 8, note="hi"), {"ticket_id": "T-1", "note": "hi"})
        self.assertEqual(add_note.spec.name, "add_note")
        self.assertIs(add_note.spec.effect, Effect.WRITE)
        self.assertEqual(add_note.spec.required_permission, "tickets:write")
        self.assertEqual(add_note.spec.timeout_ms, 500)
        self.assertEqual(add_note.spec.input_schema["required"], ["ticket_id", "action_id"])

    def test_bare_decorator_and_overrides(self):
        @tool
        def plain(a: int) -> int:
            """Plain."""
            return a

        @tool(name="ns.renamed", description="Renamed.", title="Renamed tool")
        def original(a: int) -> int:
            """Ignored."""
            return a

        self.assertEqual(plain.spec.name, "plain")
        self.assertEqual((original.spec.name, original.spec.description, original.spec.title),
                         ("ns.renamed", "Renamed.", "Renamed tool"))

    def test_a_bad_signature_fails_at_decoration_time(self):
        with self.assertRaises(TypeError):
            @tool
            def bad(data: bytes) -> None:
                """Bad."""

    def test_handler_rebuilds_dataclasses_enums_and_tuples_from_json(self):
        seen = {}

        @tool
        def place(at: Point, priority: Priority, pair: Tuple[int, str], segment: Optional[Segment] = None) -> dict:
            """Place something."""
            seen.update(at=at, priority=priority, pair=pair, segment=segment)
            return {"ok": True}

        arguments = {"at": {"x": 1}, "priority": "high", "pair": [1, "a"],
                     "segment": {"start": {"x": 0}, "end": {"x": 2, "y": 3}}}
        self.assertEqual(place.handler(arguments), {"ok": True})
        self.assertEqual(seen["at"], Point(1, 0))
        self.assertIs(seen["priority"], Priority.HIGH)
        self.assertEqual(seen["pair"], (1, "a"))
        self.assertEqual(seen["segment"], Segment(Point(0), Point(2, 3)))

    def test_handler_gives_back_the_enum_member_a_literal_names(self):
        seen = []

        def paint(color: Literal[Priority.HIGH, "none"], spare: Optional[Literal[Priority.LOW]] = None):
            """Literal enum members arrive as their JSON values."""
            seen.append((color, spare))

        self.assertEqual(schema_of(paint)["properties"]["color"]["enum"], ["high", "none"])
        handler_for(paint)({"color": "high", "spare": "low"})
        handler_for(paint)({"color": "none"})
        self.assertEqual(seen, [(Priority.HIGH, Priority.LOW), ("none", None)])
        self.assertIs(seen[0][0], Priority.HIGH)

    def test_handler_picks_the_union_member_the_json_fits(self):
        seen = []

        @tool
        def shape(item: Union[Point, Segment, int]) -> None:
            """Shape."""
            seen.append(item)

        shape.handler({"item": {"start": {"x": 1}, "end": {"x": 2}}})
        shape.handler({"item": {"x": 5, "y": 6}})
        shape.handler({"item": 7})
        self.assertEqual(seen, [Segment(Point(1), Point(2)), Point(5, 6), 7])

    def test_a_dataclass_result_is_handed_back_as_is_and_written_as_json_by_the_registry(self):
        from agent_lab.calls import ToolCall
        from agent_lab.registry import Registry

        @tool
        def report() -> Report:
            """Report."""
            return Report(total=2, names=["a", "b"])

        self.assertEqual(report.handler({}), Report(total=2, names=["a", "b"]))  # one walk: the registry's
        self.assertEqual(report.spec.output_schema["required"], ["total", "names"])
        with Registry() as registry:
            registry.register(report.spec, report.handler)
            result = registry.invoke(ToolCall("report", {}), actor=Actor(id="u", tenant="t"))
        self.assertEqual(result.output, {"total": 2, "names": ["a", "b"]})

    def test_async_functions_give_async_handlers(self):
        @tool
        async def fetch(a: int, ctx: CallContext) -> dict:
            """Fetch."""
            return {"a": a, "call": ctx.call_id}

        ctx = CallContext(call_id="c9", tool="fetch", actor=Actor(id="u", tenant="t"))
        self.assertEqual(asyncio.run(fetch.handler({"a": 2}, ctx)), {"a": 2, "call": "c9"})

    def test_a_decorated_tool_runs_through_the_registry(self):
        from agent_lab.calls import ToolCall
        from agent_lab.registry import Registry

        @tool(required_permission="demo:read")
        def move(to: Point, priority: Priority = Priority.LOW, ctx: Optional[CallContext] = None) -> dict:
            """Move to a point."""
            return {"x": to.x, "y": to.y, "priority": priority.value, "tool": ctx.tool}

        actor = Actor(id="u1", tenant="t1", permissions={"demo:read"})
        with Registry() as registry:
            registry.register(move.spec, move.handler)
            ok = registry.invoke(ToolCall("move", {"to": {"x": 4}}, "c1"), actor=actor)
            bad = registry.invoke(ToolCall("move", {"to": {"x": "4"}}, "c2"), actor=actor)
        self.assertTrue(ok.ok, ok)
        self.assertEqual(ok.output, {"x": 4, "y": 0, "priority": "low", "tool": "move"})
        self.assertEqual(bad.error.code, "invalid_arguments")


class PublicNamesTest(unittest.TestCase):
    """`agent_lab.signature` became a package of one-job modules; what users import from it stayed."""

    def test_the_names_users_import_from_agent_lab_signature_are_still_there(self):
        import agent_lab
        import agent_lab.jsonforms
        import agent_lab.signature as signature

        for name in signature.__all__:
            self.assertTrue(callable(getattr(signature, name)), name)
        self.assertIs(agent_lab.tool, signature.tool)
        self.assertEqual((agent_lab.Len, agent_lab.Range, agent_lab.Pattern, agent_lab.Describe),
                         (signature.Len, signature.Range, signature.Pattern, signature.Describe))
        self.assertIs(signature.to_json, agent_lab.jsonforms.to_json)  # one JSON form of every type
        self.assertEqual((signature.CONTEXT_PARAMETER_NAME, signature.MAX_REPORTED_VIOLATIONS), ("ctx", 20))

    def test_lint_places_a_decorated_tool_at_the_users_function_not_in_the_package(self):
        from agent_lab.lint.locate import locate_tools
        from agent_lab.registry import Registry

        @tool
        def lookup(ticket_id: str) -> dict:
            """Look a ticket up."""
            return {}

        with Registry() as registry:
            registry.register(lookup.spec, lookup.handler)
            location = locate_tools(registry)["lookup"]
        self.assertEqual(location.path.rpartition("/")[2], "test_signature.py")
        self.assertEqual(location.line, lookup.__code__.co_firstlineno)


if __name__ == "__main__":
    unittest.main()
