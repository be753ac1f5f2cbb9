"""JSON Schema draft 2020-12, complete, offline, compiled once into closures (standard library only).

    from agent_lab.schema import Validator
    validator = Validator({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    validator.is_valid({"q": "hello"})      # True, fast, builds nothing
    validator.errors({})                    # [Violation(instance_path='', keyword='required', ...)]

Messages name the field and the rule, never the offending value (it may be a secret). Patterns run on
an engine a hostile string cannot make slow: `regex_safety` decides which, `Validator.patterns` says.
"""

from .model import MAX_INSTANCE_DEPTH, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SchemaError, Violation
from .regex_safety import PatternEngine, PatternFinding, PatternSafety, analyze_pattern
from .validator import Validator

__all__ = [
    "MAX_INSTANCE_DEPTH",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "PatternEngine",
    "PatternFinding",
    "PatternSafety",
    "SchemaError",
    "Validator",
    "Violation",
    "analyze_pattern",
]
