"""Walking a tool's model-facing definition: its subschemas and every string a model reads.

Pointers are JSON Pointers into `ToolSpec.model_schema()` (`/description`,
`/input_schema/properties/city/description`, ...), so a finding says exactly where to look. Schemas of
older dialects are walked as written: draft-07's list-form `items`, `additionalItems` and the schemas of
`dependencies` reach the model too (the export turns them into 2020-12 keywords).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator

from ..schema.walk import MAX_WALK_DEPTH, pointer_token, schema_nodes  # shared with search, below both

__all__ = ["MAX_WALK_DEPTH", "model_texts", "pointer_token", "schema_nodes"]

_DATA_KEYWORDS = ("enum", "const", "default", "examples")


def _data_strings(value: Any, pointer: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield pointer, value
    elif depth < MAX_WALK_DEPTH and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _data_strings(item, f"{pointer}/{index}", depth + 1)
    elif depth < MAX_WALK_DEPTH and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _data_strings(item, f"{pointer}/{pointer_token(str(key))}", depth + 1)


def model_texts(spec: Any) -> Iterator[tuple[str, str]]:
    """(pointer, text) for every string of the tool's model-facing definition a model reads: the name,
    title and description, and in both schemas every description, title, property name, string value
    of enum/const/default/examples and string inside an `x-` extension keyword (exports keep them)."""
    yield "/name", spec.name
    if spec.title is not None:
        yield "/title", spec.title
    yield "/description", spec.description
    for root, schema in (("/input_schema", spec.input_schema), ("/output_schema", spec.output_schema)):
        if schema is None:
            continue
        for pointer, node, via in schema_nodes(schema, root):
            if via in ("properties", "dependentSchemas", "dependencies"):
                name = pointer.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~")
                yield pointer, name
            if not isinstance(node, Mapping):
                continue
            for keyword in ("description", "title"):
                if isinstance(node.get(keyword), str):
                    yield f"{pointer}/{keyword}", node[keyword]
            for keyword in _DATA_KEYWORDS:
                if keyword in node:
                    yield from _data_strings(node[keyword], f"{pointer}/{keyword}")
            for keyword, value in node.items():  # vendor extensions travel with the schema to the model
                if isinstance(keyword, str) and keyword.startswith("x-"):
                    yield from _data_strings(value, f"{pointer}/{pointer_token(keyword)}")
