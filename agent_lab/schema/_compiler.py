"""Turn a schema (and the documents it references) into a tree of compiled `Node`s, once.

The compiler follows `$ref`, `$dynamicRef` and `$recursiveRef` through the `SchemaIndex`, compiles
every subschema exactly once (shared nodes make recursive schemas finite), chooses for each schema
resource the keyword table of its dialect (drafts 4 to 7: the dialect's table; 2019-09 and 2020-12: the
vocabularies its meta-schema's `$vocabulary` names), and refuses reference cycles that never consume any
of the instance (they would loop forever at validation time). Every dialect difference is settled here,
once: the compiled closures never ask which dialect they belong to.

What the compiled nodes apply to one another is recorded here and read by `_graph`: it finds the
subschemas one validation call could check more than once on the same value
(`repeated_subschemas`); when there are any, the Validator compiles the schema a second time with
those memoised (`_call_state`), because a compiled node's callers hold its check directly.
Self-contained subschemas are compiled once for every Validator (`_leaves`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from ..jsonvalue import escape_pointer_token
from . import _keywords as keywords
from ._call_state import CallState, ScopeTable
from ._dialects import DRAFT_2019_09, DRAFT_2020_12, Dialect, builtin_dialect, known_dialects_text
from ._index import Place, SchemaIndex, normalize_uri, split_reference
from ._graph import refuse_reference_cycles
from ._leaves import SHARED_LEAVES, json_text, keep_pattern, leaf_key, record_leaf_patterns, shared_leaf
from ._nodes import Kw, Node
from ._shared import SharedTable
from ._uri import pointer_tokens, resolve_uri, split_fragment
from .model import MAX_SCHEMA_NODES, SchemaError

KeywordTable = Dict[str, Callable[..., Optional[Kw]]]

_MAX_METASCHEMA_CHAIN = 16  # custom meta-schemas followed through their own $schema, at most


_SHARED_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "maxLength", "minLength", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties", "required",
    "dependentRequired",
})
"""Keywords whose compile function reads nothing but the keyword's own value: one compiled `Kw` per
(compile function, value) serves every schema (`SHARED_KEYWORDS`)."""
_READS_SIBLINGS = frozenset({keywords.compile_minimum_draft4, keywords.compile_maximum_draft4})
SHARED_KEYWORDS = SharedTable(8192)
_MAX_SHARED_VALUE = 256


def _boolean(value: bool) -> Node:
    node = Node(value, "", "")
    node.finish_boolean(value)
    return node


_BOOLEAN_NODES = {True: _boolean(True), False: _boolean(False)}


def _shared_keyword(compile_keyword: Callable[..., Optional[Kw]], context: Any, value: Any) -> Optional[Kw]:
    """The compiled keyword for this value, shared with every schema that says the same (by JSON text:
    1, 1.0 and true stay apart)."""
    text = json_text(value)
    if text is None or len(text) > _MAX_SHARED_VALUE:  # (a long enum is kept apart: its key would be as long)
        return compile_keyword(context, value)
    key = (compile_keyword, text)
    kw = SHARED_KEYWORDS.get(key)
    if kw is None:
        kw = compile_keyword(context, value)
        if kw is None:
            return None
        kw = SHARED_KEYWORDS.add(key, kw)
    return kw


class DialectTable:
    """The compiled form of a dialect: its keyword table and the flags its compile functions read."""

    __slots__ = ("keywords", "format_asserts", "has_validation", "ref_hides_siblings")

    def __init__(self, keywords: KeywordTable, format_asserts: bool, has_validation: bool,
                 ref_hides_siblings: bool) -> None:
        self.keywords = keywords
        self.format_asserts = format_asserts
        self.has_validation = has_validation
        self.ref_hides_siblings = ref_hides_siblings


class Compiler:
    """Compiles schemas against one index; holds the shared state of one Validator."""

    def __init__(self, index: SchemaIndex, *, format_assertion: bool, dynamic: bool,
                 on_document: Optional[Callable[[str], None]] = None,
                 memoised: FrozenSet[int] = frozenset()) -> None:
        self.index = index
        self.format_assertion = format_assertion
        self.dynamic = dynamic
        self.on_document = on_document
        self.nodes: Dict[int, Node] = {}
        self.edges: Dict[int, List[Node]] = {}  # in place: the subschemas a node applies to the same value
        self.applied: Dict[int, List[Node]] = {}  # every subschema a node applies, to the value or a part
        self.rechecked: Dict[int, List[Node]] = {}  # subschemas a node's annotations check again (contains)
        self.annotation_readers: List[Node] = []  # nodes with unevaluatedProperties / unevaluatedItems
        # (node, anchor name or None for $recursiveRef, the target it names statically)
        self.dynamic_sites: List[Tuple[Node, Optional[str], Node]] = []
        self.dynamic_names: set = set()
        self.dynamic_targets: Dict[Tuple[str, str], Node] = {}
        self.recursive_targets: Dict[str, Node] = {}
        # The subschemas (by id) this compilation memoises, found by a first compilation's
        # `repeated_subschemas`; the call state exists when it memoises or tracks dynamic scope.
        self.memoised = memoised
        self._memo_count = 0
        scopes = ScopeTable(self.dynamic_targets, self.recursive_targets) if dynamic else None
        self.state: Optional[CallState] = (
            CallState(scopes.outermost if scopes is not None else None) if dynamic or memoised else None
        )
        self.uses_recursive_anchors = False
        self._tables: Dict[str, DialectTable] = {}
        self.patterns: Dict[str, Any] = {}  # JSON Pointer -> regex_safety.PatternFinding, for Validator.patterns

    # -- entry points --------------------------------------------------------------------------
    def compile_root(self, schema: Any, base: str) -> Node:
        place = self.index.place_of(schema) or Place(base, normalize_uri(self.index.default_dialect), "")
        root = self.compile(schema, place)
        self._compile_dynamic_targets()
        self._compile_recursive_targets()
        refuse_reference_cycles(self.nodes.values(), self.edges)
        return root

    def compile(self, schema: Any, place: Place) -> Node:
        """Compile one subschema whose own base URI, dialect and location are `place`."""
        if isinstance(schema, bool):
            return self._boolean_node(schema)
        node = self.nodes.get(id(schema))
        if node is not None:
            return node
        if len(self.nodes) >= MAX_SCHEMA_NODES:
            raise SchemaError(
                f"schema is too large: more than {MAX_SCHEMA_NODES} subschemas (at {place.location or '/'})"
            )
        if not isinstance(schema, dict):
            self.nodes[id(schema)] = Node(schema, place.base, place.location)
            raise SchemaError(f"schema at {place.location or '/'} must be an object or a boolean")
        dialect = self._keyword_table(place.dialect, place.location)
        leaf = leaf_key(schema, place, dialect, dynamic=self.dynamic)
        if leaf is not None:
            shared = shared_leaf(leaf, dialect)
            if shared is not None:
                self.nodes[id(schema)] = shared
                record_leaf_patterns(self.patterns, schema, place.location)  # listed at their own pointers
                return shared
        node = Node(schema, place.base, place.location)
        self.nodes[id(schema)] = node
        if self.dynamic and self.index.resources.get(place.base) is schema:
            node.scope_uri = place.base
        table = dialect.keywords
        context = _NodeContext(self, node, schema, place, dialect.format_asserts, dialect.has_validation)
        kws: List[Kw] = []
        late = []
        members = schema.items()
        if dialect.ref_hides_siblings and "$ref" in schema:
            members = {"$ref": schema["$ref"]}.items()  # before 2019-09, $ref's siblings are ignored
        for keyword, value in members:
            compile_keyword = table.get(keyword)
            if compile_keyword is None:
                continue
            if keyword in keywords.LATE_KEYWORDS:
                late.append((compile_keyword, value))
                continue
            if keyword in _SHARED_KEYWORDS and compile_keyword not in _READS_SIBLINGS:
                kw = _shared_keyword(compile_keyword, context, value)
            else:
                kw = compile_keyword(context, value)
            if kw is not None:
                kws.append(kw)
        siblings = list(kws)
        for compile_keyword, value in late:
            kw = compile_keyword(context, value, siblings)
            if kw is not None:
                kws.append(kw)
        memo_number = None
        if id(schema) in self.memoised:
            memo_number = self._memo_count
            self._memo_count += 1
        if leaf is not None:  # no call state: it never memoises and enters no resource
            node.finish(kws)
            node = self.nodes[id(schema)] = SHARED_LEAVES.add(leaf[:5], node)
            return node
        node.finish(kws, state=self.state, dynamic=self.dynamic, memo_number=memo_number)
        return node

    @staticmethod
    def _boolean_node(value: bool) -> Node:
        """`true` and `false` compile to two nodes every schema shares (they hold no state)."""
        return _BOOLEAN_NODES[value]

    # -- references ----------------------------------------------------------------------------
    def resolve(self, reference: str, base: str, location: str) -> Tuple[Any, Place]:
        """Find the schema a reference names, and its place; SchemaError when it is unknown."""
        resource_uri, fragment = split_reference(base, reference)
        resource_uri = normalize_uri(resource_uri)
        document = self.index.resource(resource_uri)
        if document is None:
            raise SchemaError(
                f"cannot resolve reference {reference!r} at {location}: no schema is known as "
                f"{resource_uri or '(the root document)'} (nothing is fetched; pass it in resources=)"
            )
        if self.on_document is not None:
            self.on_document(resource_uri)
        if fragment == "":
            return document, self._place(document, resource_uri)
        if fragment.startswith("/"):
            return self._follow_pointer(document, resource_uri, fragment, reference, location)
        target = self.index.anchors.get((resource_uri, fragment))
        if target is None:
            raise SchemaError(f"cannot resolve reference {reference!r} at {location}: no anchor {fragment!r}")
        return target, self._place(target, resource_uri)

    def _place(self, schema: Any, resource_uri: str) -> Place:
        place = self.index.place_of(schema)
        if place is not None:
            return place
        return Place(resource_uri, normalize_uri(self.index.dialect_of_document(schema)), resource_uri)

    def _follow_pointer(self, document: Any, resource_uri: str, fragment: str, reference: str,
                        location: str) -> Tuple[Any, Place]:
        root_place = self._place(document, resource_uri)
        current = document
        for token in pointer_tokens(fragment):
            try:
                if isinstance(current, list):
                    current = current[int(token)]
                elif isinstance(current, dict):
                    current = current[token]
                else:
                    raise KeyError(token)
            except (KeyError, IndexError, ValueError):
                raise SchemaError(f"cannot resolve reference {reference!r} at {location}: "
                                  f"nothing at {fragment!r}") from None
        known = self.index.place_of(current)
        if known is not None:
            return current, known
        base = root_place.base
        identifier = self.index.rules(root_place.dialect).identifier_of(current) if isinstance(current, dict) else None
        if identifier is not None and not identifier.startswith("#"):
            base = normalize_uri(split_fragment(resolve_uri(base, identifier))[0])
        pointer_text = "/".join(escape_pointer_token(token) for token in pointer_tokens(fragment))
        return current, Place(base, root_place.dialect, f"{root_place.location}#/{pointer_text}".replace("##", "#"))

    def ref_node(self, reference: str, node: Node, location: str) -> Node:
        target, place = self.resolve(reference, node.base, location)
        target_node = self.compile(target, place)
        self.edges.setdefault(id(node), []).append(target_node)
        self.applied.setdefault(id(node), []).append(target_node)
        return target_node

    def _compile_dynamic_targets(self) -> None:
        """Compile every `$dynamicAnchor` a `$dynamicRef` could land on, in any resource compiled."""
        done: set = set()
        while True:
            resources = {node.base for node in list(self.nodes.values())}
            todo = [
                (uri, name) for uri in resources for name in self.dynamic_names
                if (uri, name) in self.index.dynamic_anchors and (uri, name) not in done
            ]
            if not todo:
                return
            for key in todo:
                done.add(key)
                schema = self.index.dynamic_anchors[key]
                self.dynamic_targets[key] = self.compile(schema, self._place(schema, key[0]))

    def _compile_recursive_targets(self) -> None:
        """Compile every resource with `"$recursiveAnchor": true` a `$recursiveRef` could land on."""
        if not self.uses_recursive_anchors:
            return
        while True:
            todo = []
            for uri in {node.base for node in list(self.nodes.values())}:
                resource = self.index.resources.get(uri)
                if uri not in self.recursive_targets and isinstance(resource, dict) \
                        and resource.get("$recursiveAnchor") is True:
                    todo.append(uri)
            if not todo:
                return
            for uri in todo:
                resource = self.index.resources[uri]
                self.recursive_targets[uri] = self.compile(resource, self._place(resource, uri))

    # -- dialects ------------------------------------------------------------------------------
    def _keyword_table(self, dialect: str, location: str) -> DialectTable:
        cached = self._tables.get(dialect)
        if cached is None:
            cached = self._tables[dialect] = self._table_for(dialect, location)
        return cached

    def _table_for(self, dialect: str, location: str) -> DialectTable:
        """A built-in dialect's table; for a custom meta-schema, the vocabularies its `$vocabulary` names,
        or (without one) the table of the dialect its own `$schema` names."""
        seen = set()
        current = dialect
        for _ in range(_MAX_METASCHEMA_CHAIN):
            known = builtin_dialect(current)
            if known is not None and known.table is not None:
                return DialectTable(dict(known.table), self.format_assertion, True, known.ref_hides_siblings)
            if known is not None:
                return self._vocabulary_table(known.vocabularies or frozenset(), known)
            meta = self.index.resource(current)
            if not isinstance(meta, dict):
                break
            declared = meta.get("$vocabulary")
            if isinstance(declared, dict):
                return self._vocabulary_table(self._declared_vocabularies(current, declared),
                                              self.index.rules(current))
            seen.add(current)
            inner = meta.get("$schema")
            if not isinstance(inner, str) or normalize_uri(inner) in seen:
                return self._vocabulary_table(keywords.DEFAULT_VOCABULARIES, self.index.rules(DRAFT_2020_12))
            current = normalize_uri(inner)
        raise SchemaError(f"unsupported $schema {dialect!r} at {location or '/'}: the dialects known are "
                          f"{known_dialects_text()}, and meta-schemas passed in resources=")

    def _vocabulary_table(self, vocabularies: frozenset, family: Dialect) -> DialectTable:
        """The keywords of `vocabularies`; the core vocabulary of the dialect family is always in force."""
        table: KeywordTable = {}
        for vocabulary in sorted(vocabularies):
            table.update(keywords.VOCABULARIES[vocabulary])
        cores = keywords.CORE_VOCABULARIES & vocabularies
        if not cores:
            cores = frozenset({keywords.CORE_2019_09 if family.uri == DRAFT_2019_09 else keywords.CORE})
        for core in sorted(cores):
            table.update(keywords.VOCABULARIES[core])
        asserts = self.format_assertion or keywords.FORMAT_ASSERTION in vocabularies
        has_validation = bool(keywords.VALIDATION_VOCABULARIES & vocabularies)
        return DialectTable(table, asserts, has_validation, family.ref_hides_siblings)

    @staticmethod
    def _declared_vocabularies(dialect: str, declared: dict) -> frozenset:
        chosen = set()
        for vocabulary, required in declared.items():
            if vocabulary in keywords.VOCABULARIES:
                chosen.add(vocabulary)
            elif required is True:
                raise SchemaError(f"meta-schema {dialect!r} requires vocabulary {vocabulary!r}, "
                                  "which this validator does not know")
        return frozenset(chosen)


class _NodeContext:
    """What a keyword compile function may use: the schema object and ways to compile its parts."""

    def __init__(self, compiler: Compiler, node: Node, schema: dict, place: Place, format_asserts: bool,
                 has_validation: bool) -> None:
        self.compiler = compiler
        self.node = node
        self.schema = schema
        self.place = place
        self.format_asserts = format_asserts
        self.has_validation = has_validation
        # The call state when dynamic scope is tracked (references resolve against it), else None.
        self.scope_state = compiler.state if compiler.dynamic else None

    def _child_place(self, schema: Any, tokens: Tuple[Any, ...]) -> Place:
        pointer = "".join("/" + escape_pointer_token(token) for token in tokens)
        location = self.place.location + pointer
        base, dialect = self.place.base, self.place.dialect
        known = self.compiler.index.place_of(schema)
        if known is not None:
            return known
        identifier = self.compiler.index.rules(dialect).identifier_of(schema) if isinstance(schema, dict) else None
        if identifier is not None and not identifier.startswith("#"):
            base = normalize_uri(split_fragment(resolve_uri(base, identifier))[0])
            if isinstance(schema.get("$schema"), str):
                dialect = normalize_uri(schema["$schema"])
        return Place(base, dialect, location)

    def child(self, schema: Any, *tokens: Any) -> Node:
        """Compile a subschema that applies to a part of the instance (a member or an item)."""
        child = self.compiler.compile(schema, self._child_place(schema, tokens))
        self.compiler.applied.setdefault(id(self.node), []).append(child)
        return child

    def definition(self, schema: Any, *tokens: Any) -> Node:
        """Compile a subschema this one only holds (`$defs`): references may apply it, this node never does."""
        return self.compiler.compile(schema, self._child_place(schema, tokens))

    def rechecked(self, child: Node) -> None:
        """Note that this node's annotations check `child` again (`contains` for unevaluatedItems)."""
        self.compiler.rechecked.setdefault(id(self.node), []).append(child)

    def reads_annotations(self) -> None:
        """Note that this node has unevaluatedProperties / unevaluatedItems (they ask its siblings)."""
        self.compiler.annotation_readers.append(self.node)

    def inplace(self, schema: Any, *tokens: Any) -> Node:
        """Compile a subschema that applies to the same instance (allOf, not, if, ...)."""
        child = self.child(schema, *tokens)
        self.compiler.edges.setdefault(id(self.node), []).append(child)
        return child

    def ref(self, reference: str, keyword: str) -> Node:
        return self.compiler.ref_node(reference, self.node, f"{self.place.location or ''}/{keyword}")

    def regex(self, pattern: str, *tokens: Any):
        """Compile an ECMA-262 pattern into a matcher (`.search`); SchemaError (saying where and why)
        when it cannot be used. The engine is the one `regex_safety` picks (Python's re when proven
        safe, else the linear-time matcher); the verdict is recorded for `Validator.patterns`.

        A valid pattern Python's `re` cannot run is still a SchemaError (nothing could validate with
        it), but its message says it is valid, so the author knows to rewrite it rather than fix it.
        """
        from .ecma_regex import EcmaRegexError, EcmaRegexUnsupported
        from .regex_safety import compile_pattern

        where = self.place.location + "".join("/" + escape_pointer_token(token) for token in tokens)
        try:
            matcher, safety = compile_pattern(pattern)
            keep_pattern(self.compiler.patterns, where, pattern, safety)
            return matcher
        except EcmaRegexError as error:
            if isinstance(error, EcmaRegexUnsupported):
                raise SchemaError(f"regular expression at {where} is valid ECMA-262 but not supported here: "
                                  f"{error.reason}") from None
            at = "" if error.position is None else f" (position {error.position})"
            raise SchemaError(f"invalid ECMA-262 regular expression at {where}{at}: {error.reason}") from None

    def format_checker(self, name: str):
        from .formats import FORMAT_CHECKERS

        return FORMAT_CHECKERS.get(name)

    def dynamic_anchor_name(self, reference: str, initial: Node) -> Optional[str]:
        """The anchor name when `$dynamicRef` is dynamic: a plain-name fragment whose target bookends it."""
        _resource, fragment = split_reference(self.place.base, reference)
        if not fragment or fragment.startswith("/"):
            return None
        if not isinstance(initial.schema, dict) or initial.schema.get("$dynamicAnchor") != fragment:
            return None
        if not self.compiler.dynamic:
            return None
        self.compiler.dynamic_names.add(fragment)
        self.compiler.dynamic_sites.append((self.node, fragment, initial))
        return fragment

    def recursive_resolver(self, initial: Node) -> Optional[Callable[[], Node]]:
        """Runtime look-up for `$recursiveRef` (2019-09), or None when it is a plain reference: its target
        is not a resource root saying `"$recursiveAnchor": true`, or no dynamic scope is tracked.

        From the innermost resource of the dynamic scope outwards, each resource that also says
        `"$recursiveAnchor": true` becomes the target; the first one that does not ends the walk."""
        state = self.scope_state
        schema = initial.schema
        if state is None or not isinstance(schema, dict) or schema.get("$recursiveAnchor") is not True:
            return None
        if self.compiler.index.resources.get(initial.base) is not schema:
            return None
        self.compiler.uses_recursive_anchors = True
        self.compiler.dynamic_sites.append((self.node, None, initial))

        def resolve() -> Node:
            target = state.scopes[-1].recursive
            return initial if target is None else target

        return resolve

    def dynamic_resolver(self, name: str, initial: Node) -> Callable[[], Node]:
        """Runtime look-up: the outermost resource in the dynamic scope with a matching $dynamicAnchor."""
        state = self.scope_state
        assert state is not None  # dynamic_anchor_name only names an anchor when scopes are tracked

        def resolve() -> Node:
            return state.scopes[-1].dynamic.get(name, initial)

        return resolve
