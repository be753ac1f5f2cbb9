"""Schema validation speed: agent_lab.schema against python-jsonschema and fastjsonschema.

For each tool-argument schema (the lab candidate's input schemas when `agent_lab.lab.candidate` is
importable, one typical hand-written tool schema, and one that stays on the general per-keyword path:
a $ref, a nullable anyOf, an array; both again as draft-07, the dialect the TypeScript MCP SDK serves,
with `definitions` and `$schema`) we build a valid instance and an invalid one (one wrong field),
then time, in nanoseconds per call, the best of several interleaved rounds:
  * ours: `Validator.is_valid` and `Validator.errors` (every violation);
  * python-jsonschema: the validator for the schema's `$schema` (2020-12 by default), `is_valid` (when installed);
  * fastjsonschema: the compiled function, whose failure path raises its first error (when installed).
Ratios: `js/ours` = jsonschema is_valid over ours (higher is better for us), `fj/ours` = fastjsonschema
over our is_valid (>= 1 means we are no slower), `err/fj` = our errors() over fastjsonschema's call
(its first-error path on invalid instances). Figures depend on the machine and its load; they are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import time
import timeit
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..schema import Validator

__all__ = ["DRAFT_07_GENERAL_TOOL_SCHEMA", "DRAFT_07_TOOL_SCHEMA", "GENERAL_TOOL_SCHEMA", "TYPICAL_TOOL_SCHEMA", "main"]

TYPICAL_TOOL_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 200},
        "priority_level": {"type": "integer", "minimum": 1, "maximum": 5},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "notify": {"type": "boolean"},
    },
    "required": ["title", "priority"],
    "additionalProperties": False,
}
TYPICAL_VALID = {"title": "Printer on floor 3 is jammed", "priority_level": 3, "priority": "high", "notify": True}

# Not a fused shape: a $ref, a nullable anyOf and an array keep the general per-keyword path.
GENERAL_TOOL_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "$defs": {"ticket_id": {"type": "string", "pattern": "^T-[0-9]{4}$"}},
    "properties": {
        "ticket_id": {"$ref": "#/$defs/ticket_id"},
        "due": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "uniqueItems": True, "maxItems": 5},
    },
    "required": ["ticket_id"],
    "additionalProperties": False,
}
GENERAL_VALID = {"ticket_id": "T-1001", "due": None, "tags": ["printer", "floor-3"]}
GENERAL_INVALID = {"ticket_id": "T-1001", "due": None, "tags": ["printer", "printer"]}

# The same two schemas as the TypeScript MCP SDK serves tool schemas: draft-07, definitions for $defs.
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_07_TOOL_SCHEMA: Dict[str, Any] = {"$schema": DRAFT_07, **TYPICAL_TOOL_SCHEMA}
DRAFT_07_GENERAL_TOOL_SCHEMA: Dict[str, Any] = {
    "$schema": DRAFT_07,
    **{key: value for key, value in GENERAL_TOOL_SCHEMA.items() if key != "$defs"},
    "definitions": GENERAL_TOOL_SCHEMA["$defs"],
    "properties": dict(GENERAL_TOOL_SCHEMA["properties"], ticket_id={"$ref": "#/definitions/ticket_id"}),
}

_STRING_CANDIDATES = ("T-1001", "action_0123456789", "hello world", "open", "a")


def _sample_value(schema: Any) -> Any:
    """A value that satisfies a leaf property schema, found by trying plausible candidates."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return low if isinstance(low, int) else 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    validator = Validator(schema)
    candidates = list(_STRING_CANDIDATES) + ["x" * int(schema.get("minLength", 1))]
    return next((candidate for candidate in candidates if validator.is_valid(candidate)), None)


def sample_instances(schema: Dict[str, Any]) -> Optional[Tuple[Any, Any]]:
    """(valid, invalid) instances for an object schema; invalid has one field of the wrong type."""
    properties = schema.get("properties") or {}
    valid = {name: _sample_value(sub) for name, sub in properties.items()}
    if any(value is None for value in valid.values()) or not Validator(schema).is_valid(valid):
        return None
    if not valid:
        return None
    invalid = copy.deepcopy(valid)
    first = next(iter(invalid))
    invalid[first] = 12345 if isinstance(invalid[first], str) else "not the right type"
    return valid, invalid


def _lab_schemas() -> List[Tuple[str, Dict[str, Any]]]:
    try:
        from ..lab.candidate import candidate_specs
    except ImportError:
        return []
    from ..frozenjson import thaw

    # plain copies: a peer that compiles a schema to source code writes its constants with repr()
    return [(spec.name, thaw(spec.input_schema)) for spec in candidate_specs()]


WARM_UP_CALLS = 20


def warm_up(functions: Dict[str, Callable[[], Any]]) -> None:
    """Call each function a few times before it is calibrated or timed.

    One-time work then never lands in a figure or in the calibration of how many calls a round
    makes: whatever is built on a first call (a node's annotation functions for `unevaluated*`, the
    Unicode property tables of a `\\p{...}` pattern if they are ever built lazily, the peers' own
    caches). Building a Validator, which compiles patterns, happens before any of this.
    """
    for function in functions.values():
        for _ in range(WARM_UP_CALLS):
            function()


def _ns_per_call(functions: Dict[str, Callable[[], Any]], rounds: int, min_time: float) -> Dict[str, float]:
    """Best-of-`rounds` nanoseconds per call of each function, rounds interleaved across functions.

    Interleaving means a burst of load on the machine hits every implementation alike, and keeping
    the minimum discards rounds that were disturbed.
    """
    warm_up(functions)
    timers = {name: timeit.Timer(function) for name, function in functions.items()}
    numbers = {}
    for name, timer in timers.items():
        probe = 200
        per_call = max(timer.timeit(probe) / probe, 1e-9)
        numbers[name] = max(probe, int(min_time / per_call))
    best = {name: float("inf") for name in timers}
    for _round in range(rounds):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(numbers[name]) / numbers[name] * 1e9)
    return best


def _peers() -> Dict[str, Any]:
    peers: Dict[str, Any] = {}
    try:
        import jsonschema

        peers["jsonschema"] = jsonschema
    except ImportError:
        pass
    try:
        import fastjsonschema

        peers["fastjsonschema"] = fastjsonschema
    except ImportError:
        pass
    return peers


def _fast_call(fastjsonschema: Any, schema: Dict[str, Any]) -> Optional[Callable[[Any], bool]]:
    try:
        compiled = fastjsonschema.compile(schema)
    except Exception:  # fastjsonschema refuses some 2020-12 schemas; then it has no figure
        return None
    error_type = fastjsonschema.JsonSchemaException

    def call(instance: Any) -> bool:
        try:
            compiled(instance)
            return True
        except error_type:
            return False

    return call


def measure(name: str, schema: Dict[str, Any], instances: Tuple[Any, Any], peers: Dict[str, Any],
            rounds: int, min_time: float) -> List[Dict[str, Any]]:
    """Time every implementation on the valid and the invalid instance of one schema."""
    ours = Validator(schema)
    theirs = None
    if "jsonschema" in peers:
        jsonschema = peers["jsonschema"]
        theirs = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    fast = _fast_call(peers["fastjsonschema"], schema) if "fastjsonschema" in peers else None
    rows = []
    for label, instance in zip(("valid", "invalid"), instances):
        row: Dict[str, Any] = {"schema": name, "instance": label, "violations": len(ours.errors(instance))}
        functions: Dict[str, Callable[[], Any]] = {
            "is_valid": lambda: ours.is_valid(instance),
            "errors": lambda: ours.errors(instance),
        }
        if theirs is not None:
            functions["jsonschema"] = lambda: theirs.is_valid(instance)
        if fast is not None:
            functions["fastjsonschema"] = lambda: fast(instance)
        timings = _ns_per_call(functions, rounds, min_time)
        row.update({key: timings.get(key) for key in ("is_valid", "errors", "jsonschema", "fastjsonschema")})
        rows.append(row)
    return rows


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> str:
    if numerator is None or denominator is None:
        return "-"
    return f"{numerator / denominator:.1f}x"


def _ns(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_table(rows: List[Dict[str, Any]]) -> str:
    header = ("schema", "instance", "viol", "is_valid", "errors", "jsonschema", "fastjson", "js/ours",
              "fj/ours", "err/fj")
    lines = [header]
    for row in rows:
        lines.append((
            row["schema"], row["instance"], str(row["violations"]), _ns(row["is_valid"]), _ns(row["errors"]),
            _ns(row["jsonschema"]), _ns(row["fastjsonschema"]), _ratio(row["jsonschema"], row["is_valid"]),
            _ratio(row["fastjsonschema"], row["is_valid"]), _ratio(row["errors"], row["fastjsonschema"]),
        ))
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    text = []
    for index, line in enumerate(lines):
        text.append("  ".join(
            cell.ljust(width) if column < 2 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths))
        ))
        if index == 0:
            text.append("  ".join("-" * width for width in widths))
    return "\n".join(text)


# -- figures: interleaved rounds, one ratio per round (reported through `_figures`) ----------------


def _calibrated(function: Callable[[], Any], min_time: float) -> Tuple[timeit.Timer, int]:
    timer = timeit.Timer(function)
    probe = 50
    per_call = max(timer.timeit(probe) / probe, 1e-9)
    return timer, max(probe, int(min_time / per_call))


def _suite_timer(functions: List[Callable[[], Any]], min_time: float) -> Callable[[], float]:
    """Seconds for one call of every function (each timed over about `min_time`), summed: one round."""
    warm_up(dict(enumerate(functions)))  # type: ignore[arg-type]
    timers = [_calibrated(function, min_time) for function in functions]

    def one_round() -> float:
        return sum(timer.timeit(number) / number for timer, number in timers)

    return one_round


def _bound_call(function: Callable[[Any], Any], instance: Any) -> Callable[[], Any]:
    return lambda: function(instance)


def is_valid_figures(cases: List[Tuple[str, Dict[str, Any], Tuple[Any, Any]]], peers: Dict[str, Any], rounds: int,
                     min_time: float) -> None:
    """schema.is_valid_vs_fastjsonschema and schema.is_valid_vs_jsonschema: our is_valid over the
    peer's, summed over every tool schema (valid and invalid instance) both can compile."""
    from ._figures import interleave, report

    for peer_name, figure, target in (("fastjsonschema", "schema.is_valid_vs_fastjsonschema", "<= 0.6"),
                                      ("jsonschema", "schema.is_valid_vs_jsonschema", "<= 0.05")):
        if peer_name not in peers:
            print(f"(no {figure}: {peer_name} is not installed)")
            continue
        ours: List[Callable[[], Any]] = []
        theirs: List[Callable[[], Any]] = []
        for _name, schema, instances in cases:
            if peer_name == "fastjsonschema":
                peer_call = _fast_call(peers["fastjsonschema"], schema)
            else:
                jsonschema = peers["jsonschema"]
                peer_call = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
                    schema).is_valid
            if peer_call is None:
                continue
            validator = Validator(schema)
            for instance in instances:
                ours.append(_bound_call(validator.is_valid, instance))
                theirs.append(_bound_call(peer_call, instance))
        samples = interleave({"ours": _suite_timer(ours, min_time), "peer": _suite_timer(theirs, min_time)}, rounds)
        report(figure, unit="s/suite", ours=samples["ours"], peer=samples["peer"], target=target,
               note=f"is_valid summed over {len(ours)} tool-schema instances (valid and invalid) {peer_name} compiles")


LARGE_PROPERTIES = 60
LARGE_RECORDS = 1_000


def large_instance_case() -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """A 1,000-record array of a 60-property object (strings, integers, numbers, booleans, enums,
    nullable strings, short arrays), every record valid."""
    kinds: List[Tuple[Dict[str, Any], Callable[[int], Any]]] = [
        ({"type": "string", "maxLength": 64}, lambda row: f"value {row}"),
        ({"type": "integer", "minimum": 0}, lambda row: row),
        ({"type": "number", "minimum": 0}, lambda row: row * 0.5),
        ({"type": "boolean"}, lambda row: row % 2 == 0),
        ({"enum": ["open", "pending", "closed"]}, lambda row: ("open", "pending", "closed")[row % 3]),
        ({"type": ["string", "null"]}, lambda row: None if row % 2 else "x"),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 5}, lambda row: [row, row + 1]),
    ]
    properties = {}
    makers = {}
    for index in range(LARGE_PROPERTIES):
        schema, make = kinds[index % len(kinds)]
        properties[f"field_{index:02d}"] = schema
        makers[f"field_{index:02d}"] = make
    record_schema = {"type": "object", "properties": properties, "required": list(properties)[:20],
                     "additionalProperties": False}
    schema = {"type": "array", "items": record_schema}
    records = [{name: make(row) for name, make in makers.items()} for row in range(LARGE_RECORDS)]
    return schema, records


def large_instance_figure(rounds: int) -> None:
    """schema.large_instance_vs_jsonschema_rs: is_valid on the large instance, ours over jsonschema-rs."""
    from ._figures import interleave, report

    try:
        import jsonschema_rs
    except ImportError:
        print("(no schema.large_instance_vs_jsonschema_rs: jsonschema-rs is not installed)")
        return
    schema, records = large_instance_case()
    ours = Validator(schema)
    native = jsonschema_rs.validator_for(schema)
    if not (ours.is_valid(records) and native.is_valid(records)):
        print("(no schema.large_instance_vs_jsonschema_rs: the implementations disagree on the instance)")
        return
    samples = interleave({"ours": _suite_timer([lambda: ours.is_valid(records)], 0.05),
                          "native": _suite_timer([lambda: native.is_valid(records)], 0.05)}, rounds)
    print(f"large instance ({LARGE_RECORDS:,} records x {LARGE_PROPERTIES} properties): ours "
          f"{sorted(samples['ours'])[len(samples['ours']) // 2] * 1e3:.2f} ms, jsonschema-rs "
          f"{sorted(samples['native'])[len(samples['native']) // 2] * 1e3:.2f} ms per is_valid")
    report("schema.large_instance_vs_jsonschema_rs", unit="s/call", ours=samples["ours"], peer=samples["native"],
           note=f"is_valid on a {LARGE_RECORDS}-record array of a {LARGE_PROPERTIES}-property object; "
                "jsonschema-rs is native code (Rust)")


def compile_figure(schemas: List[Tuple[str, Dict[str, Any]]], peers: Dict[str, Any], rounds: int) -> None:
    """schema.compile_vs_jsonschema: building a Validator (meta-schema check, compilation) with every
    shared table of compiled parts emptied first, over python-jsonschema's `check_schema` plus
    validator construction, per schema."""
    from ..schema import validator_cache
    from ..schema._compiler import SHARED_KEYWORDS
    from ..schema._leaves import SHARED_LEAVES
    from ._figures import interleave, report

    if "jsonschema" not in peers:
        print("(no schema.compile_vs_jsonschema: jsonschema is not installed)")
        return
    jsonschema = peers["jsonschema"]
    pairs = [(schema, jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))
             for _name, schema in schemas]
    repeats = 5

    def ours_cold() -> float:
        total = 0.0
        for schema, _cls in pairs:
            for _ in range(repeats):
                validator_cache.clear()
                SHARED_LEAVES.clear()
                SHARED_KEYWORDS.clear()
                started = time.perf_counter()
                Validator(schema)
                total += time.perf_counter() - started
        return total / (len(pairs) * repeats)

    def theirs() -> float:
        started = time.perf_counter()
        for schema, cls in pairs:
            for _ in range(repeats):
                cls.check_schema(schema)
                cls(schema)
        return (time.perf_counter() - started) / (len(pairs) * repeats)

    samples = interleave({"ours": ours_cold, "jsonschema": theirs}, rounds)
    print(f"compile per schema ({len(pairs)} tool schemas): ours {sorted(samples['ours'])[rounds // 2] * 1e6:,.0f} us "
          f"(no shared parts), jsonschema check_schema + construction "
          f"{sorted(samples['jsonschema'])[rounds // 2] * 1e6:,.0f} us")
    report("schema.compile_vs_jsonschema", unit="s/schema", ours=samples["ours"], peer=samples["jsonschema"],
           note="Validator(schema) with empty shared tables against jsonschema's check_schema + validator construction")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="schema_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds per figure (best is kept)")
    parser.add_argument("--min-time", type=float, default=0.01, help="seconds per round, about")
    args, _rest = parser.parse_known_args(argv)
    peers = _peers()
    typical = (TYPICAL_VALID, dict(TYPICAL_VALID, priority="urgent"))
    fixed = {"typical_tool": typical, "typical_tool_draft7": typical, "general_tool": (GENERAL_VALID, GENERAL_INVALID),
             "general_tool_draft7": (GENERAL_VALID, GENERAL_INVALID)}
    schemas = [("typical_tool", TYPICAL_TOOL_SCHEMA), ("typical_tool_draft7", DRAFT_07_TOOL_SCHEMA),
               ("general_tool", GENERAL_TOOL_SCHEMA), ("general_tool_draft7", DRAFT_07_GENERAL_TOOL_SCHEMA)]
    schemas += _lab_schemas()
    rows: List[Dict[str, Any]] = []
    for name, schema in schemas:
        instances = fixed[name] if name in fixed else sample_instances(schema)
        if instances is None:
            print(f"(skipped {name}: could not build sample instances)")
            continue
        rows.extend(measure(name, schema, instances, peers, args.rounds, args.min_time))
    print("ns per call, best of", args.rounds, "rounds;", ", ".join(sorted(peers)) or "no peers installed")
    print(format_table(rows))
    figure_rounds = max(5, min(args.rounds, 7))
    cases = [(name, schema, fixed[name] if name in fixed else sample_instances(schema)) for name, schema in schemas]
    usable = [(name, schema, instances) for name, schema, instances in cases if instances is not None]
    print()
    is_valid_figures(usable, peers, figure_rounds, args.min_time)
    large_instance_figure(figure_rounds)
    compile_figure(schemas, peers, figure_rounds)
    missing = {"jsonschema", "fastjsonschema"} - set(peers)
    if missing:
        print("not installed (no figures): " + ", ".join(sorted(missing)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
