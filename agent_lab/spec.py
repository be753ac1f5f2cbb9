"""ToolSpec: both halves of one tool's contract, checked when the spec is built.

The model-facing half (name, title, description, input and output schema) is all that is ever exported
to a model or a host. The runtime half (permission, effect, approval, idempotency, retry, timeout, input
and output budgets, format assertion, redaction, resource guard) stays in the process and is enforced by
`Registry.invoke`. A schema (input or output) with a pattern a hostile string could make slow is
refused here (see `schema.regex_safety`).

The schemas are frozen when the spec is built (see `agent_lab.frozenjson`): `model_schema()` exports
a plain copy of the very read-only schema the validators are compiled from, and `catalog_entry()`
(what `Registry.catalog()` lists) that read-only schema itself, so nothing a caller holds can make the
catalog advertise one schema while another is enforced. Validators are shared by schema content
(`agent_lab.schema.shared_validator`): a spec built again, or another spec with an equal schema,
reuses the compiled validator and its frozen schema.

Every text of a spec is Unicode text: a lone surrogate ("\\ud800", which no UTF-8 file, terminal or
host can carry) in the title, the description, a permission, a redacted field or anywhere in a schema
(a member name or a string) is refused when the spec is built, with the field and the JSON Pointer, so
nothing that prints or exports a spec (lint, catalog-cost, export, inspect) can fail on one later.
"""

from __future__ import annotations

import enum
import json
import math
import re
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from .fingerprint import has_lone_surrogate
from .frozenjson import freeze, thaw
from .jsonvalue import pointer_join
from .policy import ResourceGuard
from .provenance import Provenance
from .spec_checks import spec_warnings

__all__ = ["ApprovalCondition", "ApprovalPolicy", "Effect", "Execution", "RetryPolicy", "TaskSupport", "ToolSpec"]


class Effect(str, enum.Enum):
    """What running the tool does to the world."""

    READ = "read"  # no side effects: safe to repeat
    WRITE = "write"  # changes state: repeat only under an idempotency key
    DESTRUCTIVE = "destructive"  # changes state in a way that cannot be undone

    def __str__(self) -> str:
        return self.value


class ApprovalPolicy(str, enum.Enum):
    """When a person must approve a call before it runs."""

    NEVER = "never"
    ALWAYS = "always"
    CONDITIONAL = "conditional"  # when `approval_condition(arguments)` is true

    def __str__(self) -> str:
        return self.value


class RetryPolicy(str, enum.Enum):
    """Whether a failed call of this tool may be retried automatically."""

    NEVER = "never"
    TRANSIENT = "transient"  # timeouts and unavailable dependencies may be retried

    def __str__(self) -> str:
        return self.value


class Execution(str, enum.Enum):
    """Where a sync handler runs (see `ToolSpec.execution`)."""

    POOL = "pool"  # on the registry's worker pool: the caller stops waiting at the deadline
    INLINE = "inline"  # on the caller's thread: no hand-off, but an overrun is only found when it returns

    def __str__(self) -> str:
        return self.value


class TaskSupport(str, enum.Enum):
    """Whether a call of the tool may run as a task (`ToolSpec.task_support`; MCP's `execution.taskSupport`)."""

    FORBIDDEN = "forbidden"  # every call runs while the caller waits (the default)
    OPTIONAL = "optional"  # a caller may ask for a task (`Registry.invoke(..., as_task=True)`)
    REQUIRED = "required"  # every call runs as a task, asked for or not

    def __str__(self) -> str:
        return self.value


_READ = Effect.READ  # a module constant: an enum member read through its class costs a descriptor call

# Decides from the (already validated) arguments whether a conditional approval is needed.
ApprovalCondition = Callable[[Mapping[str, Any]], bool]

# MCP's rule for tool names; OpenAI's is narrower and is handled by the adapters' name mapping.
TOOL_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
_SLOW_THROUGH = {"input_schema": "", "output_schema": " through the tool's output"}
"""How a model reaches a refused pattern, by schema (for the refusal's message)."""
DEFAULT_MAX_INPUT_BYTES = 16 * 1024
"""Arguments larger than this (compact UTF-8 JSON) are refused before validation (`input_too_large`).
Chosen from `python run_lab.py bench --only redos`: at this size every attack of the ReDoS corpus
validates in about 3 ms with the linear matcher, and the slowest check per byte, `format: regex`
(it parses a model-written pattern, 1-2 microseconds per character of nested groups), in about
25 ms: well under a 50 ms budget even on a loaded machine, which 32 KiB no longer is for that format.
Tool arguments an agent writes are far smaller (16 KiB is about 4,000 tokens); a tool that takes
documents raises it explicitly."""


def _enum_value(enum_type: type[enum.Enum], value: Any, field_name: str) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise ValueError(f"ToolSpec.{field_name} must be one of: {choices} (got {value!r})") from None


def _positive_number(value: Any, field_name: str, *, integral: bool) -> None:
    wanted = int if integral else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted):
        kind = "an integer" if integral else "a number"
        raise ValueError(f"ToolSpec.{field_name} must be {kind}, not {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"ToolSpec.{field_name} must be finite and greater than 0 (got {value!r})")


def _compile(schema: Any, field_name: str, *, format_assertion: bool) -> Any:
    """A Validator for the schema in its own dialect (`$schema`: 2020-12, 2019-09, draft-07, -06 or -04),
    shared with every spec whose schema has the same content and options (`agent_lab.schema._cache`):
    building a spec twice compiles and meta-checks its schemas once."""
    from .schema import SchemaError, dialect_name, shared_validator

    try:
        return shared_validator(schema, format_assertion=format_assertion)
    except SchemaError as exc:
        raise ValueError(f"ToolSpec.{field_name} is not a valid JSON Schema {dialect_name(schema)} document: "
                         f"{exc}") from None


_SURROGATE_SCAN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Validator -> where its schema holds a lone surrogate (None: nowhere). Validators are shared by schema
content, so a schema is scanned once however many specs are built on it."""
_SURROGATE_SCAN_LOCK = threading.Lock()


def _lone_surrogate_in_schema(validator: Any) -> str | None:
    """Where the validator's (frozen, compiled, so bounded) schema holds a lone surrogate: the JSON
    Pointer of the string, or of the object whose member name holds it, with what it is; else None.
    One C-speed encoding answers for the common schema (all ASCII); only a schema with other text is
    walked."""
    with _SURROGATE_SCAN_LOCK:
        if validator in _SURROGATE_SCAN:
            found: str | None = _SURROGATE_SCAN[validator]
            return found
    text = json.dumps(validator.schema, ensure_ascii=False)
    found = None if not has_lone_surrogate(text) else _lone_surrogate_at(validator.schema)
    with _SURROGATE_SCAN_LOCK:
        _SURROGATE_SCAN[validator] = found
    return found


def _lone_surrogate_at(schema: Any) -> str | None:
    """The first place (document order) of `schema` holding a lone surrogate, iteratively; the pointer
    never contains the surrogate (a member name that holds one is named by the object around it)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, str):
            if has_lone_surrogate(value):
                return f"a string at {pointer or '/'}"
        elif isinstance(value, Mapping):
            if any(has_lone_surrogate(key) for key in value):
                return f"a member name of the object at {pointer or '/'}"
            stack.extend(reversed([(item, pointer_join(pointer, key)) for key, item in value.items()]))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(item, pointer_join(pointer, index)) for index, item in enumerate(value)]))
    return None


def _cached(schema: Any, format_assertion: Any) -> Any:
    """The shared Validator an equal schema was compiled into before, or None (nothing is compiled)."""
    from .schema import validator_cache

    return validator_cache.cached(schema, format_assertion=format_assertion)


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool's full contract. Frozen: build a new spec (dataclasses.replace) to change one."""

    # Model-facing contract.
    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    # Runtime contract (never exported).
    required_permission: str | None = None
    effect: Effect = Effect.READ
    approval: ApprovalPolicy = ApprovalPolicy.NEVER
    approval_condition: ApprovalCondition | None = field(default=None, compare=False)
    single_use_approval: bool = False  # an approval runs the tool once (spent in the receipt store)
    idempotency_key: str | None = None
    retry_policy: RetryPolicy = RetryPolicy.NEVER
    timeout_ms: float = DEFAULT_TIMEOUT_MS
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES  # larger arguments: input_too_large, before validation
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    format_assertion: bool = True  # `format` is checked in both schemas (False: an annotation only)
    redact: tuple[str, ...] = ()
    resource_guard: ResourceGuard | None = field(default=None, compare=False)
    open_world: bool = False  # the tool reaches systems outside the application (a hint for hosts)
    # "inline": a trusted, fast sync handler runs on the caller's thread (see Registry.invoke)
    execution: Execution = Execution.POOL
    # "optional"/"required": a call may answer `accepted` with a task handle and run in the background
    task_support: TaskSupport = TaskSupport.FORBIDDEN
    # Where the contract came from when it was imported from an MCP server (None: a local tool).
    provenance: Provenance | None = None
    # Derived when built.
    warnings: tuple[str, ...] = field(init=False, default=())
    input_validator: Any = field(init=False, repr=False, compare=False, default=None)
    output_validator: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        self._check_model_half()
        # Read-only deep copies: the dicts passed in may change later; these cannot (ordinarily), and
        # both the validators and model_schema() are made from them.
        # When a spec with an equal schema was built before, its validator (and the frozen copy it was
        # compiled from) is reused as it is: no copy, no compile (see `agent_lab.schema._cache`).
        input_cached = _cached(self.input_schema, self.format_assertion)
        set_field(self, "input_schema", freeze(self.input_schema) if input_cached is None else input_cached.schema)
        output_cached = None
        if self.output_schema is not None:
            output_cached = _cached(self.output_schema, self.format_assertion)
            set_field(self, "output_schema",
                      freeze(self.output_schema) if output_cached is None else output_cached.schema)
        set_field(self, "effect", _enum_value(Effect, self.effect, "effect"))
        set_field(self, "approval", _enum_value(ApprovalPolicy, self.approval, "approval"))
        set_field(self, "retry_policy", _enum_value(RetryPolicy, self.retry_policy, "retry_policy"))
        set_field(self, "execution", _enum_value(Execution, self.execution, "execution"))
        set_field(self, "task_support", _enum_value(TaskSupport, self.task_support, "task_support"))
        set_field(self, "redact", self._checked_redact())
        self._check_runtime_half()
        formats = self.format_assertion
        # The validators are shared by content; each holds its own frozen copy of an equal schema,
        # which the spec then keeps instead of the one frozen above: one copy, however many specs.
        input_validator = input_cached or _compile(self.input_schema, "input_schema", format_assertion=formats)
        set_field(self, "input_validator", input_validator)
        set_field(self, "input_schema", input_validator.schema)
        self._refuse_slow_patterns(input_validator, "input_schema")
        if self.output_schema is not None:
            output_validator = output_cached or _compile(self.output_schema, "output_schema", format_assertion=formats)
            self._refuse_slow_patterns(output_validator, "output_schema")
            set_field(self, "output_validator", output_validator)
            set_field(self, "output_schema", output_validator.schema)
        self._refuse_lone_surrogates()
        # What a careful spec avoids (lint's AL401, AL402 and AL310 are the same checks: `agent_lab.spec_checks`).
        set_field(self, "warnings", spec_warnings(self))

    # -- construction checks -------------------------------------------------------------------

    def _check_model_half(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"ToolSpec.name {self.name!r} must be 1-128 characters of A-Z a-z 0-9 _ - . (the MCP rule)"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"ToolSpec.description of {self.name!r} must be a non-empty string")
        if self.title is not None and not isinstance(self.title, str):
            raise ValueError(f"ToolSpec.title of {self.name!r} must be a string or None")
        if not isinstance(self.input_schema, Mapping) or self.input_schema.get("type") != "object":
            raise ValueError(
                f"ToolSpec.input_schema of {self.name!r} must be a JSON Schema object with \"type\": \"object\""
            )
        if self.output_schema is not None and not isinstance(self.output_schema, Mapping):
            raise ValueError(f"ToolSpec.output_schema of {self.name!r} must be a JSON Schema object or None")

    def _refuse_lone_surrogates(self) -> None:
        """Every text of the spec, both halves, is Unicode text (see the module docstring)."""
        texts = {"title": self.title, "description": self.description, "required_permission": self.required_permission}
        for field_name, text in texts.items():
            if text is not None and has_lone_surrogate(text):
                raise ValueError(f"ToolSpec.{field_name} of {self.name!r} holds a lone surrogate (\\ud800-\\udfff), "
                                 "which is not Unicode text; no host or terminal can show it")
        for index, field_name in enumerate(self.redact):
            if has_lone_surrogate(field_name):
                raise ValueError(f"ToolSpec.redact of {self.name!r} holds a lone surrogate (\\ud800-\\udfff) in "
                                 f"entry {index}, which is not Unicode text")
        for field_name, validator in (("input_schema", self.input_validator), ("output_schema", self.output_validator)):
            found = None if validator is None else _lone_surrogate_in_schema(validator)
            if found is not None:
                raise ValueError(f"ToolSpec.{field_name} of {self.name!r} holds a lone surrogate (\\ud800-\\udfff), "
                                 f"which is not Unicode text, in {found}; no host or terminal can show it")

    def _checked_redact(self) -> tuple[str, ...]:
        if isinstance(self.redact, str) or not all(isinstance(item, str) for item in self.redact):
            raise ValueError("ToolSpec.redact must be a collection of field names (strings), not one string")
        if isinstance(self.redact, (set, frozenset)):
            return tuple(sorted(self.redact))  # a set has no order; reports need a stable one
        return tuple(dict.fromkeys(self.redact))  # declared order, duplicates dropped

    def _check_runtime_half(self) -> None:
        if self.required_permission is not None and (
            not isinstance(self.required_permission, str) or not self.required_permission
        ):
            raise ValueError("ToolSpec.required_permission must be a non-empty string or None")
        _positive_number(self.timeout_ms, "timeout_ms", integral=False)
        _positive_number(self.max_input_bytes, "max_input_bytes", integral=True)
        _positive_number(self.max_output_bytes, "max_output_bytes", integral=True)
        if not isinstance(self.format_assertion, bool):
            raise ValueError("ToolSpec.format_assertion must be a bool")
        conditional = self.approval is ApprovalPolicy.CONDITIONAL
        if conditional and not callable(self.approval_condition):
            raise ValueError("ToolSpec.approval='conditional' needs approval_condition, a function of the arguments")
        if not conditional and self.approval_condition is not None:
            raise ValueError("ToolSpec.approval_condition is only used with approval='conditional'")
        if not isinstance(self.single_use_approval, bool):
            raise ValueError("ToolSpec.single_use_approval must be a bool")
        if self.single_use_approval and self.approval is ApprovalPolicy.NEVER:
            raise ValueError("ToolSpec.single_use_approval needs approval='always' or 'conditional'")
        if self.resource_guard is not None and not callable(self.resource_guard):
            raise ValueError("ToolSpec.resource_guard must be a function (arguments, actor) -> bool")
        if not isinstance(self.open_world, bool):
            raise ValueError("ToolSpec.open_world must be a bool")
        if self.provenance is not None and not isinstance(self.provenance, Provenance):
            raise ValueError("ToolSpec.provenance must be an agent_lab.Provenance or None")
        if self.idempotency_key is not None:
            self._check_idempotency_key(self.idempotency_key)

    def _check_idempotency_key(self, key: str) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError("ToolSpec.idempotency_key must be the name of an input property (a string) or None")
        properties = self.input_schema.get("properties") or {}
        required = self.input_schema.get("required") or []
        prop = properties.get(key) if isinstance(properties, Mapping) else None
        if not isinstance(prop, Mapping) or key not in required or prop.get("type") != "string":
            raise ValueError(
                f"ToolSpec.idempotency_key {key!r} must name a required string property of the input schema "
                f"of {self.name!r} (add it to properties with \"type\": \"string\" and to required)"
            )

    def _refuse_slow_patterns(self, validator: Any, field_name: str) -> None:
        """Every regex a schema runs must be safe (`schema.regex_safety`): proven linear on Python's re,
        or served by the linear-time matcher. Any other pattern is refused here, with its JSON Pointer
        and the reason. The input schema runs on model input; the output schema on the handler's
        output, which echoes model text often enough (a search result, a note written back), and is
        checked on the thread the caller waits for, so both get the same guarantee. Every regex a
        validator runs is in `Validator.patterns` (`pattern`, `patternProperties`, `propertyNames`,
        in `$ref`'d and `$defs` subschemas alike); the `format` checkers are linear by construction."""
        for finding in validator.patterns:
            if not finding.safety.safe:
                raise ValueError(
                    f"ToolSpec.{field_name} of {self.name!r} has a pattern a model could make slow"
                    f"{_SLOW_THROUGH[field_name]}, at {finding.pointer}: {finding.safety.reason}; rewrite it (anchor it with ^, make "
                    f"each repetition unambiguous, drop the lookaround or backreference)"
                )

    # -- building from a Python function -------------------------------------------------------

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Any) -> ToolSpec:
        """A spec whose input schema comes from `fn`'s signature, type hints and docstring.

        `options` are `name=`, `description=`, `title=`, `output_schema=` and any runtime field
        (`required_permission=`, `effect=`, `idempotency_key=`, ...); fields its types declare secret
        (`writeOnly`, `format: password`, as pydantic's `SecretStr`) are added to `redact`. The same spec as
        `agent_lab.signature.spec_from_function` (`@tool`) builds; see `agent_lab.function_schema`.
        """
        from .function_schema import model_half_from_function, with_secret_fields  # on use: reading is not cheap

        model_options = {key: options.pop(key) for key in ("name", "description", "title", "output_schema")
                         if key in options}
        model_half = model_half_from_function(fn, **model_options)
        return cls(**model_half, **with_secret_fields(model_half, options))

    # -- the two halves ------------------------------------------------------------------------

    def model_schema(self) -> dict[str, Any]:
        """The model-facing half only: what a model or a host may see. A plain deep copy (dicts and
        lists) of exactly the schemas the validators enforce, safe to modify."""
        exported: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            exported["title"] = self.title
        exported["description"] = self.description
        exported["input_schema"] = thaw(self.input_schema)
        if self.output_schema is not None:
            exported["output_schema"] = thaw(self.output_schema)
        return exported

    def catalog_entry(self) -> dict[str, Any]:
        """The model-facing half as `Registry.catalog()` lists it: a new top-level dict whose schemas
        are the spec's own read-only ones (`agent_lab.frozenjson`), not copies. It serialises with
        `json.dumps` like plain dicts and lists; changing anything inside a schema raises TypeError,
        so no caller can change what the spec enforces. Use `model_schema()` for a copy to modify."""
        entry: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["input_schema"] = self.input_schema
        if self.output_schema is not None:
            entry["output_schema"] = self.output_schema
        return entry

    def runtime_contract(self) -> dict[str, Any]:
        """The runtime half as plain data, for documentation, linting and reports; never sent to a model."""
        return {
            "required_permission": self.required_permission,
            "effect": self.effect.value,
            "approval": self.approval.value,
            "single_use_approval": self.single_use_approval,
            "idempotency_key": self.idempotency_key,
            "retry_policy": self.retry_policy.value,
            "timeout_ms": self.timeout_ms,
            "max_input_bytes": self.max_input_bytes,
            "max_output_bytes": self.max_output_bytes,
            "format_assertion": self.format_assertion,
            "redact": list(self.redact),
            "resource_guard": self.resource_guard is not None,
            "open_world": self.open_world,
            "execution": self.execution.value,
            **({"task_support": self.task_support.value} if self.task_support is not TaskSupport.FORBIDDEN else {}),
            "warnings": list(self.warnings),
            **({"provenance": self.provenance.to_dict()} if self.provenance is not None else {}),
        }

    @property
    def writes(self) -> bool:
        """True for tools whose effect changes state (write or destructive)."""
        return self.effect is not _READ

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether this call (with validated arguments) must carry an approval."""
        if self.approval is ApprovalPolicy.ALWAYS:
            return True
        if self.approval is ApprovalPolicy.CONDITIONAL:
            return bool(self.approval_condition(arguments))  # type: ignore[misc]
        return False
