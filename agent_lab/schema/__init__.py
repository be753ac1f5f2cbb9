"""JSON Schema drafts 2020-12, 2019-09, 7, 6 and 4, complete, offline, compiled once into closures
(standard library only). `$schema` chooses the dialect; `Validator(schema, dialect=DRAFT_07)` chooses it
for a schema that does not say.

    from agent_lab.schema import Validator
    validator = Validator({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    validator.is_valid({"q": "hello"})      # True, fast, builds nothing
    validator.errors({})                    # [Violation(instance_path='', keyword='required', ...)]

Messages name the field and the rule, never the offending value (it may be a secret). Patterns run on
an engine a hostile string cannot make slow: `regex_safety` decides which, `Validator.patterns` says.
"""

from ._dialects import DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, DRAFT_2020_12, dialect_name
from .model import MAX_INSTANCE_DEPTH, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SchemaError, Violation
from .regex_safety import PatternEngine, PatternFinding, PatternSafety, analyze_pattern
from ._cache import ValidatorCache, shared_validator, validator_cache
from .validator import Validator

__all__ = [
    "DRAFT_04",
    "DRAFT_06",
    "DRAFT_07",
    "DRAFT_2019_09",
    "DRAFT_2020_12",
    "MAX_INSTANCE_DEPTH",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "PatternEngine",
    "PatternFinding",
    "PatternSafety",
    "SchemaError",
    "Validator",
    "ValidatorCache",
    "Violation",
    "analyze_pattern",
    "dialect_name",
    "shared_validator",
    "validator_cache",
]
