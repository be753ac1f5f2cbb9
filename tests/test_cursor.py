"""CursorCodec: a cursor reads back only for the query and secret it was issued under."""

import base64
import unittest

from agent_lab.cursor import CURSOR_VERSION, MIN_SECRET_BYTES, CursorCodec, _POSITION
from agent_lab.errors import Outcome, ToolFailure

SECRET = b"k" * 32
QUERY = {"status": "open", "tenant_view": ["a", "b"], "limit": 10}


def flip_character(token, index):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    replacement = alphabet[(alphabet.index(token[index]) + 1) % len(alphabet)]
    return token[:index] + replacement + token[index + 1 :]


class CursorCodecTest(unittest.TestCase):
    def setUp(self):
        self.codec = CursorCodec(SECRET)

    def assertInvalidCursor(self, token, query=QUERY, codec=None):
        with self.assertRaises(ToolFailure) as caught:
            (codec or self.codec).read(token, query)
        self.assertEqual(caught.exception.code, "invalid_cursor")
        self.assertEqual(caught.exception.error.category.value, "validation")
        return caught.exception

    def test_issued_cursor_reads_back_its_position(self):
        for position in (0, 1, 25, 10**12, 2**63 - 1):
            with self.subTest(position=position):
                self.assertEqual(self.codec.read(self.codec.issue(position, QUERY), QUERY), position)

    def test_cursor_is_short_and_url_safe(self):
        token = self.codec.issue(123456, QUERY)
        self.assertLessEqual(len(token), 40)
        self.assertRegex(token, r"\A[A-Za-z0-9_-]+\Z")

    def test_query_key_order_does_not_matter(self):
        token = self.codec.issue(7, {"a": 1, "b": [1, 2]})
        self.assertEqual(self.codec.read(token, {"b": [1, 2], "a": 1}), 7)

    def test_equal_numbers_are_the_same_query(self):
        token = self.codec.issue(7, {"limit": 10})
        self.assertEqual(self.codec.read(token, {"limit": 10.0}), 7)

    def test_cursor_for_other_filters_is_invalid(self):
        token = self.codec.issue(20, QUERY)
        self.assertInvalidCursor(token, {**QUERY, "status": "closed"})
        self.assertInvalidCursor(token, {k: v for k, v in QUERY.items() if k != "limit"})
        self.assertInvalidCursor(token, {})

    def test_cursor_issued_under_another_secret_is_invalid(self):
        foreign = CursorCodec(b"z" * 32).issue(20, QUERY)
        self.assertInvalidCursor(foreign)

    def test_random_codecs_do_not_accept_each_others_cursors(self):
        first, second = CursorCodec.random(), CursorCodec.random()
        token = first.issue(3, QUERY)
        self.assertEqual(first.read(token, QUERY), 3)
        self.assertInvalidCursor(token, codec=second)

    def test_editing_any_character_of_a_cursor_makes_it_invalid(self):
        token = self.codec.issue(40, QUERY)
        for index in range(len(token)):
            with self.subTest(index=index):
                self.assertInvalidCursor(flip_character(token, index))

    def test_position_changed_with_a_stale_tag_is_invalid(self):
        raw = bytearray(base64.urlsafe_b64decode(self.codec.issue(40, QUERY) + "=="))
        raw[1 : 1 + _POSITION.size] = _POSITION.pack(4000)
        self.assertInvalidCursor(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode())

    def test_malformed_tokens_are_invalid_not_crashes(self):
        token = self.codec.issue(40, QUERY)
        for bad in ("", "abc", token[:-1], token + "A", token + "==", token.replace(token[5], "+"), "!" * 34,
                    " " + token[1:], token[:10] + "\n" + token[11:], "é" * 34):
            with self.subTest(bad=bad):
                self.assertInvalidCursor(bad)

    def test_non_string_tokens_are_invalid(self):
        token = self.codec.issue(40, QUERY)
        for bad in (None, 40, token.encode(), [token], {"cursor": token}):
            with self.subTest(bad=bad):
                self.assertInvalidCursor(bad)

    def test_other_version_byte_is_invalid_even_with_a_valid_tag(self):
        head = bytes([CURSOR_VERSION + 1]) + _POSITION.pack(5)
        raw = head + self.codec._tag(head, b'{"limit":10,"status":"open","tenant_view":["a","b"]}')
        self.assertInvalidCursor(base64.urlsafe_b64encode(raw).rstrip(b"=").decode())

    def test_negative_position_is_invalid_even_with_a_valid_tag(self):
        head = bytes([CURSOR_VERSION]) + _POSITION.pack(-1)
        raw = head + self.codec._tag(head, b'{"limit":10,"status":"open","tenant_view":["a","b"]}')
        token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        self.assertInvalidCursor(token)
        # The same construction with position 5 does verify, so the refusal above is about the sign.
        head = bytes([CURSOR_VERSION]) + _POSITION.pack(5)
        raw = head + self.codec._tag(head, b'{"limit":10,"status":"open","tenant_view":["a","b"]}')
        self.assertEqual(self.codec.read(base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), QUERY), 5)

    def test_invalid_cursor_is_a_safe_model_facing_error(self):
        failure = self.assertInvalidCursor("A" * 34)
        self.assertEqual(failure.error.next_action.value, "fix_arguments")
        self.assertNotIn("A" * 34, failure.error.message)
        from agent_lab.errors import CATALOGUE

        self.assertIs(CATALOGUE["invalid_cursor"].outcome, Outcome.FAILED)

    def test_secret_shorter_than_the_minimum_is_refused(self):
        with self.assertRaises(ValueError):
            CursorCodec(b"x" * (MIN_SECRET_BYTES - 1))
        self.assertIsInstance(CursorCodec(b"x" * MIN_SECRET_BYTES), CursorCodec)

    def test_a_registry_refuses_a_short_cursor_secret_when_it_is_built(self):
        # Not on the first call: every handler that takes a ctx was an internal_error, cursors or not.
        from agent_lab.registry import Registry

        with self.assertRaises(ValueError):
            Registry(cursor_secret=b"x" * (MIN_SECRET_BYTES - 1))
        with Registry(cursor_secret=bytearray(b"x" * MIN_SECRET_BYTES)) as registry:
            self.assertEqual(registry.cursors.read(registry.cursors.issue(3, QUERY), QUERY), 3)

    def test_secret_must_be_bytes(self):
        with self.assertRaises(TypeError):
            CursorCodec("a string secret of 32 characters")  # type: ignore[arg-type]

    def test_repr_never_shows_the_secret(self):
        self.assertNotIn("kkkk", repr(self.codec))

    def test_issue_refuses_positions_that_are_not_non_negative_ints(self):
        for bad in (-1, 2**63, 1.0, True, "3", None):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                self.codec.issue(bad, QUERY)  # type: ignore[arg-type]

    def test_query_must_be_a_plain_json_mapping(self):
        for bad in ({"x": float("nan")}, {"x": {1, 2}}, ["not", "a", "mapping"]):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                self.codec.issue(1, bad)  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()


class CursorsBoundToToolAndTenantTest(unittest.TestCase):
    """The codec a handler gets as ctx.cursors: a cursor crosses neither tools nor tenants, whatever
    query a handler passes (a handler that leaves the tenant out of its query stays safe)."""

    def setUp(self):
        from agent_lab import Actor, Registry, ToolCall, ToolSpec

        self.Actor, self.ToolCall = Actor, ToolCall
        self.registry = Registry(cursor_secret=SECRET)
        self.addCleanup(self.registry.close)
        schema = {"type": "object", "properties": {"cursor": {"type": "string"}}, "additionalProperties": False}

        def pages(arguments, ctx):  # the same filters for every tool and tenant: the query names neither
            start = ctx.cursors.read(arguments["cursor"], {}) if "cursor" in arguments else 0
            return {"start": start, "next_cursor": ctx.cursors.issue(start + 10, {})}

        for name in ("list_a", "list_b"):
            self.registry.register(ToolSpec(name=name, description="Pages.", input_schema=schema), pages)

    def call(self, tool, tenant, cursor=None):
        arguments = {} if cursor is None else {"cursor": cursor}
        return self.registry.invoke(self.ToolCall(tool, arguments), actor=self.Actor(id="u", tenant=tenant))

    def test_a_cursor_reads_back_on_the_tool_and_tenant_it_was_issued_to(self):
        cursor = self.call("list_a", "acme").output["next_cursor"]
        self.assertEqual(self.call("list_a", "acme", cursor).output["start"], 10)

    def test_a_cursor_of_another_tool_or_tenant_is_invalid(self):
        cursor = self.call("list_a", "acme").output["next_cursor"]
        for tool, tenant in (("list_b", "acme"), ("list_a", "globex"), ("list_b", "globex")):
            with self.subTest(tool=tool, tenant=tenant):
                refused = self.call(tool, tenant, cursor)
                self.assertEqual((refused.error.code, refused.outcome), ("invalid_cursor", Outcome.FAILED))

    def test_a_bound_cursor_is_not_an_unbound_one_and_scopes_cannot_be_spliced(self):
        codec = CursorCodec(SECRET)
        self.assertRaises(ToolFailure, codec.read, codec.bound("t", "acme").issue(5, {}), {})
        self.assertRaises(ToolFailure, codec.bound("t", "acme").read, codec.issue(5, {}), {})
        self.assertRaises(ToolFailure, codec.bound("t", "a,cme").read, codec.bound("t,a", "cme").issue(5, {}), {})
        self.assertEqual(codec.bound("t", "acme").read(codec.bound("t", "acme").issue(5, {}), {}), 5)
