"""Registry.search (BM25), the search_tools meta-tool, and deferred-loading exports."""

from __future__ import annotations

import unittest

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab.adapters import export_catalog
from agent_lab.lint.language import name_words, stem
from agent_lab.search import search_tool, search_words
from fixtures.lint.benign_tools import benign_tools

READER = Actor(id="a", tenant="t", permissions={"files:read", "mail:read", "crm:read", "calendar:read"})


def registry_of(specs) -> Registry:
    registry = Registry()
    for spec in specs:
        registry.register(spec, lambda arguments: {})
    return registry


def names(found) -> list[str]:
    return [tool["name"] for tool in found]


class SearchRanksTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = registry_of(benign_tools())
        self.addCleanup(self.registry.close)

    def test_the_tool_that_fits_a_plain_request_ranks_first(self) -> None:
        for query, wanted in (("what's the weather going to be tomorrow in Lyon", "get_weather_forecast"),
                              ("move my meeting to friday", "reschedule_calendar_event"),
                              ("refund part of a paid invoice", "refund_invoice_payment"),
                              ("how many grams is a cup of flour", "convert_recipe_units")):
            with self.subTest(query=query):
                self.assertEqual(names(self.registry.search(query, limit=5))[0], wanted)

    def test_property_names_and_descriptions_are_searched(self) -> None:
        self.assertIn("plan_route", names(self.registry.search("latitude longitude travel mode")))

    def test_results_are_catalog_entries_best_first_at_most_limit(self) -> None:
        found = self.registry.search("list", limit=3)
        self.assertEqual(len(found), 3)
        self.assertEqual(found[0], self.registry.spec(found[0]["name"]).model_schema())

    def test_a_query_with_no_known_word_finds_nothing(self) -> None:
        self.assertEqual(self.registry.search("zzzz qqqq"), [])
        self.assertEqual(self.registry.search("   "), [])

    def test_bad_limits_and_queries_are_refused(self) -> None:
        for limit in (0, -1, 51, True, 2.5):
            with self.subTest(limit=limit), self.assertRaises(ValueError):
                self.registry.search("file", limit=limit)
        with self.assertRaises(TypeError):
            self.registry.search(None)  # type: ignore[arg-type]


def tool(name: str, description: str) -> ToolSpec:
    return ToolSpec(name=name, description=description, input_schema={"type": "object"})


class SearchWordsTest(unittest.TestCase):
    """What a query and a tool have to share: words, after splitting names and folding inflections."""

    def test_acronyms_in_names_and_prose_stay_whole_words(self) -> None:
        self.assertEqual(name_words("getHTTPResponse"), ["get", "http", "response"])
        self.assertEqual(search_words("Export invoices as a CSV file via fetchURL"),
                         ["export", "invoic", "csv", "file", "via", "fetch", "url"])
        with registry_of([tool("billing.get_invoice", "Read one invoice by id."),
                          tool("billing.export_invoice", "Export invoices as a CSV file.")]) as registry:
            self.assertEqual(names(registry.search("invoices to csv"))[0], "billing.export_invoice")

    def test_every_inflection_of_a_word_meets_the_others(self) -> None:
        for forms in (("update", "updates", "updated", "updating"), ("create", "creates", "created", "creating"),
                      ("search", "searches", "searched", "searching"), ("file", "files", "filed", "filing"),
                      ("policy", "policies"), ("stop", "stopped", "stopping"), ("agree", "agreed")):
            with self.subTest(forms=forms):
                self.assertEqual(len({stem(form) for form in forms}), 1, [stem(form) for form in forms])
        for kept in ("status", "analysis", "class", "need", "sing", "v2"):
            with self.subTest(kept=kept):
                self.assertEqual(stem(kept), kept)
        with registry_of([tool("get_invoice", "Read one invoice by id."),
                          tool("update_invoice", "Update fields of an existing invoice.")]) as registry:
            self.assertEqual(names(registry.search("the invoice I updated"))[0], "update_invoice")

    def test_a_field_that_does_not_match_no_longer_decides_by_its_length(self) -> None:
        # Both names match the query equally and neither description does: BM25F normalises each field by
        # its own length, so the shorter description no longer wins; the tie keeps registration order.
        with registry_of([tool("billing.archive_invoice", "Move one to the archive so that it no longer shows "
                                                          "in the lists people browse every day."),
                          tool("billing.get_invoice", "Read one by id.")]) as registry:
            self.assertEqual(names(registry.search("billing invoice")), ["billing.archive_invoice",
                                                                         "billing.get_invoice"])


class SearchRespectsPermissionsTest(unittest.TestCase):
    def test_an_actor_finds_only_what_its_catalog_lists(self) -> None:
        with registry_of(benign_tools()) as registry:
            visible = {tool["name"] for tool in registry.catalog(READER)}
            for query in ("delete a file", "send an email reply", "restart a deployment", "refund", "file"):
                with self.subTest(query=query):
                    self.assertTrue(set(names(registry.search(query, actor=READER, limit=50))) <= visible)
            self.assertNotIn("delete_file", names(registry.search("delete a file permanently", actor=READER)))
            self.assertIn("delete_file", names(registry.search("delete a file permanently")))

    def test_hidden_tools_do_not_change_the_order_of_visible_ones(self) -> None:
        tools = benign_tools()
        visible_only = [spec for spec in tools if READER.may(spec.required_permission)]
        with registry_of(tools) as everything, registry_of(visible_only) as just_visible:
            for query in ("read a file", "calendar event", "contact phone", "search mail"):
                with self.subTest(query=query):
                    self.assertEqual(everything.search(query, actor=READER, limit=10),
                                     just_visible.search(query, actor=READER, limit=10))


class SearchIsDeterministicTest(unittest.TestCase):
    def test_ties_keep_registration_order(self) -> None:
        twins = [ToolSpec(name=f"get_widget_{suffix}", description="Read one widget by id. Use it for widgets.",
                          input_schema={"type": "object"}) for suffix in ("red", "big", "old")]
        with registry_of(twins) as registry:
            self.assertEqual(names(registry.search("widget")), ["get_widget_red", "get_widget_big", "get_widget_old"])

    def test_a_tool_registered_later_is_found(self) -> None:
        with registry_of(benign_tools()[:3]) as registry:
            self.assertNotIn("scale_recipe", names(registry.search("recipe servings")))
            registry.register(benign_tools()[-1], lambda arguments: {})
            self.assertIn("scale_recipe", names(registry.search("recipe servings")))


class SearchToolsMetaToolTest(unittest.TestCase):
    def test_the_model_finds_tools_it_may_call_with_their_input_schemas(self) -> None:
        with registry_of(benign_tools()) as registry:
            registry.register(*search_tool(registry))
            result = registry.invoke(ToolCall("search_tools", {"query": "read a text file", "limit": 3}), actor=READER)
            self.assertTrue(result.ok)
            found = result.output["tools"]
            self.assertLessEqual(len(found), 3)
            self.assertEqual(found[0]["name"], "read_text_file")
            self.assertEqual(found[0]["input_schema"], registry.spec("read_text_file").input_schema)
            self.assertNotIn("search_tools", names(found))
            self.assertTrue({tool["name"] for tool in found} <= {tool["name"] for tool in registry.catalog(READER)})

    def test_the_meta_tool_refuses_bad_arguments_like_any_tool(self) -> None:
        with registry_of(benign_tools()) as registry:
            registry.register(*search_tool(registry, max_results=5))
            refused = registry.invoke(ToolCall("search_tools", {"query": "x", "limit": 6}), actor=READER)
            self.assertEqual(refused.error.code, "invalid_arguments")

    def test_the_meta_tool_passes_its_own_lint(self) -> None:
        from agent_lab.lint import Severity, lint_catalog

        with Registry() as registry:
            spec, _ = search_tool(registry)
            self.assertEqual([f.rule for f in lint_catalog([spec]) if f.severity is not Severity.NOTE], [])


class DeferredExportsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.specs = [ToolSpec(name=name, description="Read something. Use it when asked.",
                               input_schema={"type": "object"}) for name in ("crm.get_contact", "crm.list_deals", "get_time")]

    def test_openai_marks_deferred_functions_and_adds_tool_search(self) -> None:
        tools = export_catalog(self.specs, "openai", deferred=["crm.get_contact", "crm.list_deals"])
        self.assertEqual([tool.get("defer_loading") for tool in tools[:3]], [True, True, None])
        self.assertEqual(tools[-1], {"type": "tool_search"})

    def test_openai_namespaces_group_tools_and_keep_defer_loading_on_the_functions(self) -> None:
        tools = export_catalog(self.specs, "openai", deferred=True, namespaces={"crm": "Customer records."})
        namespace = tools[0]
        self.assertEqual((namespace["type"], namespace["name"], namespace["description"]),
                         ("namespace", "crm", "Customer records."))
        self.assertEqual([tool["name"] for tool in namespace["tools"]], ["crm__get_contact", "crm__list_deals"])
        self.assertTrue(all(tool["defer_loading"] for tool in namespace["tools"]))
        self.assertNotIn("defer_loading", namespace)
        self.assertEqual(tools[1]["name"], "get_time")

    def test_anthropic_marks_deferred_tools_and_adds_the_bm25_tool_search_tool(self) -> None:
        tools = export_catalog(self.specs, "anthropic", deferred=True)
        self.assertTrue(all(tool["defer_loading"] for tool in tools[:3]))
        self.assertEqual(tools[-1], {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})

    def test_hosts_without_documented_deferred_loading_refuse_it(self) -> None:
        for fmt in ("openai-chat", "mcp"):
            with self.subTest(fmt=fmt), self.assertRaisesRegex(ValueError, "search_tool"):
                export_catalog(self.specs, fmt, deferred=True)
        with self.assertRaisesRegex(ValueError, "not in the catalog"):
            export_catalog(self.specs, "openai", deferred=["nope"])

    def test_without_deferred_options_exports_are_unchanged(self) -> None:
        self.assertNotIn("defer_loading", str(export_catalog(self.specs, "anthropic")))


if __name__ == "__main__":
    unittest.main()
