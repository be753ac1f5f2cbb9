"""Where every schema lives: resources by URI, anchors, and the built-in meta-schemas.

Before anything is compiled, each document is walked once through the keywords known to hold
subschemas (never through `enum`, `const` or unknown keywords, whose `$id` is just data) to record the
schema resources (`$id`), plain and dynamic anchors, and the base URI and dialect of every subschema.
References are later resolved against this index only: nothing is ever fetched from the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources as _package_files
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from ._uri import resolve_uri, split_fragment

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

SINGLE_SUBSCHEMA_KEYWORDS = (
    "additionalProperties", "unevaluatedProperties", "items", "contains", "propertyNames",
    "not", "if", "then", "else", "unevaluatedItems",
)
LIST_SUBSCHEMA_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
MAP_SUBSCHEMA_KEYWORDS = ("properties", "patternProperties", "$defs", "dependentSchemas")


@dataclass(frozen=True)
class Place:
    """Where one subschema sits: its base URI, dialect ($schema in force) and a readable location."""

    base: str
    dialect: str
    location: str  # "/properties/a" in the root document, "<uri>#/pointer" elsewhere


def normalize_uri(uri: str) -> str:
    """Drop an empty fragment: "x#" and "x" name the same resource."""
    return uri[:-1] if uri.endswith("#") else uri


def location_text(document_label: str, pointer: str) -> str:
    """Format a schema location for messages: bare pointer in the root document."""
    if document_label == "":
        return pointer
    return f"{document_label}#{pointer}"


class SchemaIndex:
    """Resources, anchors and the place of every walked subschema, for one Validator."""

    def __init__(self) -> None:
        self.resources: Dict[str, Any] = {}
        self.anchors: Dict[Tuple[str, str], Any] = {}
        self.dynamic_anchors: Dict[Tuple[str, str], Any] = {}
        self.places: Dict[int, Place] = {}
        self.documents_with_dynamic_ref: set = set()
        self.document_of: Dict[str, str] = {}
        self.references: Dict[str, set] = {}
        self._keep_alive: list = []

    def copy(self) -> "SchemaIndex":
        twin = SchemaIndex()
        twin.resources = dict(self.resources)
        twin.anchors = dict(self.anchors)
        twin.dynamic_anchors = dict(self.dynamic_anchors)
        twin.places = dict(self.places)
        twin.documents_with_dynamic_ref = set(self.documents_with_dynamic_ref)
        twin.document_of = dict(self.document_of)
        twin.references = {key: set(value) for key, value in self.references.items()}
        twin._keep_alive = list(self._keep_alive)
        return twin

    def add_document(self, document: Any, uri: str, *, label: str, dialect: str = DRAFT_2020_12) -> None:
        """Register `document` under `uri` (its retrieval URI) and walk it for resources and anchors."""
        self._keep_alive.append(document)
        uri = normalize_uri(uri)
        self.resources[uri] = document
        self.document_of[uri] = uri
        self._walk(document, uri, dialect, label, "", uri)

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

    def place_of(self, schema: Any) -> Optional[Place]:
        return self.places.get(id(schema))

    def _walk(self, schema: Any, base: str, dialect: str, label: str, pointer: str, document: str) -> None:
        if not isinstance(schema, dict):  # booleans are singletons: they have no place of their own
            return
        identifier = schema.get("$id")
        if isinstance(identifier, str):
            base = normalize_uri(resolve_uri(base, identifier))
            self.resources.setdefault(base, schema)
            self.document_of.setdefault(base, document)
            label, pointer = base, ""
            meta = schema.get("$schema")
            if isinstance(meta, str):
                dialect = normalize_uri(meta)
        elif pointer == "" and isinstance(schema.get("$schema"), str):
            dialect = normalize_uri(schema["$schema"])
        self.places[id(schema)] = Place(base, dialect, location_text(label, pointer))
        self._record_anchors(schema, base)
        if "$dynamicRef" in schema:
            self.documents_with_dynamic_ref.add(document)
        for keyword in ("$ref", "$dynamicRef"):
            reference = schema.get(keyword)
            if isinstance(reference, str):
                target = normalize_uri(split_fragment(resolve_uri(base, reference))[0])
                self.references.setdefault(document, set()).add(target)
        for keyword, child, child_pointer in iter_subschemas(schema, pointer):
            self._walk(child, base, dialect, label, child_pointer, document)

    def _record_anchors(self, schema: dict, base: str) -> None:
        anchor = schema.get("$anchor")
        if isinstance(anchor, str):
            self.anchors.setdefault((base, anchor), schema)
        dynamic = schema.get("$dynamicAnchor")
        if isinstance(dynamic, str):
            self.anchors.setdefault((base, dynamic), schema)
            self.dynamic_anchors.setdefault((base, dynamic), schema)


def iter_subschemas(schema: Mapping, pointer: str = "") -> Iterator[Tuple[str, Any, str]]:
    """Yield (keyword, subschema, JSON Pointer) for every subschema position of a 2020-12 schema."""
    from ..jsonvalue import escape_pointer_token

    for keyword in SINGLE_SUBSCHEMA_KEYWORDS:
        if keyword in schema:
            yield keyword, schema[keyword], f"{pointer}/{keyword}"
    for keyword in LIST_SUBSCHEMA_KEYWORDS:
        value = schema.get(keyword)
        if isinstance(value, list):
            for index, child in enumerate(value):
                yield keyword, child, f"{pointer}/{keyword}/{index}"
    for keyword in MAP_SUBSCHEMA_KEYWORDS:
        value = schema.get(keyword)
        if isinstance(value, dict):
            for name, child in value.items():
                yield keyword, child, f"{pointer}/{keyword}/{escape_pointer_token(name)}"


@lru_cache(maxsize=1)
def builtin_documents() -> Tuple[Tuple[str, Any], ...]:
    """The draft 2020-12 meta-schema and its vocabulary meta-schemas, keyed by their $id."""
    folder = _package_files.files(__package__) / "metaschemas"
    documents = []
    candidates = [folder / "metaschema.json"]
    candidates += sorted((folder / "vocabularies").iterdir(), key=lambda item: item.name)
    for entry in candidates:
        if entry.name.endswith(".json"):
            document = json.loads(entry.read_text(encoding="utf-8"))
            documents.append((document["$id"], document))
    return tuple(documents)


@lru_cache(maxsize=1)
def builtin_index() -> SchemaIndex:
    """An index holding only the built-in meta-schemas; copied (cheaply) into every Validator's index."""
    index = SchemaIndex()
    for uri, document in builtin_documents():
        index.add_document(document, uri, label=uri)
    return index


def split_reference(base: str, reference: str) -> Tuple[str, str]:
    """Resolve a $ref against its base URI and split it into (resource URI, fragment)."""
    absolute = resolve_uri(base, reference)
    resource, fragment = split_fragment(absolute)
    return resource, fragment
