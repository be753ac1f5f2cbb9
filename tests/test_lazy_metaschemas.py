"""The built-in meta-schemas are read one dialect at a time, when an index first meets that dialect's
URIs (`agent_lab.schema._index.ensure_builtin`); what a validator finds there is what it found when all
were read up front."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

from agent_lab.schema import Validator
from agent_lab.schema._index import BUILTIN_GROUPS, builtin_document, builtin_documents, builtin_group, builtin_group_of

CHECKOUT = Path(__file__).resolve().parents[1]

def groups_read(more: str = "") -> list[str]:
    source = f"""
from agent_lab.schema import Validator
from agent_lab.schema import _index
read = []
real = _index.builtin_group.__wrapped__
def reading(group):
    read.append(group)
    return real(group)
_index.builtin_group = __import__("functools").lru_cache(maxsize=None)(reading)
Validator({{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {{"a": {{"type": "string"}}}}}})
{more}
print(" ".join(sorted(set(read))))
"""
    done = subprocess.run([sys.executable, "-c", source], cwd=CHECKOUT, capture_output=True, text=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    return done.stdout.split()


class LazyMetaschemasTest(unittest.TestCase):
    def test_every_document_id_lies_in_its_dialects_uri_space(self) -> None:
        for group, prefix in BUILTIN_GROUPS.items():
            documents = builtin_group(group)
            self.assertTrue(documents, group)
            for uri, document in documents:
                self.assertTrue(uri.startswith(prefix), uri)
                self.assertEqual(builtin_group_of(uri), group)
                self.assertIs(builtin_document(uri), document)
        self.assertEqual(len(builtin_documents()), sum(len(builtin_group(group)) for group in BUILTIN_GROUPS))
        self.assertIsNone(builtin_group_of("https://example.com/schema"))

    def test_a_2020_12_schema_reads_only_the_2020_12_meta_schemas(self) -> None:
        self.assertEqual(groups_read(), ["draft2020-12"])

    def test_a_dialect_is_read_when_a_schema_declares_it_or_refers_to_it(self) -> None:
        self.assertEqual(groups_read('Validator({"$schema": "http://json-schema.org/draft-07/schema#"})'),
                         ["draft-07", "draft2020-12"])
        self.assertEqual(groups_read('Validator({"$ref": "https://json-schema.org/draft/2019-09/schema"})'),
                         ["draft2019-09", "draft2020-12"])

    def test_a_reference_to_another_dialects_meta_schema_resolves_and_validates(self) -> None:
        validator = Validator({"$ref": "http://json-schema.org/draft-04/schema#"})
        self.assertTrue(validator.is_valid({"type": "string"}))
        self.assertFalse(validator.is_valid({"type": 5}))
        validator = Validator({"$ref": "https://json-schema.org/draft/2019-09/meta/validation#/$defs/simpleTypes"})
        self.assertTrue(validator.is_valid("string"))
        self.assertFalse(validator.is_valid("strings"))


if __name__ == "__main__":
    unittest.main()
