"""CursorCodec: a cursor reads back only for the query, secret, tool and actor it was issued under, and
only for its lifetime."""

import base64
import unittest

from agent_lab.cursor import CURSOR_VERSION, DEFAULT_CURSOR_LIFETIME_S, MIN_SECRET_BYTES, CursorCodec, _POSITION
from agent_lab.errors import Outcome, ToolFailure

SECRET = b"k" * 32
QUERY = {"status": "open", "tenant_view": ["a", "b"], "limit": 10}
QUERY_BYTES = b'{"limit":10,"status":"open","tenant_view":["a","b"]}'
NOW = 1_767_225_600.0
ISSUED = int(NOW).to_bytes(5, "big")


def token_of(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def flip_character(token, index):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    replacement = alphabet[(alphabet.index(token[index]) + 1) % len(alphabet)]
    return token[:index] + replacement + token[index + 1 :]


class CursorCodecTest(unittest.TestCase):
    def setUp(self):
        self.now = NOW
        self.codec = CursorCodec(SECRET, clock=lambda: self.now)

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
        self.assertEqual(len(token), 40)
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
        raw[6 : 6 + _POSITION.size] = _POSITION.pack(4000)
        self.assertInvalidCursor(token_of(bytes(raw)))

    def test_issue_time_changed_with_a_stale_tag_is_invalid(self):
        raw = bytearray(base64.urlsafe_b64decode(self.codec.issue(40, QUERY) + "=="))
        raw[1:6] = (int(NOW) + 10**6).to_bytes(5, "big")  # an attempt to make an old cursor young again
        self.assertInvalidCursor(token_of(bytes(raw)))

    def test_malformed_tokens_are_invalid_not_crashes(self):
        token = self.codec.issue(40, QUERY)
        for bad in ("", "abc", token[:-1], token + "A", token + "==", token.replace(token[5], "+"), "!" * 40,
                    " " + token[1:], token[:10] + "\n" + token[11:], "é" * 40):
            with self.subTest(bad=bad):
                self.assertInvalidCursor(bad)

    def test_non_string_tokens_are_invalid(self):
        token = self.codec.issue(40, QUERY)
        for bad in (None, 40, token.encode(), [token], {"cursor": token}):
            with self.subTest(bad=bad):
                self.assertInvalidCursor(bad)

    def test_other_version_byte_is_invalid_even_with_a_valid_tag(self):
        head = bytes([CURSOR_VERSION + 1]) + ISSUED + _POSITION.pack(5)
        self.assertInvalidCursor(token_of(head + self.codec._tag(head, QUERY_BYTES)))

    def test_a_version_1_cursor_is_no_longer_read(self):
        # Version 1 had no issue time and bound only the tenant: such a cursor never expired.
        head = bytes([1]) + _POSITION.pack(5)
        self.assertInvalidCursor(token_of(head + self.codec._tag(head, QUERY_BYTES) + bytes(5)))
        self.assertInvalidCursor(token_of(head + self.codec._tag(head, QUERY_BYTES)))

    def test_negative_position_is_invalid_even_with_a_valid_tag(self):
        head = bytes([CURSOR_VERSION]) + ISSUED + _POSITION.pack(-1)
        self.assertInvalidCursor(token_of(head + self.codec._tag(head, QUERY_BYTES)))
        # The same construction with position 5 does verify, so the refusal above is about the sign.
        head = bytes([CURSOR_VERSION]) + ISSUED + _POSITION.pack(5)
        self.assertEqual(self.codec.read(token_of(head + self.codec._tag(head, QUERY_BYTES)), QUERY), 5)

    def test_invalid_cursor_is_a_safe_model_facing_error(self):
        failure = self.assertInvalidCursor("A" * 40)
        self.assertEqual(failure.error.next_action.value, "fix_arguments")
        self.assertNotIn("A" * 40, failure.error.message)
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


class CursorLifetimeTest(unittest.TestCase):
    """Issue 20, item 11: a cursor issued a year ago still read back. It now lives `lifetime_s` by the
    codec's clock (the registry's `clock`), and an expired one says so, so the model starts over."""

    def setUp(self):
        self.now = NOW
        self.codec = CursorCodec(SECRET, lifetime_s=600, clock=lambda: self.now)

    def test_a_cursor_reads_back_within_its_lifetime_and_expires_after_it(self):
        token = self.codec.issue(30, QUERY)
        self.now += 599
        self.assertEqual(self.codec.read(token, QUERY), 30)
        self.now += 1
        with self.assertRaises(ToolFailure) as expired:
            self.codec.read(token, QUERY)
        error = expired.exception.error
        self.assertEqual((error.code, error.category.value, error.next_action.value, error.retryable),
                         ("invalid_cursor", "validation", "fix_arguments", False))
        self.assertIn("has expired (cursors are valid for 10 minutes); call again without a cursor", error.message)
        self.assertEqual(dict(error.details), {"cursor": "expired", "cursor_lifetime_s": 600.0})
        self.assertNotIn(token, error.message)

    def test_the_default_lifetime_is_an_hour(self):
        self.assertEqual(DEFAULT_CURSOR_LIFETIME_S, 3600.0)
        codec = CursorCodec(SECRET, clock=lambda: self.now)
        token = codec.issue(1, QUERY)
        self.now += 3599
        self.assertEqual(codec.read(token, QUERY), 1)
        self.now += 1
        self.assertRaises(ToolFailure, codec.read, token, QUERY)

    def test_only_a_genuine_cursor_is_told_it_expired(self):
        token = self.codec.issue(30, QUERY)
        self.now += 10**6
        for forged, query in ((flip_character(token, 30), QUERY), (token, {**QUERY, "limit": 5})):
            with self.subTest(query=query), self.assertRaises(ToolFailure) as refused:
                self.codec.read(forged, query)
            self.assertNotIn("expired", refused.exception.error.message)
            self.assertEqual(dict(refused.exception.error.details), {})

    def test_a_cursor_issued_further_ahead_than_any_cursor_lives_is_invalid(self):
        self.now += 10**6
        token = self.codec.issue(30, QUERY)
        self.now -= 10**6  # this reader's clock is far behind: no skew explains that
        self.assertRaises(ToolFailure, self.codec.read, token, QUERY)
        self.now += 10**6 - 60  # a minute of skew is fine
        self.assertEqual(self.codec.read(token, QUERY), 30)

    def test_a_clock_that_reads_no_time_issues_nothing_and_reads_every_cursor_as_expired(self):
        token = self.codec.issue(30, QUERY)
        for reading in (float("nan"), float("inf"), None, "now", True, 10**400, -5.0, RuntimeError("ntp")):
            with self.subTest(reading=reading):
                def clock(reading=reading):
                    if isinstance(reading, BaseException):
                        raise reading
                    return reading

                codec = CursorCodec(SECRET, lifetime_s=600, clock=clock)
                with self.assertRaises(ValueError):
                    codec.issue(1, QUERY)
                if reading != -5.0:
                    with self.assertRaises(ToolFailure) as refused:
                        codec.read(token, QUERY)
                    self.assertIn("expired", refused.exception.error.message)

    def test_a_lifetime_must_be_a_finite_number_of_seconds(self):
        for bad in (0, 0.5, -1, float("nan"), float("inf"), True, "60"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                CursorCodec(SECRET, lifetime_s=bad)  # type: ignore[arg-type]
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                __import__("agent_lab").Registry(cursor_lifetime_s=bad)


class CursorsBoundToToolAndActorTest(unittest.TestCase):
    """The codec a handler gets as ctx.cursors: a cursor crosses neither tools nor actors (of the same
    tenant or another), whatever query a handler passes (a handler that leaves the tenant or the actor
    out of its query stays safe), and it lives the registry's `cursor_lifetime_s` by its `clock`."""

    def setUp(self):
        from agent_lab import Actor, Registry, ToolCall, ToolSpec

        self.Actor, self.ToolCall = Actor, ToolCall
        self.now = NOW
        self.registry = Registry(cursor_secret=SECRET, clock=lambda: self.now)
        self.addCleanup(self.registry.close)
        schema = {"type": "object", "properties": {"cursor": {"type": "string"}}, "additionalProperties": False}

        def pages(arguments, ctx):  # the same filters for every tool and tenant: the query names neither
            start = ctx.cursors.read(arguments["cursor"], {}) if "cursor" in arguments else 0
            return {"start": start, "next_cursor": ctx.cursors.issue(start + 10, {})}

        for name in ("list_a", "list_b"):
            self.registry.register(ToolSpec(name=name, description="Pages.", input_schema=schema), pages)

    def call(self, tool, tenant, cursor=None, actor_id="agent-1"):
        arguments = {} if cursor is None else {"cursor": cursor}
        return self.registry.invoke(self.ToolCall(tool, arguments), actor=self.Actor(id=actor_id, tenant=tenant))

    def test_a_cursor_reads_back_on_the_tool_and_actor_it_was_issued_to(self):
        cursor = self.call("list_a", "acme").output["next_cursor"]
        self.assertEqual(self.call("list_a", "acme", cursor).output["start"], 10)

    def test_a_cursor_of_another_tool_tenant_or_actor_is_invalid(self):
        cursor = self.call("list_a", "acme").output["next_cursor"]
        for tool, tenant, actor_id in (("list_b", "acme", "agent-1"), ("list_a", "globex", "agent-1"),
                                       ("list_b", "globex", "agent-1"), ("list_a", "acme", "agent-2")):
            with self.subTest(tool=tool, tenant=tenant, actor=actor_id):
                refused = self.call(tool, tenant, cursor, actor_id)
                self.assertEqual((refused.error.code, refused.outcome), ("invalid_cursor", Outcome.FAILED))

    def test_the_issue_reproducer_agent_2_a_year_later_is_refused_and_so_is_agent_1(self):
        # Issue 20, item 11: a cursor from agent-1 was accepted for agent-2 a year later.
        cursor = self.call("list_a", "acme").output["next_cursor"]
        self.now += 365 * 86400
        for actor_id in ("agent-2", "agent-1"):
            with self.subTest(actor=actor_id):
                refused = self.call("list_a", "acme", cursor, actor_id)
                self.assertEqual((refused.error.code, refused.outcome), ("invalid_cursor", Outcome.FAILED))
        self.assertIn("expired", self.call("list_a", "acme", cursor, "agent-1").error.message)
        self.assertNotIn("expired", self.call("list_a", "acme", cursor, "agent-2").error.message)

    def test_the_registry_lifetime_and_clock_govern_ctx_cursors(self):
        from agent_lab import Registry

        registry = Registry(cursor_secret=SECRET, cursor_lifetime_s=60, clock=lambda: self.now)
        self.addCleanup(registry.close)
        self.assertEqual(registry.cursors.lifetime_s, 60.0)
        for name in ("list_a",):
            registry.register(self.registry.spec(name), self.registry.handler(name))
        actor = self.Actor(id="agent-1", tenant="acme")
        cursor = registry.invoke(self.ToolCall("list_a", {}), actor=actor).output["next_cursor"]
        self.now += 59
        self.assertTrue(registry.invoke(self.ToolCall("list_a", {"cursor": cursor}), actor=actor).ok)
        self.now += 1
        expired = registry.invoke(self.ToolCall("list_a", {"cursor": cursor}), actor=actor)
        self.assertEqual((expired.error.code, expired.outcome), ("invalid_cursor", Outcome.FAILED))
        self.assertIn("cursors are valid for 1 minute", expired.error.message)

    def test_a_bound_cursor_is_not_an_unbound_one_and_scopes_cannot_be_spliced(self):
        codec = CursorCodec(SECRET)
        self.assertRaises(ToolFailure, codec.read, codec.bound("t", "acme", "u").issue(5, {}), {})
        self.assertRaises(ToolFailure, codec.bound("t", "acme", "u").read, codec.issue(5, {}), {})
        self.assertRaises(ToolFailure, codec.bound("t", "a,cme", "u").read, codec.bound("t,a", "cme", "u").issue(5, {}), {})
        self.assertRaises(ToolFailure, codec.bound("t", "acme", "u,v").read, codec.bound("t", "acme,u", "v").issue(5, {}), {})
        self.assertEqual(codec.bound("t", "acme", "u").read(codec.bound("t", "acme", "u").issue(5, {}), {}), 5)


if __name__ == "__main__":
    unittest.main()
