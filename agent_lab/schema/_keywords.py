"""One compile function per draft 2020-12 keyword; the dialect is a table of them per vocabulary.

A compile function receives the node's compile context (`cx`: the schema object, its base URI and
location, and ways to compile subschemas, follow references and compile regexes) and the keyword's
value, and returns a `Kw` (or None for keywords that only annotate). All schema work happens here, once.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import islice
from typing import Any, Callable, Dict, List, Optional

from ..jsonvalue import escape_pointer_token, json_equal, json_type
from ._messages import plural, show, show_list, show_number
from ._nodes import (
    ALL, ARRAY, NOTHING, NUMBER, OBJECT, STRING, Kw, always_true, base_py_type, everything_evaluated, union_of,
    violation, violation_about,
)

CompileFunction = Callable[..., Optional[Kw]]

# ---------------------------------------------------------------------------------------------
# type, enum, const
# ---------------------------------------------------------------------------------------------

_PY_TYPES_OF = {
    "null": (type(None),),
    "boolean": (bool,),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
    "number": (int, float),
    "integer": (int,),
}


def type_test(names: List[str]) -> Callable[[Any], bool]:
    """A predicate for "instance has one of these JSON types" (bool is no number, 1.0 is an integer)."""
    exact = frozenset(kind for name in names for kind in _PY_TYPES_OF.get(name, ()))
    integral_floats = "integer" in names and float not in exact
    if exact == {str}:
        return lambda instance: type(instance) is str or isinstance(instance, str)
    if exact == {dict}:
        return lambda instance: type(instance) is dict or isinstance(instance, dict)

    def test(instance: Any) -> bool:
        kind = type(instance)
        if kind in exact:
            return kind is not float or instance - instance == 0.0  # NaN and infinities are not JSON
        if kind is float:
            return integral_floats and instance.is_integer()
        base = base_py_type(instance)
        if base is None or base is kind:
            return False
        return base in exact or (base is float and integral_floats and instance.is_integer())

    return test


def compile_type(cx, value) -> Kw:
    names = [value] if isinstance(value, str) else list(value)
    test = type_test(names)
    phrase = "must be of type " + " or ".join(names)
    keyword_suffix = "/type"
    # The whole phrase per Python type, built once (floats differ: 1.0 is an integer, 1.5 a number).
    phrases = {kind: f"{phrase} (it is of type {json_type(sample)})"
               for kind, sample in ((type(None), None), (bool, True), (int, 0), (str, ""), (list, []), (dict, {}))}

    def collect(instance, instance_path, keyword_path, out):
        said = phrases.get(type(instance))
        if said is None:
            said = f"{phrase} (it is of type {json_type(instance)})"
        violation(out, instance_path, keyword_path + keyword_suffix, "type", said)

    return Kw("type", None, test, collect, cost=0, detail=names)


def membership_test(values: List[Any]) -> Callable[[Any], bool]:
    """A predicate for "instance equals one of `values`" under JSON equality, hashed where possible."""
    strings = {value for value in values if type(value) is str}
    numbers = {value for value in values if type(value) in (int, float)}
    booleans = {value for value in values if type(value) is bool}
    has_null = any(value is None for value in values)
    others = [value for value in values if type(value) not in (str, int, float, bool, type(None))]

    def test(instance: Any) -> bool:
        kind = type(instance)
        if kind is str:
            return instance in strings
        if kind is int or kind is float:
            return instance in numbers
        if kind is bool:
            return instance in booleans
        if instance is None:
            return has_null
        if kind is list or kind is dict:
            return any(json_equal(instance, other) for other in others)
        return any(json_equal(instance, value) for value in values)

    if not others and not has_null and not numbers and not booleans:
        def test_strings(instance: Any) -> bool:
            if type(instance) is str:
                return instance in strings
            # A str subclass (a str-mixin Enum) hashes differently; compare its plain string value.
            return isinstance(instance, str) and str.__str__(instance) in strings

        return test_strings
    return test


def compile_enum(cx, value) -> Kw:
    values = list(value)
    phrase = "must be one of: " + show_list(values)
    return Kw("enum", None, membership_test(values), _simple_collect("enum", phrase), cost=0, detail=values)


def compile_const(cx, value) -> Kw:
    phrase = "must be exactly " + show(value)
    return Kw("const", None, membership_test([value]), _simple_collect("const", phrase), cost=0, detail=[value])


def _simple_collect(keyword: str, phrase: str):
    suffix = "/" + keyword

    def collect(instance, instance_path, keyword_path, out):
        violation(out, instance_path, keyword_path + suffix, keyword, phrase)

    return collect


# ---------------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------------

def _exact_fraction(number: Any) -> Fraction:
    """The decimal a JSON number was written as (repr of a float), so 0.1 means one tenth exactly."""
    if isinstance(number, int):
        return Fraction(number)
    return Fraction(repr(float(number)))


_EXACT_FLOAT_INTEGERS = 2**53
"""Below this, an integral float's binary value and the decimal it prints as are the same integer."""


def compile_multiple_of(cx, value) -> Kw:
    divisor = value
    if isinstance(divisor, int) or (isinstance(divisor, float) and divisor.is_integer()
                                    and abs(divisor) < _EXACT_FLOAT_INTEGERS):
        whole = int(divisor)

        def check(instance):
            if type(instance) is int:
                return instance % whole == 0
            if isinstance(instance, float):
                if not (math.isfinite(instance) and instance.is_integer()):
                    return False
                if -_EXACT_FLOAT_INTEGERS < instance < _EXACT_FLOAT_INTEGERS:
                    return int(instance) % whole == 0
                return _exact_fraction(instance) % whole == 0  # 1e23 means 10**23, not the binary float
            return instance % whole == 0
    else:
        exact_divisor = _exact_fraction(divisor)

        def check(instance):
            if isinstance(instance, float) and not math.isfinite(instance):
                return False
            return (_exact_fraction(instance) / exact_divisor).denominator == 1

    return Kw("multipleOf", NUMBER, check,
              _simple_collect("multipleOf", f"must be a multiple of {show_number(divisor)}"))


def _bound(keyword: str, phrase: str, make_check) -> CompileFunction:
    def compile_bound(cx, value) -> Kw:
        return Kw(keyword, NUMBER, make_check(value), _simple_collect(keyword, f"{phrase} {show_number(value)}"),
                  detail=value)

    return compile_bound


compile_minimum = _bound("minimum", "must be greater than or equal to", lambda limit: lambda x: x >= limit)
compile_maximum = _bound("maximum", "must be less than or equal to", lambda limit: lambda x: x <= limit)
compile_exclusive_minimum = _bound("exclusiveMinimum", "must be greater than", lambda limit: lambda x: x > limit)
compile_exclusive_maximum = _bound("exclusiveMaximum", "must be less than", lambda limit: lambda x: x < limit)


# ---------------------------------------------------------------------------------------------
# strings
# ---------------------------------------------------------------------------------------------

def compile_max_length(cx, value) -> Kw:
    limit = value
    return Kw("maxLength", STRING, lambda x: len(x) <= limit,
              _simple_collect("maxLength", f"must be at most {plural(int(limit), 'character')} long"), detail=limit)


def compile_min_length(cx, value) -> Kw:
    limit = value
    return Kw("minLength", STRING, lambda x: len(x) >= limit,
              _simple_collect("minLength", f"must be at least {plural(int(limit), 'character')} long"), detail=limit)


def compile_pattern(cx, value) -> Kw:
    search = cx.regex(value, "pattern").search
    return Kw("pattern", STRING, lambda x: search(x) is not None,
              _simple_collect("pattern", f"must match the pattern {value}"), cost=2, detail=search)


def compile_format(cx, value) -> Optional[Kw]:
    if not cx.format_asserts:
        return None
    checker = cx.format_checker(value)
    if checker is None:
        return None  # unknown formats are annotations only

    def check(instance):
        try:
            return bool(checker(instance))
        except Exception:  # a checker bug must not crash validation; the value is simply not accepted
            return False

    return Kw("format", STRING, check, _simple_collect("format", f"must be a valid {value}"), cost=3)


# ---------------------------------------------------------------------------------------------
# arrays
# ---------------------------------------------------------------------------------------------

def compile_max_items(cx, value) -> Kw:
    limit = value
    return Kw("maxItems", ARRAY, lambda x: len(x) <= limit,
              _simple_collect("maxItems", f"must have at most {plural(int(limit), 'item')}"), detail=limit)


def compile_min_items(cx, value) -> Kw:
    limit = value
    return Kw("minItems", ARRAY, lambda x: len(x) >= limit,
              _simple_collect("minItems", f"must have at least {plural(int(limit), 'item')}"), detail=limit)


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a JSON value with JSON equality (1 == 1.0, True != 1)."""
    kind = json_type(value)
    if kind == "array":
        return ("array", tuple(_frozen(item) for item in value))
    if kind == "object":
        return ("object", frozenset((key, _frozen(item)) for key, item in value.items()))
    if kind in ("integer", "number"):
        if type(value) not in (int, float):  # int/float subclasses (IntEnum) hash differently
            value = float(value) if isinstance(value, float) else int(value)
        return ("number", value)
    if kind == "string" and type(value) is not str:
        return ("string", str.__str__(value))  # str subclasses (Enums) hash differently
    return (kind, value)


def compile_unique_items(cx, value) -> Optional[Kw]:
    if value is not True:
        return None

    def check(instance):
        seen = set()
        for item in instance:
            frozen = _frozen(item)
            if frozen in seen:
                return False
            seen.add(frozen)
        return True

    return Kw("uniqueItems", ARRAY, check,
              _simple_collect("uniqueItems", "must not contain duplicate items"), cost=3)


def compile_prefix_items(cx, value) -> Kw:
    nodes = [cx.child(schema, "prefixItems", index) for index, schema in enumerate(value)]
    checks = tuple(node.check for node in nodes)
    count = len(nodes)

    def check(instance):
        for one, item in zip(checks, instance):
            if not one(item):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for index, (node, item) in enumerate(zip(nodes, instance)):
            if not node.check(item):
                node.collect(item, f"{instance_path}/{index}", f"{keyword_path}/prefixItems/{index}", out)

    def eval_items(instance):
        return set(range(min(count, len(instance))))

    return Kw("prefixItems", ARRAY, check, collect, eval_items=eval_items, cost=5, self_checking=True)


def compile_items(cx, value) -> Kw:
    node = cx.child(value, "items")
    prefix = cx.schema.get("prefixItems")
    start = len(prefix) if isinstance(prefix, list) else 0
    one = node.check
    if value is False:
        def check(instance):
            return len(instance) <= start
    elif start == 0:
        def check(instance):
            return all(map(one, instance))
    else:
        def check(instance):
            return all(map(one, islice(instance, start, None)))

    def collect(instance, instance_path, keyword_path, out):
        if value is False:
            if len(instance) <= start:
                return
            phrase = "must be empty" if start == 0 else f"must have at most {plural(start, 'item')}"
            violation(out, instance_path, keyword_path + "/items", "items", phrase)
            return
        for index in range(start, len(instance)):
            item = instance[index]
            if not node.check(item):
                node.collect(item, f"{instance_path}/{index}", keyword_path + "/items", out)

    return Kw("items", ARRAY, check, collect, eval_items=lambda instance: ALL, cost=5, detail=node, self_checking=True)


def compile_contains(cx, value) -> Kw:
    node = cx.child(value, "contains")
    one = node.check
    least = cx.schema.get("minContains", 1) if cx.has_validation else 1
    most = cx.schema.get("maxContains") if cx.has_validation else None
    least_keyword = "minContains" if cx.has_validation and "minContains" in cx.schema else "contains"

    def check(instance):
        count = 0
        for item in instance:
            if one(item):
                count += 1
                if most is None and count >= least:
                    return True
                if most is not None and count > most:
                    return False
        return count >= least

    def collect(instance, instance_path, keyword_path, out):
        count = sum(1 for item in instance if one(item))
        if count < least:
            violation(out, instance_path, keyword_path + "/" + least_keyword, least_keyword,
                      f"must contain at least {plural(int(least), 'item')} matching the 'contains' schema")
        if most is not None and count > most:
            violation(out, instance_path, keyword_path + "/maxContains", "maxContains",
                      f"must contain at most {plural(int(most), 'item')} matching the 'contains' schema")

    def eval_items(instance):
        return {index for index, item in enumerate(instance) if one(item)}

    return Kw("contains", ARRAY, check, collect, eval_items=eval_items, cost=5, self_checking=True)


def compile_unevaluated_items(cx, value, siblings: List[Kw]) -> Kw:
    return _compile_unevaluated(cx, value, siblings, keyword="unevaluatedItems", types=ARRAY,
                                annotation="eval_items", members=enumerate,
                                refusal="is not allowed (no schema evaluates this item)")


# ---------------------------------------------------------------------------------------------
# objects
# ---------------------------------------------------------------------------------------------

def compile_max_properties(cx, value) -> Kw:
    limit = value
    return Kw("maxProperties", OBJECT, lambda x: len(x) <= limit,
              _simple_collect("maxProperties", f"must have at most {plural(int(limit), 'property')}"))


def compile_min_properties(cx, value) -> Kw:
    limit = value
    return Kw("minProperties", OBJECT, lambda x: len(x) >= limit,
              _simple_collect("minProperties", f"must have at least {plural(int(limit), 'property')}"))


def compile_required(cx, value) -> Optional[Kw]:
    names = tuple(dict.fromkeys(value))
    if not names:
        return None

    def check(instance):
        for name in names:
            if name not in instance:
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for name in names:
            if name not in instance:
                violation_about(out, instance_path, keyword_path + "/required", "required",
                                instance_path + "/" + escape_pointer_token(name), "is required")

    return Kw("required", OBJECT, check, collect, cost=0, detail=names, self_checking=True)


def compile_dependent_required(cx, value) -> Optional[Kw]:
    rules = tuple((trigger, tuple(names)) for trigger, names in value.items() if names)
    if not rules:
        return None

    def check(instance):
        for trigger, names in rules:
            if trigger in instance:
                for name in names:
                    if name not in instance:
                        return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for trigger, names in rules:
            if trigger not in instance:
                continue
            for name in names:
                if name not in instance:
                    violation_about(out, instance_path,
                                    f"{keyword_path}/dependentRequired/{escape_pointer_token(trigger)}",
                                    "dependentRequired", instance_path + "/" + escape_pointer_token(name),
                                    f"is required when '{trigger}' is present")

    return Kw("dependentRequired", OBJECT, check, collect, cost=1, self_checking=True)


def compile_properties(cx, value) -> Kw:
    nodes = {name: cx.child(schema, "properties", name) for name, schema in value.items()}
    pairs = tuple((name, node.check) for name, node in nodes.items())
    names = frozenset(nodes)

    def check(instance):
        for name, one in pairs:
            if name in instance and not one(instance[name]):
                return False
        return True

    located = tuple((name, node.check, node, "/" + escape_pointer_token(name)) for name, node in nodes.items())

    def collect(instance, instance_path, keyword_path, out):
        for name, one, node, token in located:
            if name in instance and not one(instance[name]):
                node.collect(instance[name], instance_path + token, keyword_path + "/properties" + token, out)

    def eval_props(instance):
        return names.intersection(instance)

    return Kw("properties", OBJECT, check, collect, eval_props=eval_props, cost=5, detail=nodes, self_checking=True)


def compile_pattern_properties(cx, value) -> Kw:
    rules = tuple(
        (pattern, cx.regex(pattern, "patternProperties", pattern).search,
         cx.child(schema, "patternProperties", pattern))
        for pattern, schema in value.items()
    )

    def check(instance):
        for name, item in instance.items():
            for _pattern, search, node in rules:
                if search(name) is not None and not node.check(item):
                    return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for name, item in instance.items():
            for pattern, search, node in rules:
                if search(name) is not None and not node.check(item):
                    node.collect(item, f"{instance_path}/{escape_pointer_token(name)}",
                                 f"{keyword_path}/patternProperties/{escape_pointer_token(pattern)}", out)

    def eval_props(instance):
        return {name for name in instance if any(search(name) is not None for _p, search, _n in rules)}

    return Kw("patternProperties", OBJECT, check, collect, eval_props=eval_props, cost=6, self_checking=True)


def compile_additional_properties(cx, value) -> Kw:
    node = cx.child(value, "additionalProperties")
    one = node.check
    known = frozenset(cx.schema.get("properties", {}) if isinstance(cx.schema.get("properties"), dict) else ())
    patterns = cx.schema.get("patternProperties")
    searches = tuple(cx.regex(p, "patternProperties", p).search for p in patterns) if isinstance(patterns, dict) else ()

    def is_additional(name):
        if name in known:
            return False
        for search in searches:
            if search(name) is not None:
                return False
        return True

    if value is False and not searches:
        def check(instance):
            return known.issuperset(instance)
    else:
        def check(instance):
            for name, item in instance.items():
                if is_additional(name) and not one(item):
                    return False
            return True

    def collect(instance, instance_path, keyword_path, out):
        if not searches and known.issuperset(instance):
            return
        for name, item in instance.items():
            if not is_additional(name) or one(item):
                continue
            item_path = f"{instance_path}/{escape_pointer_token(name)}"
            if value is False:
                violation(out, item_path, keyword_path + "/additionalProperties", "additionalProperties",
                          "is not an allowed property")
            else:
                node.collect(item, item_path, keyword_path + "/additionalProperties", out)

    return Kw("additionalProperties", OBJECT, check, collect, eval_props=lambda instance: ALL, cost=4,
              detail=node, self_checking=True)


def compile_property_names(cx, value) -> Kw:
    node = cx.child(value, "propertyNames")
    one = node.check

    def check(instance):
        return all(map(one, instance))

    def collect(instance, instance_path, keyword_path, out):
        for name in instance:
            if not one(name):
                violation(out, f"{instance_path}/{escape_pointer_token(name)}", keyword_path + "/propertyNames",
                          "propertyNames", "is not an allowed property name")

    return Kw("propertyNames", OBJECT, check, collect, cost=4, self_checking=True)


def compile_dependent_schemas(cx, value) -> Kw:
    rules = tuple((trigger, cx.inplace(schema, "dependentSchemas", trigger)) for trigger, schema in value.items())

    def check(instance):
        for trigger, node in rules:
            if trigger in instance and not node.check(instance):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for trigger, node in rules:
            if trigger in instance and not node.check(instance):
                node.collect(instance, instance_path,
                             f"{keyword_path}/dependentSchemas/{escape_pointer_token(trigger)}", out)

    def eval_props(instance):
        return _gather(node.evaluated_props(instance) for trigger, node in rules
                       if trigger in instance and node.check(instance))

    return Kw("dependentSchemas", OBJECT, check, collect, eval_props=eval_props, cost=7, self_checking=True)


def compile_unevaluated_properties(cx, value, siblings: List[Kw]) -> Kw:
    return _compile_unevaluated(cx, value, siblings, keyword="unevaluatedProperties", types=OBJECT,
                                annotation="eval_props", members=dict.items, refusal="is not an allowed property")


def _compile_unevaluated(cx, value, siblings: List[Kw], *, keyword: str, types, annotation: str,
                         members: Callable[[Any], Any], refusal: str) -> Kw:
    """unevaluatedItems and unevaluatedProperties: one rule over (index, item) or (name, member) pairs.

    `annotation` names the Kw attribute ("eval_items" or "eval_props") through which the sibling
    keywords report what they evaluated; the rest is the same for arrays and objects.
    """
    node = cx.child(value, keyword)
    one = node.check
    evaluated = union_of([getattr(kw, annotation) for kw in siblings if getattr(kw, annotation)])
    suffix = "/" + keyword

    def check(instance):
        seen = evaluated(instance)
        if seen is ALL:
            return True
        for key, item in members(instance):
            if key not in seen and not one(item):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        seen = evaluated(instance)
        if seen is ALL:
            return
        for key, item in members(instance):
            if key in seen or one(item):
                continue
            item_path = f"{instance_path}/{escape_pointer_token(key)}"
            if value is False:
                violation(out, item_path, keyword_path + suffix, keyword, refusal)
            else:
                node.collect(item, item_path, keyword_path + suffix, out)

    compiled = Kw(keyword, types, check, collect, cost=9, self_checking=True)
    setattr(compiled, annotation, everything_evaluated)  # it evaluates every member that is left
    return compiled


# ---------------------------------------------------------------------------------------------
# in-place applicators
# ---------------------------------------------------------------------------------------------

def _gather(parts) -> Any:
    result: set = set()
    for part in parts:
        if part is ALL:
            return ALL
        result.update(part)
    return result


def _valid_branch_annotations(nodes):
    def eval_props(instance):
        return _gather(node.evaluated_props(instance) for node in nodes if node.check(instance))

    def eval_items(instance):
        return _gather(node.evaluated_items(instance) for node in nodes if node.check(instance))

    return eval_props, eval_items


def compile_all_of(cx, value) -> Kw:
    nodes = [cx.inplace(schema, "allOf", index) for index, schema in enumerate(value)]
    checks = tuple(node.check for node in nodes)

    def check(instance):
        for one in checks:
            if not one(instance):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for index, node in enumerate(nodes):
            if not node.check(instance):
                node.collect(instance, instance_path, f"{keyword_path}/allOf/{index}", out)

    eval_props, eval_items = _valid_branch_annotations(nodes)
    return Kw("allOf", None, check, collect, eval_props=eval_props, eval_items=eval_items, cost=8, self_checking=True)


def compile_any_of(cx, value) -> Kw:
    nodes = [cx.inplace(schema, "anyOf", index) for index, schema in enumerate(value)]
    checks = tuple(node.check for node in nodes)
    phrase = _alternative_types_phrase(value) or f"must match at least one of the {len(nodes)} 'anyOf' alternatives"

    def check(instance):
        for one in checks:
            if one(instance):
                return True
        return False

    eval_props, eval_items = _valid_branch_annotations(nodes)
    return Kw("anyOf", None, check, _simple_collect("anyOf", phrase),
              eval_props=eval_props, eval_items=eval_items, cost=8)


_ANNOTATIONS = {"title", "description", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly"}


def _alternative_types_phrase(alternatives: List[Any]) -> Optional[str]:
    """"must be of type string or null" when every alternative is only a `type` (the common nullable)."""
    names: List[str] = []
    for alternative in alternatives:
        if not isinstance(alternative, dict) or not set(alternative) - _ANNOTATIONS == {"type"}:
            return None
        kind = alternative["type"]
        names.extend([kind] if isinstance(kind, str) else kind)
    return "must be of type " + " or ".join(dict.fromkeys(names)) if names else None


def compile_one_of(cx, value) -> Kw:
    nodes = [cx.inplace(schema, "oneOf", index) for index, schema in enumerate(value)]
    checks = tuple(node.check for node in nodes)

    def check(instance):
        matched = False
        for one in checks:
            if one(instance):
                if matched:
                    return False
                matched = True
        return matched

    def collect(instance, instance_path, keyword_path, out):
        count = sum(1 for one in checks if one(instance))
        detail = "it matches none" if count == 0 else f"it matches {count}"
        violation(out, instance_path, keyword_path + "/oneOf", "oneOf",
                  f"must match exactly one of the {len(nodes)} 'oneOf' alternatives ({detail})")

    eval_props, eval_items = _valid_branch_annotations(nodes)
    return Kw("oneOf", None, check, collect, eval_props=eval_props, eval_items=eval_items, cost=8)


def compile_not(cx, value) -> Kw:
    node = cx.inplace(value, "not")
    one = node.check
    return Kw("not", None, lambda instance: not one(instance),
              _simple_collect("not", "must not match the schema in 'not'"), cost=8)


def compile_if(cx, value) -> Kw:
    condition = cx.inplace(value, "if")
    then_node = cx.inplace(cx.schema["then"], "then") if "then" in cx.schema else None
    else_node = cx.inplace(cx.schema["else"], "else") if "else" in cx.schema else None
    test = condition.check
    then_check = then_node.check if then_node is not None else always_true
    else_check = else_node.check if else_node is not None else always_true

    if then_node is None and else_node is None:
        check = always_true
    else:
        def check(instance):
            if test(instance):
                return then_check(instance)
            return else_check(instance)

    def collect(instance, instance_path, keyword_path, out):
        if test(instance):
            if then_node is not None:
                then_node.collect(instance, instance_path, keyword_path + "/then", out)
        elif else_node is not None:
            else_node.collect(instance, instance_path, keyword_path + "/else", out)

    def branch(instance):
        if test(instance):
            return [condition] + ([then_node] if then_node is not None else [])
        return [else_node] if else_node is not None else []

    def eval_props(instance):
        return _gather(node.evaluated_props(instance) for node in branch(instance) if node.check(instance))

    def eval_items(instance):
        return _gather(node.evaluated_items(instance) for node in branch(instance) if node.check(instance))

    return Kw("if", None, check, collect, eval_props=eval_props, eval_items=eval_items, cost=8, self_checking=True)


# ---------------------------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------------------------

def compile_ref(cx, value) -> Kw:
    target = cx.ref(value, "$ref")
    return _reference_kw("$ref", lambda: target, cx, target)


def compile_dynamic_ref(cx, value) -> Kw:
    initial = cx.ref(value, "$dynamicRef")
    name = cx.dynamic_anchor_name(value, initial)
    if name is None:  # no bookending $dynamicAnchor: behaves exactly like $ref
        return _reference_kw("$dynamicRef", lambda: initial, cx, initial)
    resolve = cx.dynamic_resolver(name, initial)
    return _reference_kw("$dynamicRef", resolve, cx, None)


def _reference_kw(keyword: str, resolve, cx, static_target) -> Kw:
    suffix = "/" + keyword
    local = cx.dynamic_local
    if static_target is not None and local is None:
        target = static_target
        check = target.check  # the node's own trampoline while a reference cycle is still compiling

        def collect(instance, instance_path, keyword_path, out):
            target.collect(instance, instance_path, keyword_path + suffix, out)

        def eval_props(instance):
            return target.evaluated_props(instance) if target.check(instance) else NOTHING

        def eval_items(instance):
            return target.evaluated_items(instance) if target.check(instance) else NOTHING

        return Kw(keyword, None, check, collect, eval_props=eval_props, eval_items=eval_items, cost=7,
                  self_checking=True)

    def entered(function):
        def call(instance, *rest):
            target = resolve()
            stack = local.stack
            stack.append(target.base)
            try:
                return function(target, instance, *rest)
            finally:
                stack.pop()

        return call

    check = entered(lambda target, instance: target.check(instance))
    collect_in = entered(lambda target, instance, ip, kp, out: target.collect(instance, ip, kp + suffix, out))
    eval_props = entered(lambda target, x: target.evaluated_props(x) if target.check(x) else NOTHING)
    eval_items = entered(lambda target, x: target.evaluated_items(x) if target.check(x) else NOTHING)
    return Kw(keyword, None, check, collect_in, eval_props=eval_props, eval_items=eval_items, cost=7,
              self_checking=True)


def compile_defs(cx, value) -> None:
    """Compile definitions eagerly, so a bad pattern in an unused definition is still a SchemaError."""
    for name, schema in value.items():
        cx.child(schema, "$defs", name)
    return None


# ---------------------------------------------------------------------------------------------
# the dialect: vocabulary URI -> {keyword: compile function}
# ---------------------------------------------------------------------------------------------

VOCAB = "https://json-schema.org/draft/2020-12/vocab/"
CORE = VOCAB + "core"
APPLICATOR = VOCAB + "applicator"
UNEVALUATED = VOCAB + "unevaluated"
VALIDATION = VOCAB + "validation"
META_DATA = VOCAB + "meta-data"
FORMAT_ANNOTATION = VOCAB + "format-annotation"
FORMAT_ASSERTION = VOCAB + "format-assertion"
CONTENT = VOCAB + "content"

VOCABULARIES: Dict[str, Dict[str, CompileFunction]] = {
    CORE: {"$ref": compile_ref, "$dynamicRef": compile_dynamic_ref, "$defs": compile_defs},
    APPLICATOR: {
        "prefixItems": compile_prefix_items, "items": compile_items, "contains": compile_contains,
        "additionalProperties": compile_additional_properties, "properties": compile_properties,
        "patternProperties": compile_pattern_properties, "dependentSchemas": compile_dependent_schemas,
        "propertyNames": compile_property_names, "if": compile_if,
        "allOf": compile_all_of, "anyOf": compile_any_of, "oneOf": compile_one_of, "not": compile_not,
    },
    UNEVALUATED: {"unevaluatedItems": compile_unevaluated_items,
                  "unevaluatedProperties": compile_unevaluated_properties},
    VALIDATION: {
        "type": compile_type, "enum": compile_enum, "const": compile_const,
        "multipleOf": compile_multiple_of, "maximum": compile_maximum, "minimum": compile_minimum,
        "exclusiveMaximum": compile_exclusive_maximum, "exclusiveMinimum": compile_exclusive_minimum,
        "maxLength": compile_max_length, "minLength": compile_min_length, "pattern": compile_pattern,
        "maxItems": compile_max_items, "minItems": compile_min_items, "uniqueItems": compile_unique_items,
        "maxProperties": compile_max_properties, "minProperties": compile_min_properties,
        "required": compile_required, "dependentRequired": compile_dependent_required,
    },
    META_DATA: {},
    FORMAT_ANNOTATION: {"format": compile_format},
    FORMAT_ASSERTION: {"format": compile_format},
    CONTENT: {},
}

DEFAULT_VOCABULARIES = frozenset(VOCABULARIES) - {FORMAT_ASSERTION}
LATE_KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")
