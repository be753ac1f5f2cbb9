"""`Validator`: a JSON Schema (draft 2020-12, 2019-09, 7, 6 or 4) compiled once into closures.

Construction does all the schema work (meta-schema check, reference resolution, regex compilation);
`is_valid` then only runs closures and builds nothing, and `errors` walks only the failing parts.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Callable, List, Optional

from ..jsonvalue import find_non_json
from ._compiler import Compiler
from ._graph import repeated_subschemas
from ._dialects import DRAFT_2020_12, builtin_dialect, dialect_label, known_dialects_text
from ._index import SchemaIndex, builtin_document, builtin_index, normalize_uri
from .model import MAX_INSTANCE_DEPTH, MAX_SCHEMA_DEPTH, SchemaError, Violation

__all__ = ["Validator"]

_ROOT_URI = ""


class Validator:
    """Validates JSON instances against one JSON Schema.

    The dialect is the schema's `$schema`: draft 2020-12, 2019-09, draft-07, draft-06 or draft-04
    (their meta-schemas are built in), or a meta-schema passed in `resources`; `dialect` (one of those
    URIs, e.g. `agent_lab.schema.DRAFT_07`) is the dialect of a schema without `$schema`, 2020-12 unless
    given. Each dialect keeps its own semantics, and a document a reference reaches is read in its own
    dialect (or, without `$schema`, in the root schema's). `resources` maps URIs to schema documents that
    references may name (nothing is ever fetched). `format_assertion=True` makes `format` an assertion
    (it is an annotation by default, as the specifications say). Validators are thread-safe.

    No instance makes a call's work more than polynomial in (schema size x instance size): the
    subschemas one call could check twice on the same value (shared, recursive, or asked again by
    `unevaluated*`) check each value once per call, see `_call_state`.

    Each pattern (`pattern`, `patternProperties`, `propertyNames`) runs on the engine
    `regex_safety` picks: Python's re when it is proven linear for the pattern, else the package's
    linear-time matcher. `patterns` lists every one with its JSON Pointer and verdict; a pattern
    neither engine makes safe still runs (`engine` "unsafe"), and `ToolSpec` refuses such a pattern
    in a tool's input schema.
    """

    dialect: str
    """The dialect of the root schema: its `$schema`, else the `dialect` argument, else 2020-12."""

    def __init__(self, schema: Mapping | bool, *, dialect: Optional[str] = None,
                 resources: Optional[Mapping[str, Any]] = None, format_assertion: bool = False) -> None:
        self.schema = schema
        self._max_depth = MAX_INSTANCE_DEPTH
        self._build(schema, resources, format_assertion, trusted=False, dialect=dialect)
        self._sealed = True

    @classmethod
    def _trusted(cls, schema: Any, memoise: frozenset = frozenset()) -> "Validator":
        """A validator for a built-in meta-schema: no meta-schema check (it is the meta-schema).
        `memoise`: as for `_with_memo_hint`."""
        validator = cls.__new__(cls)
        validator.schema = schema
        validator._max_depth = MAX_SCHEMA_DEPTH  # it validates schemas, which may nest deeper
        validator._build(schema, None, False, trusted=True, memoise=memoise)
        validator._sealed = True
        return validator

    @classmethod
    def _with_memo_hint(cls, schema: Any, memoise: frozenset) -> "Validator":
        """`Validator(schema)`, for a schema shipped with the package whose compilation is known to
        memoise the subschemas at the locations `memoise` names (`_graph.repeated_subschemas`).

        The set is only known once the schema is compiled, so a schema that has any is compiled twice;
        with the set given, the first compilation memoises it already and, when what it finds is that
        set, is the only one (the meta-schema and the case schema: about 4 ms of a tool-eval run). A
        hint that does not match (out of date, or in a process that compiled equal self-contained
        subschemas before: those are then shared, never memoised) costs the second compilation,
        never a different validator; a test keeps the package's hints current."""
        validator = cls.__new__(cls)
        validator.schema = schema
        validator._max_depth = MAX_INSTANCE_DEPTH
        validator._build(schema, None, False, trusted=False, memoise=memoise)
        validator._sealed = True
        return validator

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_sealed"):
            raise AttributeError(f"a Validator cannot change once built (it may be shared: see "
                                 f"agent_lab.schema.shared_validator); cannot set {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Validator cannot change once built; cannot delete {name!r}")

    # -- construction --------------------------------------------------------------------------
    def _build(self, schema: Any, resources: Optional[Mapping[str, Any]], format_assertion: bool,
               *, trusted: bool, dialect: Optional[str] = None, memoise: frozenset = frozenset()) -> None:
        root = _plain_schema(schema, "the schema")
        if dialect is not None and not isinstance(dialect, str):
            raise SchemaError(f"dialect must be a $schema URI string, not a Python {type(dialect).__name__}")
        declared = root.get("$schema") if isinstance(root, dict) else None
        root_dialect = declared if isinstance(declared, str) else (dialect or DRAFT_2020_12)
        known = builtin_dialect(root_dialect)
        self.dialect = known.uri if known is not None else root_dialect
        index = builtin_index().copy(default_dialect=root_dialect)
        user_documents = {}
        if resources is not None and not isinstance(resources, Mapping):
            raise SchemaError("resources must map URI strings to schema documents")
        for uri, document in (resources or {}).items():
            if not isinstance(uri, str):
                raise SchemaError("resources must map URI strings to schema documents")
            plain = _plain_schema(document, f"resource {uri!r}")
            index.register(plain, uri)
            user_documents[normalize_uri(uri)] = plain
        for uri, plain in user_documents.items():
            index.add_document(plain, uri, label=uri)
        index.add_document(root, _ROOT_URI, label="")
        if not trusted:
            _check_against_metaschema(root, index, resources, "the schema", root_dialect)
        checked = set()

        def check_referenced_document(uri: str) -> None:
            if trusted or uri in checked or uri not in user_documents:
                return
            checked.add(uri)
            _check_against_metaschema(user_documents[uri], index, resources, f"resource {uri!r}", root_dialect)

        dynamic = index.uses_dynamic_references(_ROOT_URI)
        # The subschemas a hint names (`_with_memo_hint`) are memoised from the first compilation on;
        # what it finds to memoise is the same whatever it memoised (the memo changes checks, not
        # which subschema applies which), so an accurate hint leaves nothing to compile again.
        hinted = frozenset(key for key, place in index.places.items() if place.location in memoise) \
            if memoise else frozenset()
        try:
            compiler = Compiler(index, format_assertion=format_assertion, dynamic=dynamic,
                                on_document=check_referenced_document, memoised=hinted)
            node = compiler.compile_root(root, _ROOT_URI)
            repeated = repeated_subschemas(compiler, node)
            if repeated != hinted:  # compile again, memoising what one call could otherwise check repeatedly
                compiler = Compiler(index, format_assertion=format_assertion, dynamic=dynamic,
                                    on_document=check_referenced_document, memoised=repeated)
                node = compiler.compile_root(root, _ROOT_URI)
        except RecursionError:
            raise SchemaError("schema is nested too deeply to compile") from None
        self._state = compiler.state
        self.patterns = tuple(compiler.patterns.values())
        self._root = node
        self._check = node.check
        self._proves_json = node.proves_json and self._state is None
        # Deliberately shadows the `is_valid` method with a per-instance closure, so `v.is_valid(x)` is one
        # plain call (no bound method, no dispatch); the method stays for unbound calls and the docs.
        self.is_valid = self._make_is_valid(node.check, node.proves_json)  # type: ignore[method-assign, assignment]

    def _make_is_valid(self, check: Callable[[Any], bool], proves_json: bool) -> Callable[[object], bool]:
        state = self._state
        max_depth = self._max_depth
        if state is not None:
            def is_valid_with_call_state(instance: object) -> bool:
                if not plain_json(instance, max_depth):
                    return False
                try:
                    return check(instance)
                except RecursionError:
                    return False
                finally:
                    state.end()

            return is_valid_with_call_state
        if proves_json:
            # The compiled checks only accept plain JSON values here (exact types, bounded depth).
            return check

        def is_valid(instance: object) -> bool:
            if not plain_json(instance, max_depth):
                return False
            try:
                return check(instance)
            except RecursionError:
                return False

        return is_valid

    # -- validation ----------------------------------------------------------------------------
    def is_valid(self, instance: object) -> bool:
        """True when `instance` is a JSON value that satisfies the schema. Builds no error objects.

        Each Validator stores a closure specialised for its schema under this name, so `v.is_valid(x)`
        calls that closure directly; this method only serves unbound calls (`Validator.is_valid(v, x)`).
        """
        return self.__dict__["is_valid"](instance)

    def errors(self, instance: object, *, limit: Optional[int] = None,
               known_invalid: bool = False) -> List[Violation]:
        """Every violation, in a deterministic order (schema keyword order, then instance order).

        With `limit`, stop once that many are found: the result is the first `limit` violations of
        the full list, and finding them costs no more than checking a valid instance of the same
        size (a caller that reports 20 asks for 21, to know whether there are more).

        `known_invalid=True` says that `is_valid(instance)` has just answered False for this very,
        unchanged instance: the whole-instance check that `errors` otherwise runs first (to answer []
        for a valid one at the cost of `is_valid`) is skipped, so a caller that asks `is_valid` first
        pays for one check and one collection per refusal, not two checks. Given for an instance that
        is valid after all, the result is one generic violation, never an empty list.

        A subschema that several keywords apply to one place in the instance (a definition two
        `allOf` branches both `$ref`) reports its violations there once, under the first keyword
        path that reached it, so the list never grows with the number of paths into a recursive schema.
        """
        if limit is not None and not (type(limit) is int and limit >= 1) and (
                isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):  # an exact int: one test
            raise ValueError(f"limit must be a positive integer or None, not {limit!r}")
        try:
            return self._violations(instance, limit, known_invalid=known_invalid)
        except RecursionError:
            return [Violation("", "", "$ref", "value could not be validated: the schema's references nest "
                                              "too deeply for it.")]

    def _violations(self, instance: object, limit: Optional[int] = None, *,
                    known_invalid: bool = False) -> List[Violation]:
        """`errors`, except that running out of Python stack raises RecursionError."""
        state = self._state
        try:
            max_depth = self._max_depth
            plain = None if self._proves_json else plain_json(instance, max_depth)
            if plain is not False and not known_invalid and self._check(instance):
                return []
            if plain is None:
                plain = plain_json(instance, max_depth)
            problem = None if plain else find_non_json(instance, max_depth=max_depth, explain=_why_no_json_form)
            if problem is not None:
                pointer, reason = problem
                return [Violation(pointer, "", "json", _capitalised(reason) + ".")]
            if limit is None:
                out: List[Violation] = []
                self._root.collect(instance, "", "", out)
            else:
                first = _FirstViolations()
                first.limit = limit
                try:
                    self._root.collect(instance, "", "", first)
                except _EnoughViolations:
                    pass
                out = first[:]  # a plain list (a slice of a list subclass is one)
            if not out:
                out.append(Violation("", "", "schema", "value does not satisfy the schema"))
            return out
        finally:
            if state is not None:
                state.end()


class _EnoughViolations(Exception):
    """Raised by _FirstViolations when it is full: unwinds the collection (nothing catches it on the way)."""


class _FirstViolations(list):
    """The violations list of `errors(limit=...)`: collecting stops at the `limit`-th append.

    Made on every refusal, so it is made cheaply: no `__init__` of its own (the caller sets `limit`
    on the slot; a Python `__init__` is a call from C, and `super()` builds an object), and `append`
    calls `list.append` directly."""

    __slots__ = ("limit",)
    limit: int

    def append(self, violation: Violation) -> None:
        _list_append(self, violation)
        if len(self) >= self.limit:
            raise _EnoughViolations()


_list_append = list.append


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---------------------------------------------------------------------------------------------
# instance and schema checks
# ---------------------------------------------------------------------------------------------

def _why_no_json_form(value: Any) -> Optional[str]:
    """`jsonforms.why_no_json_form`, imported on the way to an error message only."""
    from ..jsonforms import why_no_json_form

    return why_no_json_form(value)


def plain_json(value: object, depth: int) -> bool:
    """Fast yes/no version of `jsonvalue.find_non_json` for `is_valid` (same rules, same depth)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is dict:
        if depth <= 0:
            return False
        depth -= 1
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str and not issubclass(type(key), str):  # (type(): never its __class__)
                return False
            item_kind = type(item)
            if item_kind is str or item_kind is int or item_kind is bool or item is None:
                continue
            if not plain_json(item, depth):
                return False
        return True
    if kind is list:
        if depth <= 0:
            return False
        depth -= 1
        for item in value:  # type: ignore[attr-defined]
            item_kind = type(item)
            if item_kind is str or item_kind is int or item_kind is bool or item is None:
                continue
            if not plain_json(item, depth):
                return False
        return True
    if kind is float:
        return value - value == 0.0  # type: ignore[operator]  # False for NaN and the infinities
    return find_non_json(value, max_depth=depth) is None


def _plain_schema(schema: Any, what: str) -> Any:
    """Return the schema as plain JSON (Mappings and tuples converted); SchemaError if it is not JSON."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{what} must be a JSON object or a boolean, not a Python {type(schema).__name__}")
    if find_non_json(schema, max_depth=MAX_SCHEMA_DEPTH) is None:
        return schema
    converted = _convert(schema, MAX_SCHEMA_DEPTH + 1)
    problem = find_non_json(converted, max_depth=MAX_SCHEMA_DEPTH)
    if problem is not None:
        raise SchemaError(f"{what} is not JSON: {problem[1]}")
    return converted


def _convert(value: Any, depth: int) -> Any:
    if depth <= 0:
        return value
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    if isinstance(value, dict):
        return {key: _convert(item, depth - 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_convert(item, depth - 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return value
    return value


# ---------------------------------------------------------------------------------------------
# meta-schema validation
# ---------------------------------------------------------------------------------------------

DRAFT_2020_12_MEMOISED = frozenset({"https://json-schema.org/draft/2020-12/schema#",
                                    "https://json-schema.org/draft/2020-12/meta/applicator#/$defs/schemaArray"})
"""Where the 2020-12 meta-schema's compilation memoises (`Validator._with_memo_hint`)."""


@lru_cache(maxsize=1)
def draft_2020_12_validator() -> Validator:
    """The built-in meta-schema compiled with this very validator, once, on first use."""
    return Validator._trusted(builtin_document(DRAFT_2020_12), DRAFT_2020_12_MEMOISED)


def _check_against_metaschema(schema: Any, index: SchemaIndex, resources: Optional[Mapping[str, Any]],
                              what: str, default_dialect: str = DRAFT_2020_12) -> None:
    """Raise SchemaError (saying where) when `schema` is not valid against its dialect's meta-schema."""
    if isinstance(schema, bool):
        return
    declared = schema.get("$schema", default_dialect)
    if not isinstance(declared, str):
        declared = default_dialect  # a $schema that is not a string: the meta-schema check says so
    dialect = normalize_uri(declared)
    if dialect == DRAFT_2020_12:
        meta_validator = draft_2020_12_validator()
    elif builtin_document(dialect) is not None:
        meta_validator = _builtin_meta(dialect)
    else:
        meta = index.resource(dialect)
        if meta is None:
            said = "declares $schema" if "$schema" in schema else "is read as dialect"
            raise SchemaError(f"{what} {said} {declared!r}, which is not a dialect this validator knows "
                              f"({known_dialects_text()}) and not a meta-schema passed in resources=")
        meta_validator = _custom_metaschema_validator(dialect, meta, resources)
    try:
        violations = meta_validator._violations(schema, 1)  # only the first is reported
    except RecursionError:
        raise SchemaError(f"{what} has subschemas nested too deeply to check against its meta-schema "
                          "(Python's recursion limit); flatten it or move parts into $defs") from None
    if violations:
        first = violations[0]
        raise SchemaError(f"{what} is not a valid {dialect_label(declared)} schema at {first.instance_path or '/'}: "
                          f"{first.message} (meta-schema rule {first.keyword_path or '/'})")


_metaschemas_in_progress = threading.local()


def _custom_metaschema_validator(uri: str, meta: Any, resources: Optional[Mapping[str, Any]]) -> Validator:
    """Compile a meta-schema from resources=; one that describes itself is checked only against 2020-12."""
    building = getattr(_metaschemas_in_progress, "uris", None)
    if building is None:
        building = _metaschemas_in_progress.uris = set()
    if uri in building:  # a self-describing meta-schema: its own check is already under way
        return draft_2020_12_validator()
    building.add(uri)
    try:
        return Validator(meta, resources=resources)
    finally:
        building.discard(uri)


@lru_cache(maxsize=16)
def _builtin_meta(uri: str) -> Validator:
    return Validator._trusted(builtin_document(uri))
