"""Close names for an unknown tool: the name index answers as difflib's full scan does (its one
documented difference is pinned below), never suggests a tool hidden from the actor, and stays
consistent while tools are registered and invoked from several threads."""

from __future__ import annotations

import difflib
import random
import threading
import unittest

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab.names import MAX_SCORED, NameIndex, _best_by_difflib, _matched

SERVICES = ["ticket", "invoice", "customer", "order", "shipment", "refund", "account", "user", "product", "catalog",
            "payment", "subscription", "report", "audit", "inventory", "warehouse", "calendar", "meeting", "email",
            "document"]
VERBS = ["get", "list", "create", "update", "delete", "search", "close", "open", "assign", "archive", "restore",
         "export", "import", "sync", "validate", "approve", "reject", "merge", "split", "tag", "untag", "notify",
         "schedule", "cancel", "refresh"]
OBJECTS = ["details", "status", "notes", "history", "owner", "tags", "items", "lines", "summary", "metadata",
           "attachments", "comments", "links", "events", "totals", "permissions", "settings", "labels", "contacts",
           "fields"]
TEN_THOUSAND = [f"{service}_{verb}_{thing}" for service in SERVICES for verb in VERBS for thing in OBJECTS]


def misspellings(names: list[str], count: int, seed: int) -> list[str]:
    """Typos a model makes: a letter dropped, doubled, swapped or replaced, the end cut off, a plural."""
    chooser = random.Random(seed)
    words = []
    for _ in range(count):
        name = chooser.choice([name for name in names if len(name) >= 3])
        at = chooser.randrange(len(name) - 1)
        kind = chooser.randrange(6)
        if kind == 0:
            words.append(name[:at] + name[at + 1:])
        elif kind == 1:
            words.append(name[:at] + name[at] + name[at:])
        elif kind == 2:
            words.append(name[:at] + name[at + 1] + name[at] + name[at + 2:])
        elif kind == 3:
            words.append(name[:at] + chooser.choice("abcdefghijklmnopqrstuvwxyz_") + name[at + 1:])
        elif kind == 4:
            words.append(name[:max(3, len(name) - chooser.randrange(1, 6))])
        else:
            words.append(name + "s")
    return words


def index_of(names: list[str]) -> NameIndex:
    index = NameIndex()
    for name in names:
        index.add(name)
    return index


def everyone(name: str) -> bool:
    return True


class CloseNamesMatchDifflibTest(unittest.TestCase):
    def test_at_ten_thousand_names_a_sample_of_misspellings_gets_difflibs_answer(self) -> None:
        index = index_of(TEN_THOUSAND)
        words = misspellings(TEN_THOUSAND, 16, seed=11) + ["tiket_get_status", "order_lst", "refunds"]
        for word in words:
            with self.subTest(word=word):
                self.assertEqual(index.close_names(word, everyone), difflib.get_close_matches(word, TEN_THOUSAND))

    def test_a_small_registry_gets_difflibs_answer_for_every_near_name(self) -> None:
        names = ["get_ticket", "get_tickets_by_owner", "close_ticket", "record_ticket_followup", "search_tickets",
                 "get_customer", "ticket_operation", "a", "ab", "x-y.z"]
        index = index_of(names)
        words = misspellings(names, 300, seed=5) + ["", "a", "b", "ab", "ba", "abc", "get", "ticket", "TICKET",
                                                   "get_ticket", "gte_ticket", "z" * 400, "get_tícket", "\ud800ab"]
        for word in words:
            with self.subTest(word=word):
                self.assertEqual(index.close_names(word, everyone), difflib.get_close_matches(word, names))

    def test_the_documented_difference_a_name_sharing_no_three_character_run_is_not_suggested(self) -> None:
        names = ["zaxbxcxdz"] + [f"unrelated_{number}" for number in range(MAX_SCORED)]  # more than one query scores
        self.assertEqual(difflib.get_close_matches("abcd", names), ["zaxbxcxdz"])  # 4 single characters: 8/13 > 0.6
        self.assertEqual(index_of(names).close_names("abcd", everyone), [])

    def test_an_index_no_larger_than_one_query_scores_gives_difflibs_answer_even_without_shared_runs(self) -> None:
        names = ["zaxbxcxdz"] + [f"unrelated_{number}" for number in range(MAX_SCORED - 1)]
        self.assertEqual(index_of(names).close_names("abcd", everyone), difflib.get_close_matches("abcd", names))
        self.assertEqual(index_of(names).close_names("abcd", everyone), ["zaxbxcxdz"])

    def test_answers_are_best_first_ties_to_the_greater_name_and_at_most_n(self) -> None:
        names = ["tool_b", "tool_a", "tool_c", "tool_d"]
        self.assertEqual(index_of(names).close_names("tool_x", everyone), ["tool_d", "tool_c", "tool_b"])
        self.assertEqual(index_of(names).close_names("tool_x", everyone, n=1), ["tool_d"])

    def test_a_name_added_twice_is_indexed_once(self) -> None:
        index = index_of(["get_ticket", "get_ticket"])
        self.assertEqual(len(index), 1)
        self.assertEqual(index.close_names("get_tickte", everyone), ["get_ticket"])


class RatioMatchesDifflibTest(unittest.TestCase):
    """The index scores candidates with its own matcher; it must count what difflib counts."""

    def test_the_matched_characters_equal_difflibs_matching_blocks_for_random_pairs(self) -> None:
        chooser = random.Random(2026)
        alphabets = ["ab", "abc", "ab_", "abcdefghij_", "a\u00e9_.", "get_ticket"]
        for _ in range(20_000):
            alphabet = chooser.choice(alphabets)
            first = "".join(chooser.choice(alphabet) for _ in range(chooser.randrange(0, 16)))
            second = "".join(chooser.choice(alphabet) for _ in range(chooser.randrange(1, 16)))
            blocks = difflib.SequenceMatcher(None, first, second).get_matching_blocks()
            self.assertEqual(_matched(first, second), sum(block.size for block in blocks), (first, second))

    def test_close_names_equal_get_close_matches_for_random_names_and_words(self) -> None:
        chooser = random.Random(7)
        for _ in range(300):
            names = sorted({"".join(chooser.choice("abc_") for _ in range(chooser.randrange(1, 12)))
                            for _ in range(chooser.randrange(1, 30))})
            word = "".join(chooser.choice("abc_") for _ in range(chooser.randrange(1, 12)))
            with self.subTest(names=names, word=word):
                self.assertEqual(_best_by_difflib(word, names, 3), difflib.get_close_matches(word, names))

    def test_a_word_long_enough_for_difflibs_autojunk_gets_difflibs_answer(self) -> None:
        names = ["a" * 100 + "b" * 28, "ab" * 64, "a" * 128]
        word = "a" * 150 + "b" * 60  # 210 characters: difflib ignores its popular characters
        self.assertEqual(_best_by_difflib(word, names, 3), difflib.get_close_matches(word, names))


class HiddenToolsTest(unittest.TestCase):
    def test_a_hidden_name_is_never_suggested_and_does_not_change_the_answer(self) -> None:
        hidden = {name for name in TEN_THOUSAND if name.startswith(("ticket_", "refund_"))}
        shown = [name for name in TEN_THOUSAND if name not in hidden]
        index, only_shown = index_of(TEN_THOUSAND), index_of(shown)
        for word in misspellings(sorted(hidden), 20, seed=3) + misspellings(shown, 10, seed=4):
            with self.subTest(word=word):
                answer = index.close_names(word, lambda name: name not in hidden)
                self.assertFalse(hidden & set(answer))
                self.assertEqual(answer, only_shown.close_names(word, everyone))

    def test_the_registry_suggests_only_tools_the_actor_may_call(self) -> None:
        registry = Registry(run_inline=True)
        self.addCleanup(registry.close)
        for name, permission in (("get_ticket", "tickets:read"), ("get_tickets", "tickets:admin"),
                                 ("get_ticker", "tickets:read")):
            registry.register(ToolSpec(name=name, description="A tool.", input_schema={"type": "object"},
                                       required_permission=permission), lambda arguments: {})
        reader = Actor(id="u", tenant="t", permissions={"tickets:read"})
        admin = Actor(id="a", tenant="t", permissions={"tickets:read", "tickets:admin"})
        asked = ToolCall("get_tickest", {})
        self.assertEqual(registry.invoke(asked, actor=reader).error.details["close_names"], ["get_ticket", "get_ticker"])
        self.assertEqual(registry.invoke(asked, actor=admin).error.details["close_names"],
                         difflib.get_close_matches("get_tickest", ["get_ticket", "get_tickets", "get_ticker"]))
        hidden_exact = registry.invoke(ToolCall("get_tickets", {}), actor=reader)
        self.assertEqual(hidden_exact.error.code, "tool_not_found")
        self.assertEqual(hidden_exact.error.details["close_names"], ["get_ticket", "get_ticker"])


    def test_an_actor_that_refuses_open_tools_is_never_shown_one(self) -> None:
        class ClosedActor(Actor):  # an application's own rule: even a tool without a permission is not for it
            def may(self, permission: str | None) -> bool:
                return permission is not None and super().may(permission)

        registry = Registry(run_inline=True)
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="get_ticket", description="A tool.", input_schema={"type": "object"},
                                   required_permission="tickets:read"), lambda arguments: {})
        registry.register(ToolSpec(name="get_ticker", description="A tool.", input_schema={"type": "object"}),
                          lambda arguments: {})
        actor = ClosedActor(id="u", tenant="t", permissions={"tickets:read"})
        answer = registry.invoke(ToolCall("get_tickex", {}), actor=actor).error.details["close_names"]
        self.assertEqual(answer, ["get_ticket"])


class ConcurrentRegistrationTest(unittest.TestCase):
    def test_names_registered_while_other_threads_ask_are_found_and_nothing_unregistered_is_suggested(self) -> None:
        registry = Registry(run_inline=True)
        self.addCleanup(registry.close)
        actor = Actor(id="u", tenant="t", permissions={"p"})
        names = TEN_THOUSAND[:600]
        asked = misspellings(names, 200, seed=9)
        problems: list[str] = []
        registering_done = threading.Event()

        def register(part: list[str]) -> None:
            for name in part:
                registry.register(ToolSpec(name=name, description="A tool.", input_schema={"type": "object"},
                                           required_permission="p"), lambda arguments: {})

        def ask() -> None:
            while not registering_done.is_set():
                for word in asked[:50]:
                    result = registry.invoke(ToolCall(word, {}), actor=actor)
                    if result.error is not None and result.error.code == "tool_not_found":
                        suggested = result.error.details["close_names"]
                        known = set(registry.names())  # read after the answer: a superset of its snapshot
                        if not set(suggested) <= known or len(suggested) > 3:
                            problems.append(f"{word}: {suggested}")

        writers = [threading.Thread(target=register, args=(names[start::3],)) for start in range(3)]
        readers = [threading.Thread(target=ask) for _ in range(3)]
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join()
        registering_done.set()
        for thread in readers:
            thread.join()
        self.assertEqual(problems, [])
        self.assertEqual(sorted(registry.names()), sorted(names))
        for word in asked:
            if word in names:
                continue
            with self.subTest(word=word):
                answer = registry.invoke(ToolCall(word, {}), actor=actor).error.details["close_names"]
                self.assertEqual(answer, difflib.get_close_matches(word, names))


if __name__ == "__main__":
    unittest.main()
