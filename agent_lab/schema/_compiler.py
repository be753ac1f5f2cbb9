"""Turn a schema (and the documents it references) into a tree of compiled `Node`s, once.

The compiler follows `$ref`, `$dynamicRef` and `$recursiveRef` through the `SchemaIndex`, compiles
every subschema exactly once (shared nodes make recursive schemas finite), chooses for each schema
resource the keyword table of its dialect (drafts 4 to 7: the dialect's table; 2019-09 and 2020-12: the
vocabularies its meta-schema's `$vocabulary` names), and refuses reference cycles that never consume any
of the instance (they would loop forever at validation time). Every dialect difference is settled here,
once: the compiled closures never ask which dialect they belong to.

It also finds the subschemas one validation call could check more than once on the same value
(`repeated_subschemas`); when there are any, the Validator compiles the schema a second time with
those memoised (`_call_state`), because a compiled node's callers hold its check directly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from ..jsonvalue import escape_pointer_token
from . import _keywords as keywords
from ._shared import SharedTable
from ._call_state import CallState, ScopeTable
from ._dialects import DRAFT_2019_09, DRAFT_2020_12, Dialect, builtin_dialect, known_dialects_text
from ._index import Place, SchemaIndex, normalize_uri, split_reference
from ._nodes import Kw, Node
from ._uri import pointer_tokens, resolve_uri, split_fragment
from .model import MAX_SCHEMA_NODES, SchemaError

KeywordTable = Dict[str, Callable[..., Optional[Kw]]]

LEAF_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxProperties",
    "minProperties", "required", "dependentRequired",
})
"""Keywords whose compiled form depends only on their own value (and siblings in this set)."""
_NOT_SHARED = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$schema", "$vocabulary",
                         "$ref", "$dynamicRef", "$recursiveRef", "patternProperties", "prefixItems"})
"""Keywords that make a subschema a resource, an anchor or a reference, or that a shared keyword
would read as a sibling (`additionalProperties` reads `patternProperties`, `items` `prefixItems`)."""
_DESCENDING = ("items", "additionalProperties")
"""Single-subschema keywords that apply their subschema to parts of the value (items, members)."""
_MAX_SHARED_DEPTH = 32
SHARED_LEAVES = SharedTable(4096)
"""Compiled leaf subschemas shared by every Validator (see `Compiler._leaf_key`)."""
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


def _json_text(value: Any) -> Any:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _shared_keyword(compile_keyword: Callable[..., Optional[Kw]], context: Any, value: Any) -> Optional[Kw]:
    """The compiled keyword for this value, shared with every schema that says the same (by JSON text:
    1, 1.0 and true stay apart)."""
    text = _json_text(value)
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


class _Table:
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
        self._tables: Dict[str, _Table] = {}
        self.patterns: Dict[str, Any] = {}  # JSON Pointer -> regex_safety.PatternFinding, for Validator.patterns

    # -- entry points --------------------------------------------------------------------------
    def compile_root(self, schema: Any, base: str) -> Node:
        place = self.index.place_of(schema) or Place(base, normalize_uri(self.index.default_dialect), "")
        root = self.compile(schema, place)
        self._compile_dynamic_targets()
        self._compile_recursive_targets()
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
        if not isinstance(schema, dict):
            self.nodes[id(schema)] = Node(schema, place.base, place.location)
            raise SchemaError(f"schema at {place.location or '/'} must be an object or a boolean")
        dialect = self._keyword_table(place.dialect, place.location)
        leaf_key = self._leaf_key(schema, place, dialect)
        if leaf_key is not None:
            shared = self._shared_node(leaf_key, dialect)
            if shared is not None:
                self.nodes[id(schema)] = shared
                self._record_shared_patterns(schema, place.location)
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
        if leaf_key is not None:  # no call state: it never memoises and enters no resource
            node.finish(kws)
            node = self.nodes[id(schema)] = SHARED_LEAVES.add(leaf_key[:5], node)
            return node
        node.finish(kws, state=self.state, dynamic=self.dynamic, memo_number=memo_number)
        return node

    def _leaf_key(self, schema: dict, place: Place, dialect: _Table) -> Optional[Tuple[Any, ...]]:
        """The key a self-contained subschema is shared by (`SHARED_LEAVES`), or None when it is not one.

        Self-contained: its keywords compile from their own values (`type`, bounds, `enum`,
        `pattern`, `format`, `required`, ...) or descend into parts of the instance through
        subschemas that are self-contained too (`properties`, a single-schema `items`,
        `additionalProperties` without `patternProperties`); it names no resource, anchor or
        reference, and is read in a built-in dialect by a compiler that tracks no dynamic scope. Its
        compiled node then depends on nothing but those keywords' values (in order) and the dialect's
        flags, never on where it sits or in which schema, so every equal one in every schema can share
        one node; and since nothing in it applies a subschema to the value it was given, it never
        needs the per-call memo (`repeated_subschemas`). Words the dialect does not compile
        (`description`, `title`, unknown keywords) are left out of the key; the `format` checkers it
        was compiled with are in it (the table of checkers can change)."""
        if self.dynamic or builtin_dialect(place.dialect) is None:
            return None
        checkers: List[Any] = []
        text = self._content_key(schema, dialect, checkers, 0)
        if text is None:
            return None
        # Indexed by the text's digest (the text itself could be as long as the schema); a hit is
        # confirmed against the found node's own schema (`_shared_node`).
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        return (place.dialect, dialect.format_asserts, dialect.has_validation, digest, tuple(checkers), text)

    def _shared_node(self, key: Tuple[Any, ...], dialect: _Table) -> Optional[Node]:
        """The shared node for `key` (from `_leaf_key`), once its own content is confirmed equal."""
        found = SHARED_LEAVES.get(key[:5])
        if found is None or self._content_key(found.schema, dialect, [], 0) != key[5]:
            return None
        return found

    def _content_key(self, schema: Any, dialect: _Table, checkers: List[Any], depth: int) -> Optional[str]:
        if isinstance(schema, bool):
            return "true" if schema else "false"
        if not isinstance(schema, dict) or depth > _MAX_SHARED_DEPTH or not _NOT_SHARED.isdisjoint(schema.keys()):
            return None
        table = dialect.keywords
        parts: List[Any] = []
        for keyword, value in schema.items():
            if keyword in LEAF_KEYWORDS:  # (draft-04's `maximum` reads `exclusiveMaximum`, which has no entry)
                parts.append((keyword, value))
                if keyword == "format" and dialect.format_asserts:
                    from .formats import FORMAT_CHECKERS

                    checkers.append(FORMAT_CHECKERS.get(value) if isinstance(value, str) else None)
            elif keyword not in table:
                continue  # not compiled: an annotation or an unknown word
            elif keyword == "properties" and isinstance(value, dict):
                members = []
                for name, child in value.items():
                    key = self._content_key(child, dialect, checkers, depth + 1)
                    if key is None:
                        return None
                    members.append(_json_text(name) + ":" + key)
                parts.append('["properties",{' + ",".join(members) + "}]")
                continue
            elif keyword in _DESCENDING and isinstance(value, (dict, bool)):
                key = self._content_key(value, dialect, checkers, depth + 1)
                if key is None:
                    return None
                parts.append(f'["{keyword}",{key}]')
                continue
            else:
                return None
            text = _json_text([keyword, value])
            if text is None:
                return None
            parts[-1] = text
        return "[" + ",".join(parts) + "]"  # JSON, whose nested parts are the children's own texts

    def _record_shared_patterns(self, schema: Any, location: str) -> None:
        """A shared node's patterns are still listed in this validator's `patterns`, each at its own pointer."""
        if not isinstance(schema, dict):
            return
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            from .regex_safety import PatternFinding, compile_pattern

            where = location + "/pattern"
            self.patterns.setdefault(where, PatternFinding(where, pattern, compile_pattern(pattern)[1]))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for name, child in properties.items():
                self._record_shared_patterns(child, f"{location}/properties/{escape_pointer_token(name)}")
        for keyword in _DESCENDING:
            if keyword in schema:
                self._record_shared_patterns(schema[keyword], f"{location}/{keyword}")

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

    # -- memoisation ---------------------------------------------------------------------------
    def repeated_subschemas(self, root: Node) -> FrozenSet[int]:
        """The subschemas (ids of their schema objects) that one call could otherwise check again and
        again on the same value, for a second compilation to memoise (see `_call_state`):

        - a subschema applied from two or more places (two `$ref`s to one definition, the root and a
          `$ref: "#"`) that leads to another such subschema, or back to itself: without a memo the
          repeats would multiply down the chain (2^depth through a recursive `anyOf`). Every reference
          cycle has one: the place where the recursion enters it is applied from two places;
        - a subschema applied in place below an `unevaluatedProperties` or `unevaluatedItems` (which
          asks it again for its annotations), and the `contains` subschemas there.

        Only what the root reaches counts, and only subschemas that apply others: a leaf checked again
        costs what a look-up would. A `$dynamicRef` applies every target it may land on (just the root
        resource's, when the root has the anchor: it is the outermost of every dynamic scope), a dynamic
        `$recursiveRef` every `$recursiveAnchor` resource. Most tool schemas have none, and pay nothing.
        """
        applied, in_place = self._call_graph(root)
        calls_others = {key for key, children in applied.items() if children}
        reachable = {id(root): root}
        applications: Dict[int, int] = {id(root): 1}  # the call itself applies the root once
        callers: Dict[int, List[int]] = {}
        todo = [root]
        while todo:
            node = todo.pop()
            for child in applied.get(id(node), ()):
                applications[id(child)] = applications.get(id(child), 0) + 1
                callers.setdefault(id(child), []).append(id(node))
                if id(child) not in reachable:
                    reachable[id(child)] = child
                    todo.append(child)
        shared = {key for key, count in applications.items() if count >= 2 and key in calls_others}
        leads_to_shared: set = set()  # nodes with a path of one or more applications to a shared node
        pending = [caller for key in shared for caller in callers.get(key, ())]
        while pending:
            key = pending.pop()
            if key not in leads_to_shared:
                leads_to_shared.add(key)
                pending.extend(callers.get(key, ()))
        marked = shared & leads_to_shared

        seen: set = set()
        todo = [node for node in self.annotation_readers if id(node) in reachable]
        while todo:
            node = todo.pop()
            for child in self.rechecked.get(id(node), ()):
                if id(child) in calls_others:
                    marked.add(id(child))
            for child in in_place.get(id(node), ()):
                if id(child) in calls_others:
                    marked.add(id(child))
                if id(child) not in seen:
                    seen.add(id(child))
                    todo.append(child)
        return frozenset(id(reachable[key].schema) for key in marked)

    def _call_graph(self, root: Node) -> Tuple[Dict[int, List[Node]], Dict[int, List[Node]]]:
        """Every application (node id -> nodes it applies), and those in place, dynamic references included."""
        applied: Dict[int, List[Node]] = {key: list(children) for key, children in self.applied.items()}
        in_place: Dict[int, List[Node]] = {key: list(children) for key, children in self.edges.items()}
        for site, name, initial in self.dynamic_sites:
            if name is None:
                targets = list(self.recursive_targets.values())
            elif root.scope_uri is not None and (root.scope_uri, name) in self.dynamic_targets:
                targets = [self.dynamic_targets[(root.scope_uri, name)]]
                applied[id(site)].remove(initial)  # it never lands on its initial target then
                in_place[id(site)].remove(initial)
            else:
                targets = [node for (_uri, anchor), node in self.dynamic_targets.items() if anchor == name]
            applied.setdefault(id(site), []).extend(targets)
            in_place.setdefault(id(site), []).extend(targets)
        return applied, in_place

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
    def _keyword_table(self, dialect: str, location: str) -> _Table:
        cached = self._tables.get(dialect)
        if cached is None:
            cached = self._tables[dialect] = self._table_for(dialect, location)
        return cached

    def _table_for(self, dialect: str, location: str) -> _Table:
        """A built-in dialect's table; for a custom meta-schema, the vocabularies its `$vocabulary` names,
        or (without one) the table of the dialect its own `$schema` names."""
        seen = set()
        current = dialect
        for _ in range(_MAX_METASCHEMA_CHAIN):
            known = builtin_dialect(current)
            if known is not None and known.table is not None:
                return _Table(dict(known.table), self.format_assertion, True, known.ref_hides_siblings)
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

    def _vocabulary_table(self, vocabularies: frozenset, family: Dialect) -> _Table:
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
        return _Table(table, asserts, has_validation, family.ref_hides_siblings)

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
