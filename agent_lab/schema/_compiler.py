"""Turn a schema (and the documents it references) into a tree of compiled `Node`s, once.

The compiler follows `$ref` and `$dynamicRef` through the `SchemaIndex`, compiles every subschema
exactly once (shared nodes make recursive schemas finite), chooses for each schema resource the keyword
table that its dialect's `$vocabulary` names, and refuses reference cycles that never consume any of
the instance (they would loop forever at validation time).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..jsonvalue import escape_pointer_token
from . import _keywords as keywords
from ._index import DRAFT_2020_12, Place, SchemaIndex, normalize_uri, split_reference
from ._nodes import Kw, Node
from ._uri import pointer_tokens, resolve_uri
from .model import MAX_SCHEMA_NODES, SchemaError

KeywordTable = Dict[str, Callable[..., Optional[Kw]]]


class Compiler:
    """Compiles schemas against one index; holds the shared state of one Validator."""

    def __init__(self, index: SchemaIndex, *, format_assertion: bool, dynamic: bool,
                 on_document: Optional[Callable[[str], None]] = None) -> None:
        self.index = index
        self.format_assertion = format_assertion
        self.dynamic_local = threading.local() if dynamic else None
        self.on_document = on_document
        self.nodes: Dict[int, Node] = {}
        self.edges: Dict[int, List[Node]] = {}
        self.dynamic_names: set = set()
        self.dynamic_targets: Dict[Tuple[str, str], Node] = {}
        self._tables: Dict[str, Tuple[KeywordTable, bool, bool]] = {}
        self._booleans: Dict[bool, Node] = {}
        self.patterns: Dict[str, Any] = {}  # JSON Pointer -> regex_safety.PatternFinding, for Validator.patterns

    # -- entry points --------------------------------------------------------------------------
    def compile_root(self, schema: Any, base: str) -> Node:
        place = self.index.place_of(schema) or Place(base, DRAFT_2020_12, "")
        root = self.compile(schema, place)
        self._compile_dynamic_targets()
        self._refuse_reference_cycles()
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
        node = Node(schema, place.base, place.location)
        self.nodes[id(schema)] = node
        if not isinstance(schema, dict):
            raise SchemaError(f"schema at {place.location or '/'} must be an object or a boolean")
        if self.dynamic_local is not None and self.index.resources.get(place.base) is schema:
            node.scope_uri = place.base
        table, format_asserts, has_validation = self._keyword_table(place.dialect, place.location)
        context = _NodeContext(self, node, schema, place, format_asserts, has_validation)
        kws: List[Kw] = []
        late = []
        for keyword, value in schema.items():
            compile_keyword = table.get(keyword)
            if compile_keyword is None:
                continue
            if keyword in keywords.LATE_KEYWORDS:
                late.append((compile_keyword, value))
                continue
            kw = compile_keyword(context, value)
            if kw is not None:
                kws.append(kw)
        siblings = list(kws)
        for compile_keyword, value in late:
            kw = compile_keyword(context, value, siblings)
            if kw is not None:
                kws.append(kw)
        node.finish(kws, dynamic_local=self.dynamic_local)
        return node

    def _boolean_node(self, value: bool) -> Node:
        """`true` and `false` compile to two shared nodes (Python's booleans are singletons anyway)."""
        node = self._booleans.get(value)
        if node is None:
            node = self._booleans[value] = Node(value, "", "")
            node.finish_boolean(value)
        return node

    # -- references ----------------------------------------------------------------------------
    def resolve(self, reference: str, base: str, location: str) -> Tuple[Any, Place]:
        """Find the schema a reference names, and its place; SchemaError when it is unknown."""
        resource_uri, fragment = split_reference(base, reference)
        resource_uri = normalize_uri(resource_uri)
        document = self.index.resources.get(resource_uri)
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
        return Place(resource_uri, DRAFT_2020_12, resource_uri)

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
        if isinstance(current, dict) and isinstance(current.get("$id"), str):
            base = normalize_uri(resolve_uri(base, current["$id"]))
        pointer_text = "/".join(escape_pointer_token(token) for token in pointer_tokens(fragment))
        return current, Place(base, root_place.dialect, f"{root_place.location}#/{pointer_text}".replace("##", "#"))

    def ref_node(self, reference: str, node: Node, location: str) -> Node:
        target, place = self.resolve(reference, node.base, location)
        target_node = self.compile(target, place)
        self.edges.setdefault(id(node), []).append(target_node)
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

    # -- cycles --------------------------------------------------------------------------------
    def _refuse_reference_cycles(self) -> None:
        """Refuse in-place cycles (a $ref chain back to itself without descending into the instance)."""
        state: Dict[int, int] = {}  # 1 = on the current path, 2 = finished
        for start in list(self.nodes.values()):
            if state.get(id(start)) == 2:
                continue
            stack = [(start, iter(self.edges.get(id(start), ())))]
            path = [start]
            state[id(start)] = 1
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    path.pop()
                    state[id(node)] = 2
                    continue
                mark = state.get(id(child))
                if mark == 1:
                    loop = path[path.index(child):] + [child]
                    shown = " -> ".join(item.location or "/" for item in loop)
                    raise SchemaError(f"schema has a reference cycle that never consumes the instance: {shown}")
                if mark is None:
                    state[id(child)] = 1
                    path.append(child)
                    stack.append((child, iter(self.edges.get(id(child), ()))))

    # -- dialects ------------------------------------------------------------------------------
    def _keyword_table(self, dialect: str, location: str) -> Tuple[KeywordTable, bool, bool]:
        cached = self._tables.get(dialect)
        if cached is None:
            vocabularies = self._vocabularies(dialect, location, seen=set())
            table: KeywordTable = {}
            for vocabulary in vocabularies:
                table.update(keywords.VOCABULARIES[vocabulary])
            table.update(keywords.VOCABULARIES[keywords.CORE])
            asserts = self.format_assertion or keywords.FORMAT_ASSERTION in vocabularies
            cached = self._tables[dialect] = (table, asserts, keywords.VALIDATION in vocabularies)
        return cached

    def _vocabularies(self, dialect: str, location: str, seen: set) -> frozenset:
        if dialect == DRAFT_2020_12:
            return keywords.DEFAULT_VOCABULARIES
        meta = self.index.resources.get(dialect)
        if not isinstance(meta, dict):
            raise SchemaError(f"unsupported $schema {dialect!r} at {location or '/'}: only draft 2020-12 "
                              "and meta-schemas passed in resources= are known")
        declared = meta.get("$vocabulary")
        if not isinstance(declared, dict):
            inner = meta.get("$schema")
            if isinstance(inner, str) and normalize_uri(inner) not in seen and normalize_uri(inner) != dialect:
                seen.add(dialect)
                return self._vocabularies(normalize_uri(inner), location, seen)
            return keywords.DEFAULT_VOCABULARIES
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
        self.dynamic_local = compiler.dynamic_local

    def _child_place(self, schema: Any, tokens: Tuple[Any, ...]) -> Place:
        pointer = "".join("/" + escape_pointer_token(token) for token in tokens)
        location = self.place.location + pointer
        base, dialect = self.place.base, self.place.dialect
        known = self.compiler.index.place_of(schema)
        if known is not None:
            return known
        if isinstance(schema, dict) and isinstance(schema.get("$id"), str):
            base = normalize_uri(resolve_uri(base, schema["$id"]))
            if isinstance(schema.get("$schema"), str):
                dialect = normalize_uri(schema["$schema"])
        return Place(base, dialect, location)

    def child(self, schema: Any, *tokens: Any) -> Node:
        """Compile a subschema that applies to a part of the instance (a member or an item)."""
        return self.compiler.compile(schema, self._child_place(schema, tokens))

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
        from .regex_safety import PatternFinding, compile_pattern

        where = self.place.location + "".join("/" + escape_pointer_token(token) for token in tokens)
        try:
            matcher, safety = compile_pattern(pattern)
            self.compiler.patterns.setdefault(where, PatternFinding(where, pattern, safety))
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
        if self.compiler.dynamic_local is None:
            return None
        self.compiler.dynamic_names.add(fragment)
        return fragment

    def dynamic_resolver(self, name: str, initial: Node) -> Callable[[], Node]:
        """Runtime look-up: the outermost resource in the dynamic scope with a matching $dynamicAnchor."""
        local = self.compiler.dynamic_local
        assert local is not None  # dynamic_anchor_name only names an anchor when scopes are tracked
        targets = self.compiler.dynamic_targets

        def resolve() -> Node:
            for uri in local.stack:
                found = targets.get((uri, name))
                if found is not None:
                    return found
            return initial

        return resolve
