"""Convert a schema written in an older dialect (2019-09, draft-07, -06, -04) into draft 2020-12.

Hosts read tool schemas as 2020-12 (OpenAI and Anthropic document no other dialect; MCP takes a schema
without `$schema` as 2020-12), so an export converts an older schema into one that accepts exactly the
same instances in 2020-12, or refuses with the keyword and its JSON Pointer (in the original schema):

- `definitions` -> `$defs`, `dependencies` -> `dependentRequired` (lists) + `dependentSchemas` (schemas),
  list-form `items` -> `prefixItems` with `additionalItems` -> `items`, draft-04's boolean
  `exclusiveMinimum`/`exclusiveMaximum` -> the numeric keywords, `id` -> `$id`, an `$id` of "#name"
  -> `$anchor`; every `$ref` pointer is rewritten to where its target now is;
- what the old dialect ignored is left out, so it cannot start to count: the siblings of `$ref` before
  2019-09 (annotations and definitions stay), and keywords the old dialect does not know but 2020-12
  does (`prefixItems` in a draft-07 schema, say); `$schema` is dropped (2020-12 is the hosts' default);
- refused: a `$recursiveRef` whose target says `"$recursiveAnchor": true` (its "innermost unbroken
  chain" rule is not `$dynamicRef`'s "outermost" rule), `unevaluatedItems` in a 2019-09 document that
  also uses `contains` (2020-12 counts contains matches as evaluated, 2019-09 does not), an anchor name
  2020-12 does not allow, and a reference into a part the conversion leaves out.

One difference is kept and documented instead of refused: draft-04's `"type": "integer"` refuses 1.0
(a number written with a fraction) while 2020-12's accepts it; the registry still validates arguments
against the original schema, so 1.0 is still refused where the tool runs.

The input is never modified; the result shares nothing with it. A schema nested deeper than
`MAX_SCHEMA_DEPTH` (which no `Validator` compiles either) is refused with the pointer where it goes too
deep, and so is one that exhausts Python's recursion limit on the way: never a RecursionError.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

from ..frozenjson import FrozenObject, thaw
from ..jsonvalue import escape_pointer_token, pointer_join
from ._dialects import DIALECTS, DRAFT_04, DRAFT_2019_09, DRAFT_2020_12, Dialect, builtin_dialect, normalize_uri
from ._keywords import DEFAULT_VOCABULARIES, VOCABULARIES
from ._uri import pointer_tokens, resolve_uri, split_fragment
from .walk import follow_pointer
from .model import MAX_SCHEMA_DEPTH, SchemaError

__all__ = ["SchemaConversionError", "original_pointer", "to_draft_2020_12"]

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "contentMediaType", "contentEncoding"})
# Keywords with a meaning in 2020-12: one the old dialect does not know must not be carried over.
# (`then`, `else`, `minContains` and `maxContains` are read by the compile functions of `if` and `contains`.)
_READ_BY_OTHERS = frozenset({"then", "else", "minContains", "maxContains"})
_MEANINGFUL_IN_2020_12 = frozenset(
    keyword for vocabulary in DEFAULT_VOCABULARIES for keyword in VOCABULARIES[vocabulary]
) | _READ_BY_OTHERS | {"$id", "$anchor", "$dynamicAnchor", "$schema", "$vocabulary", "contentSchema"}
_ANCHOR_2020_12 = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*")


class SchemaConversionError(SchemaError):
    """The schema cannot be said in draft 2020-12 without changing which instances it accepts."""

    def __init__(self, keyword: str, path: str, reason: str) -> None:
        self.keyword = keyword
        self.path = path  # JSON Pointer into the original schema, "" for the root
        self.reason = reason
        super().__init__(f"schema at #{path}: {keyword}: {reason}")


def to_draft_2020_12(schema: Any, *, dialect: Optional[str] = None) -> Any:
    """The schema in draft 2020-12 (a new object), accepting the same instances as the original in its
    own dialect: its `$schema`, else `dialect`, else 2020-12. A 2020-12 schema comes back as a deep copy.
    Raises SchemaConversionError (keyword + JSON Pointer) for what has no faithful 2020-12 form, and
    SchemaError for a `$schema` this package does not know."""
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    source = declared if isinstance(declared, str) else (dialect or DRAFT_2020_12)
    rules = builtin_dialect(source)
    if rules is None:
        raise SchemaError(f"cannot convert from $schema {source!r}: not a dialect this package knows")
    too_deep = _nested_too_deep(schema, MAX_SCHEMA_DEPTH)
    if too_deep is not None:
        raise SchemaConversionError(_last_token(too_deep), too_deep,
                                    f"the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
    try:
        if isinstance(schema, FrozenObject) and rules.uri == DRAFT_2020_12:
            return thaw(schema)  # a spec's read-only schema: plain dicts and lists all the way down
        if rules.uri == DRAFT_2020_12 or not isinstance(schema, Mapping):
            return copy.deepcopy(schema if not isinstance(schema, Mapping) else dict(schema))
        result = _Conversion(schema, rules).run()
        _check_readable(schema, result, rules)
    except RecursionError:  # within the depth limit, but called with little of the stack left
        raise SchemaConversionError("$schema", "", "the schema is nested too deeply to convert here") from None
    return result


def _nested_too_deep(schema: Any, limit: int) -> Optional[str]:
    """The JSON Pointer of the first object or array (in document order) nested `limit` containers deep
    inside `schema`, else None. Iterative: it never recurses, however deep the schema goes."""
    stack: List[Tuple[Any, str, int]] = [(schema, "", 0)]
    while stack:
        node, pointer, depth = stack.pop()
        if isinstance(node, Mapping):
            children = [(child, pointer_join(pointer, key), depth + 1) for key, child in node.items()]
        elif isinstance(node, (list, tuple)):
            children = [(child, pointer_join(pointer, index), depth + 1) for index, child in enumerate(node)]
        else:
            continue
        if depth >= limit:
            return pointer
        stack.extend(reversed(children))
    return None


def _last_token(pointer: str) -> str:
    """The keyword (or member name, or index) a JSON Pointer ends with; "$schema" for the root."""
    return pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~") if pointer else "$schema"


def _check_readable(schema: Mapping[str, Any], result: Any, rules: Dialect) -> None:
    """Refuse a conversion that is not a valid 2020-12 schema. The old meta-schema never looks inside a
    keyword the old dialect does not know, and `$defs` is carried over even from drafts that do not know
    it (its members are what `"$ref": "#/$defs/..."` reaches there), so `{"$defs": {"y": 5}}` is a valid
    draft-07 schema whose conversion 2020-12 refuses."""
    from .validator import draft_2020_12_validator

    violations = draft_2020_12_validator()._violations(result, 1)
    if violations:
        place = original_pointer(schema, violations[0].instance_path, dialect=rules.uri)
        keyword = place.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~") if place else "$schema"
        raise SchemaConversionError(keyword, place, "this part is not a valid draft 2020-12 schema once "
                                    f"converted ({violations[0].message})")


# A keyword of the converted schema -> the keyword of the original that it came from (when the original
# has no keyword of that name): what `original_pointer` reads the first step below a subschema as.
_RENAMED = {"$defs": ("definitions",), "dependentRequired": ("dependencies",),
            "dependentSchemas": ("dependencies",), "prefixItems": ("items",), "$anchor": ("$id", "id"),
            "$id": ("id",)}


def original_pointer(schema: Any, pointer: str, *, dialect: Optional[str] = None) -> str:
    """Where `pointer`, a JSON Pointer into `to_draft_2020_12(schema)`, points in `schema` as written: a
    moved subschema's own place (`/$defs/d` -> `/definitions/d`, `/dependentSchemas/a` ->
    `/dependencies/a`), and a keyword renamed by the conversion read as its original (`prefixItems` ->
    `items`, `items` beside it -> `additionalItems`). A 2020-12 schema's pointers are its own. So a
    refusal of the converted schema (strict mode's, say) can name the place its author wrote."""
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    rules = builtin_dialect(declared if isinstance(declared, str) else (dialect or DRAFT_2020_12))
    if rules is None or rules.uri == DRAFT_2020_12 or not isinstance(schema, Mapping):
        return pointer
    conversion = _Conversion(schema, rules)
    try:
        conversion.run()
    except (SchemaError, RecursionError):
        return pointer
    origin = {new: old for old, new in conversion.moved.items()}
    cut = len(pointer)  # the longest prefix of `pointer` that is a converted subschema's place
    while cut > 0 and pointer[:cut] not in origin:
        cut = pointer.rfind("/", 0, cut)
    if cut < 0 or pointer[:cut] not in origin:
        return pointer
    old, rest = origin[pointer[:cut]], pointer[cut:]
    if not rest:
        return old
    node: Any = schema
    for token in pointer_tokens(old):
        node = node[int(token)] if isinstance(node, list) else node.get(token) if isinstance(node, Mapping) else None
    first, _, tail = rest[1:].partition("/")
    if isinstance(node, Mapping):
        if first == "items" and isinstance(node.get("items"), list):  # 2020-12's items: the old additionalItems
            first = "additionalItems" if "additionalItems" in node else first
        elif first not in node:
            first = next((keyword for keyword in _RENAMED.get(first, ()) if keyword in node), first)
    return f"{old}/{first}" + (f"/{tail}" if tail else "")


class _Conversion:
    """Two passes: convert every subschema (recording where each one moved), then rewrite the `$ref`s."""

    def __init__(self, root: Mapping[str, Any], rules: Dialect) -> None:
        self.root = root
        self.root_rules = rules
        self.moved: Dict[str, str] = {}  # old JSON Pointer of a subschema -> its new pointer
        self.resources: Dict[str, str] = {}  # resource URI -> old pointer of its root
        self.references: List[Tuple[dict, str, str, str, str]] = []  # (node, keyword, ref, base, old pointer)
        self.recursive_anchors: Dict[str, bool] = {}

    def run(self) -> Any:
        self._find_resources(self.root, "", "", self.root_rules)
        converted = self._convert(self.root, "", "", "", self.root_rules)
        for node, keyword, reference, base, where in self.references:
            node[keyword] = self._rewritten(reference, base, where, converted)
        return converted

    # -- pass 0: resources and their $recursiveAnchor ----------------------------------------------
    def _find_resources(self, schema: Any, pointer: str, base: str, rules: Dialect) -> None:
        if not isinstance(schema, Mapping):
            return
        base, rules = self._entered(schema, base, rules)
        if base not in self.resources:
            self.resources[base] = pointer
            self.recursive_anchors[base] = schema.get("$recursiveAnchor") is True and rules.uri == DRAFT_2019_09
        for _keyword, child, child_pointer in _subschemas(schema, pointer, rules):
            self._find_resources(child, child_pointer, base, rules)

    @staticmethod
    def _entered(schema: Mapping[str, Any], base: str, rules: Dialect) -> Tuple[str, Dialect]:
        """The base URI and rules inside `schema` (an `$id` may start a resource, a `$schema` a dialect)."""
        identifier = rules.identifier_of(schema)
        if identifier is not None and not identifier.startswith("#"):
            base = normalize_uri(split_fragment(resolve_uri(base, identifier))[0])
            declared = schema.get("$schema")
            if isinstance(declared, str) and builtin_dialect(declared) is not None:
                rules = DIALECTS[normalize_uri(declared)]
        return base, rules

    # -- pass 1: subschemas ----------------------------------------------------------------------
    def _convert(self, schema: Any, old: str, new: str, base: str, rules: Dialect) -> Any:
        self.moved[old] = new
        if not isinstance(schema, Mapping):
            return copy.deepcopy(schema)
        base, rules = self._entered(schema, base, rules)
        if rules.uri == DRAFT_2020_12:  # an embedded 2020-12 resource: already in the target dialect
            return copy.deepcopy(dict(schema))
        known = _known_keywords(rules)
        hidden = rules.ref_hides_siblings and "$ref" in schema
        out: Dict[str, Any] = {}
        for keyword, value in schema.items():
            at = f"{old}/{escape_pointer_token(keyword)}"
            if keyword == "$schema" or (keyword == "$recursiveAnchor" and rules.uri == DRAFT_2019_09):
                continue
            if keyword == rules.identifier:
                self._identifier(schema, value, at, out, rules, hidden)
                continue
            if hidden and keyword not in ("$ref", "definitions", "$defs") and keyword not in _ANNOTATIONS \
                    and not (keyword == "type" and self._implied_by_reference(schema, base)):
                continue  # ignored beside $ref before 2019-09: it must not start to count
            if keyword not in known and keyword not in ("definitions", "$defs"):
                if keyword not in _MEANINGFUL_IN_2020_12:
                    out[keyword] = copy.deepcopy(value)
                continue  # (unknown to the old dialect, meaningful in 2020-12: left out)
            self._keyword(schema, keyword, value, old, new, base, rules, out)
        if rules.uri == DRAFT_2019_09 and "unevaluatedItems" in schema and self._uses_contains():
            raise SchemaConversionError(
                "unevaluatedItems", f"{old}/unevaluatedItems",
                "2020-12 counts the items 'contains' matches as evaluated and 2019-09 does not; "
                "this schema uses both, so its meaning would change")
        return out

    def _implied_by_reference(self, schema: Mapping[str, Any], base: str) -> bool:
        """Whether the `$ref` beside `type` leads to a schema of this document declaring the same `type`,
        so keeping `type` (hosts want `"type": "object"` at the root) changes nothing."""
        reference = schema.get("$ref")
        if not isinstance(reference, str):
            return False
        resource, fragment = split_fragment(resolve_uri(base, reference))
        start = self.resources.get(normalize_uri(resource))
        if start is None or (fragment and not fragment.startswith("/")):
            return False
        target = follow_pointer(self.root, pointer_tokens(start) + pointer_tokens(fragment))
        return isinstance(target, Mapping) and "$ref" not in target and target.get("type") == schema.get("type")

    def _uses_contains(self) -> bool:
        found = []

        def walk(node: Any) -> None:
            if isinstance(node, Mapping):
                if "contains" in node:
                    found.append(True)
                for key, value in node.items():
                    if key not in ("enum", "const"):
                        walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(self.root)
        return bool(found)

    def _identifier(self, schema: Mapping[str, Any], value: Any, at: str, out: Dict[str, Any], rules: Dialect,
                    hidden: bool) -> None:
        if hidden or not isinstance(value, str):
            return  # an $id beside $ref (before 2019-09) names nothing
        resource, fragment = split_fragment(value)
        if rules.anchor_in_identifier and fragment:
            if not _ANCHOR_2020_12.fullmatch(fragment):
                raise SchemaConversionError(rules.identifier, at, f"2020-12 cannot name the anchor {fragment!r}")
            out["$anchor"] = fragment
        if resource:
            out["$id"] = resource

    def _keyword(self, schema: Mapping[str, Any], keyword: str, value: Any, old: str, new: str, base: str,
                 rules: Dialect, out: Dict[str, Any]) -> None:
        at = f"{old}/{escape_pointer_token(keyword)}"
        sub = self._convert
        if keyword in ("$ref", "$recursiveRef"):
            if keyword == "$recursiveRef":
                self._refuse_dynamic_recursion(value, base, at)
            out["$ref"] = value
            self.references.append((out, "$ref", value, base, old))
        elif keyword in ("definitions", "$defs"):  # `definitions` still holds schemas in 2019-09's meta-schema
            if not isinstance(value, Mapping):
                raise SchemaConversionError(keyword, at, "definitions must be an object of schemas")
            merged = out.setdefault("$defs", {})
            for name, child in value.items():
                if name in merged:
                    raise SchemaConversionError(keyword, f"{at}/{escape_pointer_token(name)}",
                                                "both definitions and $defs define this name")
                merged[name] = sub(child, f"{at}/{escape_pointer_token(name)}",
                                   f"{new}/$defs/{escape_pointer_token(name)}", base, rules)
        elif keyword == "dependencies":
            for trigger, rule in value.items():
                token = escape_pointer_token(trigger)
                target = "dependentRequired" if isinstance(rule, list) else "dependentSchemas"
                bucket = out.setdefault(target, {})
                if trigger in bucket:
                    raise SchemaConversionError(keyword, f"{at}/{token}", f"{target} already has this property")
                bucket[trigger] = copy.deepcopy(rule) if isinstance(rule, list) else \
                    sub(rule, f"{at}/{token}", f"{new}/{target}/{token}", base, rules)
        elif keyword in ("dependentRequired", "dependentSchemas"):
            bucket = out.setdefault(keyword, {})
            for trigger, rule in value.items():
                token = escape_pointer_token(trigger)
                if trigger in bucket:
                    raise SchemaConversionError("dependencies", f"{old}/dependencies/{token}",
                                                f"{keyword} already has this property")
                bucket[trigger] = copy.deepcopy(rule) if keyword == "dependentRequired" else \
                    sub(rule, f"{at}/{token}", f"{new}/{keyword}/{token}", base, rules)
        elif keyword == "items" and isinstance(value, list):
            out["prefixItems"] = [sub(child, f"{at}/{index}", f"{new}/prefixItems/{index}", base, rules)
                                  for index, child in enumerate(value)]
            if "additionalItems" in schema:
                out["items"] = sub(schema["additionalItems"], f"{old}/additionalItems", f"{new}/items", base, rules)
        elif keyword == "additionalItems":
            return  # moved to items beside a list-form items; ignored otherwise
        elif keyword in ("minimum", "maximum") and rules.uri == DRAFT_04:
            exclusive = "exclusiveMinimum" if keyword == "minimum" else "exclusiveMaximum"
            out[exclusive if schema.get(exclusive) is True else keyword] = copy.deepcopy(value)
        elif keyword in ("exclusiveMinimum", "exclusiveMaximum") and rules.uri == DRAFT_04:
            return  # draft-04's booleans: folded into minimum/maximum above
        elif keyword in _SINGLE or keyword in _LIST or keyword in _MAP:
            out[keyword] = self._container(value, at, new, keyword, base, rules)
        else:
            out[keyword] = copy.deepcopy(value)

    def _container(self, value: Any, at: str, new: str, keyword: str, base: str, rules: Dialect) -> Any:
        """A keyword holding subschemas, converted in place (same keyword, same member names)."""
        target = f"{new}/{escape_pointer_token(keyword)}"
        if keyword in _LIST and isinstance(value, list):
            return [self._convert(child, f"{at}/{index}", f"{target}/{index}", base, rules)
                    for index, child in enumerate(value)]
        if (keyword in _MAP or keyword == "$defs") and isinstance(value, Mapping):
            return {name: self._convert(child, f"{at}/{escape_pointer_token(name)}",
                                        f"{target}/{escape_pointer_token(name)}", base, rules)
                    for name, child in value.items()}
        return self._convert(value, at, target, base, rules)

    def _refuse_dynamic_recursion(self, reference: Any, base: str, at: str) -> None:
        target = normalize_uri(split_fragment(resolve_uri(base, str(reference)))[0])
        if self.recursive_anchors.get(target):
            raise SchemaConversionError(
                "$recursiveRef", at,
                "its target says \"$recursiveAnchor\": true; 2019-09's innermost-unbroken-chain rule has no "
                "faithful 2020-12 form ($dynamicRef takes the outermost anchor)")

    # -- pass 2: references ----------------------------------------------------------------------
    def _rewritten(self, reference: Any, base: str, where: str, converted: Any) -> Any:
        if not isinstance(reference, str):
            return reference
        resource, fragment = split_fragment(resolve_uri(base, reference))
        resource = normalize_uri(resource)
        if resource not in self.resources or not fragment.startswith("/"):
            return reference  # another document (read in its own dialect), or an anchor: unchanged
        root_old = self.resources[resource]
        old_target = root_old + "".join("/" + escape_pointer_token(token) for token in pointer_tokens(fragment))
        new_target = self._moved_pointer(old_target)
        new_root = self.moved.get(root_old, root_old)
        if new_target is None or not (new_target == new_root or new_target.startswith(new_root + "/")) \
                or not _resolves(converted, new_target):
            raise SchemaConversionError("$ref", f"{where}/$ref",
                                        "it points into a part of the schema that 2020-12 has no place for")
        relative = new_target[len(new_root):]
        head = reference.split("#", 1)[0]
        return head + "#" + quote(relative, safe="/~$!&'()*+,;=:@-._")

    def _moved_pointer(self, old_pointer: str) -> Optional[str]:
        """Where the subschema at `old_pointer` now is: its own entry, else the nearest moved ancestor
        plus the rest of the path unchanged (a keyword copied as it was)."""
        if old_pointer in self.moved:
            return self.moved[old_pointer]
        cut = old_pointer.rfind("/")
        while cut > 0:
            prefix = old_pointer[:cut]
            if prefix in self.moved:
                return self.moved[prefix] + old_pointer[cut:]
            cut = old_pointer.rfind("/", 0, cut)
        return self.moved.get("", "") + old_pointer if "" in self.moved else None


_SINGLE = frozenset({"additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
                     "unevaluatedItems", "unevaluatedProperties", "items"})
_LIST = frozenset({"allOf", "anyOf", "oneOf"})
_MAP = frozenset({"properties", "patternProperties"})


def _known_keywords(rules: Dialect) -> frozenset:
    if rules.table is not None:
        names = set(rules.table) | ({"then", "else"} if "if" in rules.table else set())
        if rules.uri == DRAFT_04:
            names |= {"exclusiveMinimum", "exclusiveMaximum"}  # draft-04's modifiers (not in its table)
    else:
        names = {keyword for vocabulary in (rules.vocabularies or ()) for keyword in VOCABULARIES[vocabulary]}
        names |= {"$anchor", "$recursiveAnchor", "$vocabulary"} | _READ_BY_OTHERS
    return frozenset(names | _ANNOTATIONS | {"$schema", rules.identifier, "$comment"})


def _subschemas(schema: Mapping[str, Any], pointer: str, rules: Dialect):
    from ._index import iter_subschemas

    return iter_subschemas(schema, pointer, rules)


def _resolves(document: Any, pointer: str) -> bool:
    current = document
    for token in pointer_tokens(pointer):
        if isinstance(current, list) and token.isdigit() and int(token) < len(current):
            current = current[int(token)]
        elif isinstance(current, dict) and token in current:
            current = current[token]
        else:
            return False
    return isinstance(current, (dict, bool))
