"""Where every schema lives: resources by URI, anchors, and the built-in meta-schemas.

Before anything is compiled, each document is walked once through the keywords its dialect knows to
hold subschemas (never through `enum`, `const` or unknown keywords, whose `$id` is just data) to record
the schema resources (`$id`, or `id` in draft-04), plain and dynamic anchors, and the base URI and
dialect of every subschema. References are later resolved against this index only: nothing is ever
fetched from the network.

The built-in meta-schemas are read, one dialect's documents at a time, when an index first meets a
URI of that dialect's (`ensure_builtin`): before it records a resource, reference or anchor there,
and before it looks one up. So an index holds exactly what it held when every dialect was loaded up
front (a dialect's documents come before anything else there), and a process that only ever meets
2020-12 schemas never reads or walks the other four dialects' meta-schemas (about 2.5 ms).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from ._dialects import DIALECTS, DRAFT_2020_12, Dialect, builtin_dialect, normalize_uri
from ._uri import resolve_uri, split_fragment

_DIALECT_2020_12 = DIALECTS[DRAFT_2020_12]
_MAX_METASCHEMA_CHAIN = 16  # custom meta-schemas followed through their own $schema, at most


@dataclass(frozen=True)
class Place:
    """Where one subschema sits: its base URI, dialect ($schema in force) and a readable location."""

    base: str
    dialect: str
    location: str  # "/properties/a" in the root document, "<uri>#/pointer" elsewhere


def location_text(document_label: str, pointer: str) -> str:
    """Format a schema location for messages: bare pointer in the root document."""
    if document_label == "":
        return pointer
    return f"{document_label}#{pointer}"


class SchemaIndex:
    """Resources, anchors and the place of every walked subschema, for one Validator."""

    def __init__(self, default_dialect: str = DRAFT_2020_12) -> None:
        self.default_dialect = default_dialect
        self.resources: Dict[str, Any] = {}
        self.anchors: Dict[Tuple[str, str], Any] = {}
        self.dynamic_anchors: Dict[Tuple[str, str], Any] = {}
        self.places: Dict[int, Place] = {}
        self.documents_with_dynamic_ref: set = set()
        self.document_of: Dict[str, str] = {}
        self.references: Dict[str, set] = {}
        self._keep_alive: list = []
        self._builtin_groups: set = set()  # the built-in dialects (folder names) whose documents are in

    def ensure_builtin(self, uri: str) -> None:
        """If `uri` (normalized) lies in a built-in dialect's URI space, make sure that dialect's
        meta-schemas are in this index, as if they had been added before anything else."""
        group = builtin_group_of(uri)
        if group is None or group in self._builtin_groups:
            return
        self._builtin_groups.add(group)
        part = _builtin_group_index(group)
        # Nothing of this index lies in the group's URI space yet (every write there asks here first),
        # and its documents' subschemas are walked by no other document, so nothing is overwritten.
        self.resources.update(part.resources)
        self.anchors.update(part.anchors)
        self.dynamic_anchors.update(part.dynamic_anchors)
        self.places.update(part.places)
        self.documents_with_dynamic_ref |= part.documents_with_dynamic_ref
        self.document_of.update(part.document_of)
        for key, value in part.references.items():
            self.references[key] = set(value)
        self._keep_alive.extend(part._keep_alive)

    def copy(self, default_dialect: str = DRAFT_2020_12) -> "SchemaIndex":
        twin = SchemaIndex(default_dialect)
        twin.resources = dict(self.resources)
        twin.anchors = dict(self.anchors)
        twin.dynamic_anchors = dict(self.dynamic_anchors)
        twin.places = dict(self.places)
        twin.documents_with_dynamic_ref = set(self.documents_with_dynamic_ref)
        twin.document_of = dict(self.document_of)
        twin.references = {key: set(value) for key, value in self.references.items()}
        twin._keep_alive = list(self._keep_alive)
        twin._builtin_groups = set(self._builtin_groups)
        return twin

    def register(self, document: Any, uri: str) -> None:
        """Make `document` known under `uri` before any document is walked (a custom meta-schema must be
        known before the documents that name it in `$schema` are walked)."""
        uri = normalize_uri(uri)
        self.ensure_builtin(uri)
        self.resources.setdefault(uri, document)

    def add_document(self, document: Any, uri: str, *, label: str, dialect: Optional[str] = None) -> None:
        """Register `document` under `uri` (its retrieval URI) and walk it for resources and anchors.

        Its dialect is its own `$schema`, else `dialect`, else the index's default dialect."""
        self._keep_alive.append(document)
        uri = normalize_uri(uri)
        self.ensure_builtin(uri)
        self.resources[uri] = document
        self.document_of[uri] = uri
        self._walk(document, uri, normalize_uri(self.dialect_of_document(document, dialect)), label, "", uri)

    def dialect_of_document(self, document: Any, dialect: Optional[str] = None) -> str:
        """A document's own `$schema`, else `dialect`, else the index's default (not normalized)."""
        declared = document.get("$schema") if isinstance(document, dict) else None
        return declared if isinstance(declared, str) else (dialect or self.default_dialect)

    def rules(self, dialect: str) -> Dialect:
        """The built-in dialect whose rules (identifier keyword, subschema keywords...) apply to `dialect`:
        itself, or for a custom meta-schema the built-in one its `$schema` chain leads to (else 2020-12)."""
        seen = set()
        current = dialect
        for _ in range(_MAX_METASCHEMA_CHAIN):
            known = builtin_dialect(current)
            if known is not None:
                return known
            seen.add(current)
            meta = self.resource(normalize_uri(current))
            inner = meta.get("$schema") if isinstance(meta, dict) else None
            if not isinstance(inner, str) or normalize_uri(inner) in seen:
                break
            current = normalize_uri(inner)
        return _DIALECT_2020_12

    def uses_dynamic_references(self, document_uri: str) -> bool:
        """True when `$dynamicRef` occurs in this document or any document it references (transitively)."""
        seen = set()
        todo = [normalize_uri(document_uri)]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in self.documents_with_dynamic_ref:
                return True
            for resource in self.references.get(current, ()):
                owner = self.document_of.get(resource)
                if owner is not None:
                    todo.append(owner)
        return False

    def resource(self, uri: str) -> Any:
        """The document or embedded resource known as `uri` (normalized), or None; a built-in
        meta-schema is read on first use."""
        self.ensure_builtin(uri)
        return self.resources.get(uri)

    def place_of(self, schema: Any) -> Optional[Place]:
        return self.places.get(id(schema))

    def _walk(self, schema: Any, base: str, dialect: str, label: str, pointer: str, document: str) -> None:
        if not isinstance(schema, dict):  # booleans are singletons: they have no place of their own
            return
        rules = self.rules(dialect)
        identifier = rules.identifier_of(schema)
        anchor = ""
        if identifier is not None:
            resource, anchor = split_fragment(resolve_uri(base, identifier))
            if anchor and not rules.anchor_in_identifier:
                anchor = ""
            if not (anchor and identifier.startswith("#")):  # "#name" before 2019-09 only names an anchor
                base = normalize_uri(resource)
                self.ensure_builtin(base)
                self.resources.setdefault(base, schema)
                self.document_of.setdefault(base, document)
                label, pointer = base, ""
                meta = schema.get("$schema")
                if isinstance(meta, str):
                    dialect = normalize_uri(meta)
                    rules = self.rules(dialect)
        self.places[id(schema)] = Place(base, dialect, location_text(label, pointer))
        if anchor and not anchor.startswith("/"):
            self.anchors.setdefault((base, anchor), schema)
        self._record_anchors(schema, base, rules)
        if "$dynamicRef" in schema or "$recursiveRef" in schema:
            self.documents_with_dynamic_ref.add(document)
        for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
            reference = schema.get(keyword)
            if isinstance(reference, str):
                target = normalize_uri(split_fragment(resolve_uri(base, reference))[0])
                self.ensure_builtin(target)  # (it may reach a dynamic reference there)
                self.references.setdefault(document, set()).add(target)
        for keyword, child, child_pointer in iter_subschemas(schema, pointer, rules):
            self._walk(child, base, dialect, label, child_pointer, document)

    def _record_anchors(self, schema: dict, base: str, rules: Dialect) -> None:
        if "$anchor" in rules.anchor_keywords:
            anchor = schema.get("$anchor")
            if isinstance(anchor, str):
                self.anchors.setdefault((base, anchor), schema)
        if "$dynamicAnchor" in rules.anchor_keywords:
            dynamic = schema.get("$dynamicAnchor")
            if isinstance(dynamic, str):
                self.anchors.setdefault((base, dynamic), schema)
                self.dynamic_anchors.setdefault((base, dynamic), schema)


def iter_subschemas(schema: Mapping, pointer: str = "",
                    rules: Dialect = _DIALECT_2020_12) -> Iterator[Tuple[str, Any, str]]:
    """Yield (keyword, subschema, JSON Pointer) for every subschema position of a schema in a dialect."""
    from ..jsonvalue import escape_pointer_token

    for keyword in rules.single_subschemas:
        if keyword in schema:
            yield keyword, schema[keyword], f"{pointer}/{keyword}"
    if "items" in schema and rules.items_may_be_a_list:
        items = schema["items"]
        if isinstance(items, list):
            for index, child in enumerate(items):
                yield "items", child, f"{pointer}/items/{index}"
        else:
            yield "items", items, f"{pointer}/items"
    for keyword in rules.list_subschemas:
        value = schema.get(keyword)
        if isinstance(value, list):
            for index, child in enumerate(value):
                yield keyword, child, f"{pointer}/{keyword}/{index}"
    for keyword in rules.map_subschemas:
        value = schema.get(keyword)
        if isinstance(value, dict):
            for name, child in value.items():  # (`dependencies` also holds lists of names: not schemas)
                yield keyword, child, f"{pointer}/{keyword}/{escape_pointer_token(name)}"


BUILTIN_GROUPS = {
    "draft-04": "http://json-schema.org/draft-04/",
    "draft-06": "http://json-schema.org/draft-06/",
    "draft-07": "http://json-schema.org/draft-07/",
    "draft2019-09": "https://json-schema.org/draft/2019-09/",
    "draft2020-12": "https://json-schema.org/draft/2020-12/",
}
"""Each built-in dialect's folder under `metaschemas/`, and the URI space its documents' ids lie in
(a test checks every id against it)."""


def builtin_group_of(uri: str) -> Optional[str]:
    """The built-in dialect (folder name) whose URI space holds `uri`, or None."""
    if "json-schema.org/" not in uri:  # most URIs: one look, not five
        return None
    for group, prefix in BUILTIN_GROUPS.items():
        if uri.startswith(prefix):
            return group
    return None


def _metaschema_folder() -> Any:
    folder: Any = Path(__file__).with_name("metaschemas")
    if not folder.is_dir():  # a zipped package: read through importlib.resources (which imports zipfile)
        from importlib import resources

        folder = resources.files(__package__) / "metaschemas"
    return folder


@lru_cache(maxsize=None)
def builtin_group(group: str) -> Tuple[Tuple[str, Any], ...]:
    """One built-in dialect's meta-schema and vocabulary meta-schemas, keyed by their id, read once."""
    dialect_folder = _metaschema_folder() / group
    candidates = [dialect_folder / "metaschema.json"]
    vocabularies = dialect_folder / "vocabularies"
    if vocabularies.is_dir():
        candidates += sorted(vocabularies.iterdir(), key=lambda item: item.name)
    documents = []
    for entry in candidates:
        if entry.name.endswith(".json"):
            document = json.loads(entry.read_text(encoding="utf-8"))
            identifier = document.get("$id", document.get("id"))
            documents.append((normalize_uri(identifier), document))
    return tuple(documents)


def builtin_documents() -> Tuple[Tuple[str, Any], ...]:
    """The meta-schemas of every built-in dialect and their vocabulary meta-schemas, keyed by their id."""
    return tuple(entry for group in sorted(BUILTIN_GROUPS) for entry in builtin_group(group))


def builtin_document(uri: str) -> Any:
    """The built-in meta-schema (or vocabulary meta-schema) whose id is `uri` (normalized), or None."""
    group = builtin_group_of(uri)
    return dict(builtin_group(group)).get(uri) if group is not None else None


@lru_cache(maxsize=None)
def _builtin_group_index(group: str) -> SchemaIndex:
    """An index of one built-in dialect's documents alone, merged into the indexes that meet it."""
    index = SchemaIndex()
    index._builtin_groups = set(BUILTIN_GROUPS)  # walking them loads no other dialect's
    for uri, document in builtin_group(group):
        index.add_document(document, uri, label=uri)
    index._builtin_groups = {group}
    return index


def builtin_index() -> SchemaIndex:
    """An index that holds the built-in meta-schemas (read on first use: see `ensure_builtin`);
    copied into every Validator's index."""
    return _EMPTY_INDEX


_EMPTY_INDEX = SchemaIndex()


def split_reference(base: str, reference: str) -> Tuple[str, str]:
    """Resolve a $ref against its base URI and split it into (resource URI, fragment)."""
    absolute = resolve_uri(base, reference)
    resource, fragment = split_fragment(absolute)
    return resource, fragment
