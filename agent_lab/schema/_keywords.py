"""One compile function per draft 2020-12 keyword; the dialect is a table of them per vocabulary.

A compile function receives the node's compile context (`cx`: the schema object, its base URI and
location, and ways to compile subschemas, follow references and compile regexes) and the keyword's
value, and returns a `Kw` (or None for keywords that only annotate). All schema work happens here, once.
"""

from __future__ import annotations

import math
import struct
import sys
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ..jsonvalue import EXACT_FLOAT_RANGE, escape_pointer_token, json_equal, json_number, json_type
from ._messages import plural, show, show_list, show_number
from ._nodes import (
    ALL, ARRAY, NOTHING, NUMBER, OBJECT, STRING, Kw, always_true, base_py_type, everything_evaluated, union_of,
    violation, violation_about,
)

if TYPE_CHECKING:
    from fractions import Fraction

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


def type_test(names: List[str], *, integral_floats_are_integers: bool = True) -> Callable[[Any], bool]:
    """A predicate for "instance has one of these JSON types" (bool is no number, 1.0 is an integer,
    except in draft-04, whose integer is a number written without a fraction)."""
    exact = frozenset(kind for name in names for kind in _PY_TYPES_OF.get(name, ()))
    integral_floats = integral_floats_are_integers and "integer" in names and float not in exact
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
    return _compile_type(value, integral_floats_are_integers=True)


def compile_type_draft4(cx, value) -> Kw:
    """draft-04's `type`: an integer is a number without a fraction, so 1.0 is a number, not an integer."""
    return _compile_type(value, integral_floats_are_integers=False)


def _compile_type(value, *, integral_floats_are_integers: bool) -> Kw:
    names = [value] if isinstance(value, str) else list(value)
    test = type_test(names, integral_floats_are_integers=integral_floats_are_integers)
    phrase = "must be of type " + " or ".join(names)
    keyword_suffix = "/type"
    phrases = _type_phrases(phrase, integral_floats_are_integers)

    def collect(instance, instance_path, keyword_path, out):
        said = phrases.get(type(instance))
        if said is None:
            said = f"{phrase} (it is of type {json_type(instance)})"
        violation(out, instance_path, keyword_path + keyword_suffix, "type", said)

    # Every value of these Python types (a str subclass too: `test` reads its base type) has the type;
    # a float has it or not by its value (1.0 is an integer), so it is never one of them.
    exact = frozenset(kind for name in names for kind in _PY_TYPES_OF.get(name, ()))
    return Kw("type", None, test, collect, cost=0, detail=names, passes_for=exact - {float})


@lru_cache(maxsize=256)
def _type_phrases(phrase: str, integral_floats_are_integers: bool) -> Dict[type, str]:
    """The whole phrase per Python type, built once per phrase and shared by every schema that says it
    (floats differ: 1.0 is an integer, 1.5 a number). Read only."""
    phrases: Dict[type, str] = {
        kind: f"{phrase} (it is of type {json_type(sample)})"
        for kind, sample in ((type(None), None), (bool, True), (int, 0), (str, ""), (list, []), (dict, {}))
    }
    if not integral_floats_are_integers:
        phrases[float] = f"{phrase} (it is of type number)"
    return phrases


def _large(number: Any) -> bool:
    """Whether a number needs `json_number` to meet another (magnitude 2**53 or more)."""
    return number >= EXACT_FLOAT_RANGE or number <= -EXACT_FLOAT_RANGE


def membership_test(values: List[Any]) -> Callable[[Any], bool]:
    """A predicate for "instance equals one of `values`" under JSON equality, hashed where possible.

    Numbers are hashed as `json_number` gives them (1e23 as 10**23). Only when one of them is 2**53 or
    more in magnitude can a float instance need the same (below that no int and float disagree), so
    only then does the test read a float instance through it."""
    strings = {value for value in values if type(value) is str}
    numbers = {json_number(value) for value in values if type(value) in (int, float)}
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
    if any(_large(number) for number in numbers):
        exact = test

        def test(instance: Any) -> bool:
            return json_number(instance) in numbers if type(instance) is float else exact(instance)
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
    from fractions import Fraction  # (and decimal) only for a multipleOf that floats cannot decide

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


def _bound_check(make_check, value) -> Tuple[Callable[[Any], bool], Any]:
    """(check, limit): the limit as `json_number` gives it (1e23 as 10**23), so a bound compares the
    decimals a schema and an instance are written as. A limit below 2**53 in magnitude compares with
    any instance as Python does; a larger one reads float instances through `json_number` too."""
    limit = json_number(value)
    check = make_check(limit)
    if not _large(limit):
        return check, limit
    plain = check
    return (lambda x: plain(json_number(x))), limit


def _bound(keyword: str, phrase: str, make_check) -> Callable[..., Kw]:
    def compile_bound(cx, value) -> Kw:
        check, limit = _bound_check(make_check, value)
        return Kw(keyword, NUMBER, check, _simple_collect(keyword, f"{phrase} {show_number(value)}"),
                  detail=limit)

    return compile_bound


compile_minimum = _bound("minimum", "must be greater than or equal to", lambda limit: lambda x: x >= limit)
compile_maximum = _bound("maximum", "must be less than or equal to", lambda limit: lambda x: x <= limit)
compile_exclusive_minimum = _bound("exclusiveMinimum", "must be greater than", lambda limit: lambda x: x > limit)
compile_exclusive_maximum = _bound("exclusiveMaximum", "must be less than", lambda limit: lambda x: x < limit)


def compile_minimum_draft4(cx, value) -> Kw:
    """draft-04's `minimum`, made strict by a sibling `"exclusiveMinimum": true` (a boolean there)."""
    if cx.schema.get("exclusiveMinimum") is not True:
        return compile_minimum(cx, value)
    # detail stays None: the fused leaf shapes know `minimum` as inclusive and must not fuse this one.
    check, _limit = _bound_check(lambda limit: lambda x: x > limit, value)
    return Kw("minimum", NUMBER, check, _simple_collect("minimum", f"must be greater than {show_number(value)}"))


def compile_maximum_draft4(cx, value) -> Kw:
    """draft-04's `maximum`, made strict by a sibling `"exclusiveMaximum": true`."""
    if cx.schema.get("exclusiveMaximum") is not True:
        return compile_maximum(cx, value)
    check, _limit = _bound_check(lambda limit: lambda x: x < limit, value)
    return Kw("maximum", NUMBER, check, _simple_collect("maximum", f"must be less than {show_number(value)}"))


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


_DOUBLE = struct.Struct("<d")
_HASH_MODULUS = sys.hash_info.modulus  # 2**61 - 1: Python hashes an int as its value modulo this


def unique_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value: equal under JSON equality (1 == 1.0, True != 1, key order
    irrelevant) exactly when the values are, with a hash a sender cannot aim at.

    Why not the values themselves: Python hashes an int as its value modulo 2**61 - 1, so a model
    can send a thousand distinct integers that all hash alike, and the set of seen items turns
    quadratic (a 16 KiB array took 45 ms, a 1 MiB one minutes; floats can be aimed the same way).
    Integers below the modulus hash to themselves, all distinct, and stay as they are; larger ones
    and fractional floats become bytes, hashed like strings with the per-process random key of
    Python's SipHash.
    """
    kind = type(value)
    if kind is str:
        return value
    if kind is int and -_HASH_MODULUS < value < _HASH_MODULUS:
        return value  # distinct hashes here (but for -1 and -2): nothing to aim at
    if kind is dict:
        return ("o", frozenset([(key if type(key) is str else str.__str__(key), unique_key(item))
                                for key, item in value.items()]))
    if kind is list:
        return ("a", tuple([unique_key(item) for item in value]))
    if kind is bool or value is None:
        return ("c", value)  # constants: tagged, so True never meets 1
    if kind is int or kind is float or isinstance(value, (int, float)):
        if isinstance(value, float) and not value.is_integer():
            return ("f", _DOUBLE.pack(value))  # no integer equals it; equal floats have equal bits
        # Integral floats meet the integers they equal (1.0 and 1; 1e23 and 10**23: see json_number).
        number = int(value) if -EXACT_FLOAT_RANGE < value < EXACT_FLOAT_RANGE else int(json_number(value))
        if -_HASH_MODULUS < number < _HASH_MODULUS:
            return number
        return ("i", number.to_bytes(number.bit_length() // 8 + 1, "little", signed=True))
    if isinstance(value, str):
        return str.__str__(value)  # str subclasses (Enums) hash differently
    if isinstance(value, dict):
        return unique_key(dict(value))
    if isinstance(value, list):
        return unique_key(list(value))
    return ("c", value)


def compile_unique_items(cx, value) -> Optional[Kw]:
    if value is not True:
        return None

    def check(instance):
        seen = set()
        for item in instance:
            key = unique_key(item)
            if key in seen:
                return False
            seen.add(key)
        return True

    return Kw("uniqueItems", ARRAY, check,
              _simple_collect("uniqueItems", "must not contain duplicate items"), cost=3)


def compile_prefix_items(cx, value) -> Kw:
    return _tuple_items(cx, value, "prefixItems")


def compile_items(cx, value) -> Kw:
    """2020-12's `items`: one schema for the items after those `prefixItems` describes."""
    prefix = cx.schema.get("prefixItems")
    return _items_after(cx, value, len(prefix) if isinstance(prefix, list) else 0, "items")


def compile_items_array_or_schema(cx, value) -> Kw:
    """`items` before 2020-12: one schema for every item, or a list of schemas, one per position."""
    if isinstance(value, list):
        return _tuple_items(cx, value, "items")
    return _items_after(cx, value, 0, "items")


def compile_additional_items(cx, value) -> Optional[Kw]:
    """`additionalItems` (before 2020-12): the items after a list-form `items`; ignored without one."""
    items = cx.schema.get("items")
    if not isinstance(items, list):
        return None
    return _items_after(cx, value, len(items), "additionalItems")


def _tuple_items(cx, value, keyword: str) -> Kw:
    """One schema per position (2020-12's `prefixItems`, the list form of `items` before it)."""
    nodes = [cx.child(schema, keyword, index) for index, schema in enumerate(value)]
    checks = tuple(node.check for node in nodes)
    count = len(nodes)
    prefix = f"/{keyword}/"

    def check(instance):
        for one, item in zip(checks, instance):
            if not one(item):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for index, (node, item) in enumerate(zip(nodes, instance)):
            if not node.check(item):
                node.collect(item, f"{instance_path}/{index}", f"{keyword_path}{prefix}{index}", out)

    def eval_items(instance):
        return set(range(min(count, len(instance))))

    return Kw(keyword, ARRAY, check, collect, eval_items=eval_items, cost=5, self_checking=True)


def _items_after(cx, value, start: int, keyword: str) -> Kw:
    """One schema for every item from index `start` on (`items`, `additionalItems`)."""
    node = cx.child(value, keyword)
    one = node.check
    suffix = "/" + keyword
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
            violation(out, instance_path, keyword_path + suffix, keyword, phrase)
            return
        for index in range(start, len(instance)):
            item = instance[index]
            if not node.check(item):
                node.collect(item, f"{instance_path}/{index}", keyword_path + suffix, out)

    # `detail` (the item schema's node) lets the array shape fuse `items` when it covers every item.
    return Kw(keyword, ARRAY, check, collect, eval_items=lambda instance: ALL, cost=5,
              detail=node if start == 0 else None, self_checking=True)


def compile_contains(cx, value) -> Kw:
    """2020-12's `contains`: bounded by minContains/maxContains; the items it matches count as evaluated."""
    return _contains(cx, value, bounded=cx.has_validation, annotates=True)


def compile_contains_2019_09(cx, value) -> Kw:
    """2019-09's `contains`: bounded by minContains/maxContains, but no annotation for unevaluatedItems."""
    return _contains(cx, value, bounded=cx.has_validation, annotates=False)


def compile_contains_draft6(cx, value) -> Kw:
    """`contains` in drafts 6 and 7: at least one matching item (minContains and maxContains came later)."""
    return _contains(cx, value, bounded=False, annotates=False)


def _contains(cx, value, *, bounded: bool, annotates: bool) -> Kw:
    node = cx.child(value, "contains")
    one = node.check
    least = cx.schema.get("minContains", 1) if bounded else 1
    most = cx.schema.get("maxContains") if bounded else None
    least_keyword = "minContains" if bounded and "minContains" in cx.schema else "contains"

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

    if annotates:
        cx.rechecked(node)
    return Kw("contains", ARRAY, check, collect, eval_items=eval_items if annotates else None, cost=5,
              self_checking=True)


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


def _dependents_present(rules, instance) -> bool:
    """For each (trigger, names) rule whose trigger is a member of `instance`, every name is one too."""
    for trigger, names in rules:
        if trigger in instance:
            for name in names:
                if name not in instance:
                    return False
    return True


def compile_dependent_required(cx, value) -> Optional[Kw]:
    rules = tuple((trigger, tuple(names)) for trigger, names in value.items() if names)
    if not rules:
        return None

    def check(instance):
        return _dependents_present(rules, instance)

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


_NAME_SETS: Dict[frozenset, frozenset] = {}
_MAX_NAME_SETS = 4096


def _names(names: Any) -> frozenset:
    """The set of these property names, one object for equal sets (`properties` and the
    `additionalProperties` beside it both keep one; so do equal schemas)."""
    key = frozenset(names)
    found = _NAME_SETS.get(key)
    if found is None:
        if len(_NAME_SETS) >= _MAX_NAME_SETS:
            _NAME_SETS.clear()  # a bound, not a cache policy: the sets already handed out stay valid
        found = _NAME_SETS.setdefault(key, key)
    return found


def compile_properties(cx, value) -> Kw:
    nodes = {name: cx.child(schema, "properties", name) for name, schema in value.items()}
    pairs = tuple((name, node.check) for name, node in nodes.items())
    names = _names(nodes)

    def check(instance):
        for name, one in pairs:
            if name in instance and not one(instance[name]):
                return False
        return True

    located: List[Any] = []  # built on the first failing value: most schemas never report one

    def collect(instance, instance_path, keyword_path, out):
        if not located:
            located.append(tuple((name, node.check, node, "/" + escape_pointer_token(name),
                                  "/properties/" + escape_pointer_token(name)) for name, node in nodes.items()))
        for name, one, node, token, keyword_token in located[0]:
            if name in instance and not one(instance[name]):
                node.collect(instance[name], instance_path + token, keyword_path + keyword_token, out)

    return Kw("properties", OBJECT, check, collect, eval_props=names.intersection, cost=5, detail=nodes,
              self_checking=True)


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
    known = _names(cx.schema.get("properties", {}) if isinstance(cx.schema.get("properties"), dict) else ())
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


def compile_dependencies(cx, value) -> Optional[Kw]:
    """`dependencies` (before 2019-09 split it): per trigger property, either the names that must be
    present with it (an array, as dependentRequired) or a schema the object must then satisfy (as
    dependentSchemas). Each rule reports under /dependencies/<trigger>."""
    required_rules = tuple((trigger, tuple(names)) for trigger, names in value.items()
                           if isinstance(names, list) and names)
    schema_rules = tuple((trigger, cx.inplace(schema, "dependencies", trigger)) for trigger, schema in value.items()
                         if not isinstance(schema, list))
    if not required_rules and not schema_rules:
        return None

    def check(instance):
        if not _dependents_present(required_rules, instance):
            return False
        for trigger, node in schema_rules:
            if trigger in instance and not node.check(instance):
                return False
        return True

    def collect(instance, instance_path, keyword_path, out):
        for trigger, rule in value.items():
            if trigger not in instance:
                continue
            path = f"{keyword_path}/dependencies/{escape_pointer_token(trigger)}"
            if isinstance(rule, list):
                for name in dict.fromkeys(rule):
                    if name not in instance:
                        violation_about(out, instance_path, path, "dependencies",
                                        instance_path + "/" + escape_pointer_token(name),
                                        f"is required when '{trigger}' is present")
        for trigger, node in schema_rules:
            if trigger in instance and not node.check(instance):
                node.collect(instance, instance_path, f"{keyword_path}/dependencies/{escape_pointer_token(trigger)}",
                             out)

    def eval_props(instance):
        return _gather(node.evaluated_props(instance) for trigger, node in schema_rules
                       if trigger in instance and node.check(instance))

    return Kw("dependencies", OBJECT, check, collect, eval_props=eval_props if schema_rules else None, cost=7,
              self_checking=True)


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
    cx.reads_annotations()
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


def compile_recursive_ref(cx, value) -> Kw:
    """2019-09's `$recursiveRef`: like `$ref`, unless its target's resource says `"$recursiveAnchor": true`;
    then it lands on the outermost resource of the unbroken chain of such resources in the dynamic scope."""
    initial = cx.ref(value, "$recursiveRef")
    resolve = cx.recursive_resolver(initial)
    if resolve is None:
        return _reference_kw("$recursiveRef", lambda: initial, cx, initial)
    return _reference_kw("$recursiveRef", resolve, cx, None)


def compile_dynamic_ref(cx, value) -> Kw:
    initial = cx.ref(value, "$dynamicRef")
    name = cx.dynamic_anchor_name(value, initial)
    if name is None:  # no bookending $dynamicAnchor: behaves exactly like $ref
        return _reference_kw("$dynamicRef", lambda: initial, cx, initial)
    resolve = cx.dynamic_resolver(name, initial)
    return _reference_kw("$dynamicRef", resolve, cx, None)


def _reference_kw(keyword: str, resolve, cx, static_target) -> Kw:
    suffix = "/" + keyword
    local = cx.scope_state
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
            scopes = local.scopes
            outer = scopes[-1]
            inner = outer.entered.get(target.base) or outer.enter(target.base)
            if inner is outer:  # entering it changes nothing a reference could resolve to
                return function(target, instance, *rest)
            scopes.append(inner)
            try:
                return function(target, instance, *rest)
            finally:
                scopes.pop()

        return call

    if static_target is not None:
        target, base = static_target, static_target.base

        def check(instance):  # entered() inlined: one frame less per reference on deep instances
            scopes = local.scopes
            outer = scopes[-1]
            inner = outer.entered.get(base) or outer.enter(base)
            if inner is outer:
                return target.check(instance)
            scopes.append(inner)
            try:
                return target.check(instance)
            finally:
                scopes.pop()
    else:
        def check(instance):
            found = resolve()
            scopes = local.scopes
            outer = scopes[-1]
            inner = outer.entered.get(found.base) or outer.enter(found.base)
            if inner is outer:
                return found.check(instance)
            scopes.append(inner)
            try:
                return found.check(instance)
            finally:
                scopes.pop()

    collect_in = entered(lambda target, instance, ip, kp, out: target.collect(instance, ip, kp + suffix, out))
    eval_props = entered(lambda target, x: target.evaluated_props(x) if target.check(x) else NOTHING)
    eval_items = entered(lambda target, x: target.evaluated_items(x) if target.check(x) else NOTHING)
    return Kw(keyword, None, check, collect_in, eval_props=eval_props, eval_items=eval_items, cost=7,
              self_checking=True)


def compile_defs(cx, value) -> None:
    """Compile definitions eagerly, so a bad pattern in an unused definition is still a SchemaError."""
    for name, schema in value.items():
        cx.definition(schema, "$defs", name)
    return None


def compile_definitions(cx, value) -> None:
    """`definitions`, the name of `$defs` before 2019-09: compiled eagerly too."""
    for name, schema in value.items():
        cx.definition(schema, "definitions", name)
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

VOCAB_2019_09 = "https://json-schema.org/draft/2019-09/vocab/"
CORE_2019_09 = VOCAB_2019_09 + "core"
APPLICATOR_2019_09 = VOCAB_2019_09 + "applicator"
VALIDATION_2019_09 = VOCAB_2019_09 + "validation"
META_DATA_2019_09 = VOCAB_2019_09 + "meta-data"
FORMAT_2019_09 = VOCAB_2019_09 + "format"
CONTENT_2019_09 = VOCAB_2019_09 + "content"

_VALIDATION_KEYWORDS: Dict[str, CompileFunction] = {
    "type": compile_type, "enum": compile_enum, "const": compile_const,
    "multipleOf": compile_multiple_of, "maximum": compile_maximum, "minimum": compile_minimum,
    "exclusiveMaximum": compile_exclusive_maximum, "exclusiveMinimum": compile_exclusive_minimum,
    "maxLength": compile_max_length, "minLength": compile_min_length, "pattern": compile_pattern,
    "maxItems": compile_max_items, "minItems": compile_min_items, "uniqueItems": compile_unique_items,
    "maxProperties": compile_max_properties, "minProperties": compile_min_properties,
    "required": compile_required, "dependentRequired": compile_dependent_required,
}
_IN_PLACE_APPLICATORS: Dict[str, CompileFunction] = {
    "allOf": compile_all_of, "anyOf": compile_any_of, "oneOf": compile_one_of, "not": compile_not,
}
_OBJECT_APPLICATORS: Dict[str, CompileFunction] = {
    "additionalProperties": compile_additional_properties, "properties": compile_properties,
    "patternProperties": compile_pattern_properties,
}

VOCABULARIES: Dict[str, Dict[str, CompileFunction]] = {
    CORE: {"$ref": compile_ref, "$dynamicRef": compile_dynamic_ref, "$defs": compile_defs},
    APPLICATOR: {
        "prefixItems": compile_prefix_items, "items": compile_items, "contains": compile_contains,
        **_OBJECT_APPLICATORS, "dependentSchemas": compile_dependent_schemas,
        "propertyNames": compile_property_names, "if": compile_if, **_IN_PLACE_APPLICATORS,
        # Not a 2020-12 keyword: kept for compatibility, as the suite's optional tests describe.
        "dependencies": compile_dependencies,
    },
    UNEVALUATED: {"unevaluatedItems": compile_unevaluated_items,
                  "unevaluatedProperties": compile_unevaluated_properties},
    VALIDATION: dict(_VALIDATION_KEYWORDS),
    META_DATA: {},
    FORMAT_ANNOTATION: {"format": compile_format},
    FORMAT_ASSERTION: {"format": compile_format},
    CONTENT: {},
    # draft 2019-09: items as a list with additionalItems, $recursiveRef, unevaluated* among the applicators.
    CORE_2019_09: {"$ref": compile_ref, "$recursiveRef": compile_recursive_ref, "$defs": compile_defs},
    APPLICATOR_2019_09: {
        "items": compile_items_array_or_schema, "additionalItems": compile_additional_items,
        "contains": compile_contains_2019_09, **_OBJECT_APPLICATORS, "dependentSchemas": compile_dependent_schemas,
        "propertyNames": compile_property_names, "if": compile_if, **_IN_PLACE_APPLICATORS,
        "unevaluatedItems": compile_unevaluated_items, "unevaluatedProperties": compile_unevaluated_properties,
        "dependencies": compile_dependencies,
    },
    VALIDATION_2019_09: dict(_VALIDATION_KEYWORDS),
    META_DATA_2019_09: {},
    FORMAT_2019_09: {"format": compile_format},
    CONTENT_2019_09: {},
}

DEFAULT_VOCABULARIES = frozenset({CORE, APPLICATOR, UNEVALUATED, VALIDATION, META_DATA, FORMAT_ANNOTATION, CONTENT})
DEFAULT_VOCABULARIES_2019_09 = frozenset({CORE_2019_09, APPLICATOR_2019_09, VALIDATION_2019_09, META_DATA_2019_09,
                                          FORMAT_2019_09, CONTENT_2019_09})
CORE_VOCABULARIES = frozenset({CORE, CORE_2019_09})
VALIDATION_VOCABULARIES = frozenset({VALIDATION, VALIDATION_2019_09})
LATE_KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")

# Drafts 4 to 7 have no vocabularies: one table each. `$ref` hides its siblings there (the compiler
# compiles nothing else beside it); content* and $comment are annotations.
DRAFT_06_TABLE: Dict[str, CompileFunction] = {
    "$ref": compile_ref, "definitions": compile_definitions,
    **{keyword: function for keyword, function in _VALIDATION_KEYWORDS.items() if keyword != "dependentRequired"},
    "format": compile_format,
    "items": compile_items_array_or_schema, "additionalItems": compile_additional_items,
    "contains": compile_contains_draft6, **_OBJECT_APPLICATORS, "dependencies": compile_dependencies,
    "propertyNames": compile_property_names, **_IN_PLACE_APPLICATORS,
}
DRAFT_07_TABLE: Dict[str, CompileFunction] = {**DRAFT_06_TABLE, "if": compile_if}
DRAFT_04_TABLE: Dict[str, CompileFunction] = {
    keyword: function for keyword, function in DRAFT_06_TABLE.items()
    if keyword not in ("const", "contains", "propertyNames", "exclusiveMinimum", "exclusiveMaximum")
}
DRAFT_04_TABLE.update({"type": compile_type_draft4, "minimum": compile_minimum_draft4,
                       "maximum": compile_maximum_draft4})
