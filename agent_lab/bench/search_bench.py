"""Tool search over a large generated catalog: recall@5 and latency per query (printed, never asserted).

The catalog: 24 namespaces (crm, billing, calendar, ...), each with its entities and the verbs that fit
them, rendered as `namespace.verb_entity` tools with a written description and typed input properties
(1,000+ tools in all, generated deterministically). The queries: for each of a fixed sample of tools, a
natural-language request written from held-out templates and synonyms that never appear in any
description (e.g. "get rid of the invoice I no longer need in billing" for billing.delete_invoice), so
the search has to work from shared words, not copied sentences. Recall@5: the share of queries whose
tool is among the five results. Latency: `Registry.search` per query, after one warm-up search builds
the index (the build time is printed too).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any, Sequence

from ..registry import Registry
from ..spec import ApprovalPolicy, Effect, ToolSpec

__all__ = ["build_catalog", "held_out_queries", "main"]

NAMESPACES: dict[str, tuple[str, list[str]]] = {
    "crm": ("customer relationship records", ["contact", "deal", "company", "lead", "pipeline", "account_note"]),
    "billing": ("invoices and payments", ["invoice", "payment", "refund", "subscription", "coupon", "tax_rate"]),
    "calendar": ("meetings and schedules", ["event", "meeting_room", "reminder", "availability", "attendee"]),
    "email": ("mail messages", ["message", "draft", "thread", "mail_label", "mail_filter", "signature"]),
    "files": ("documents in storage", ["file", "folder", "share_link", "file_version", "upload_session"]),
    "github": ("code hosting", ["repository", "issue", "pull_request", "branch", "release", "webhook"]),
    "jira": ("project tracking", ["sprint", "epic", "story", "board", "worklog"]),
    "slack": ("team chat", ["channel", "chat_message", "reaction", "user_group", "bookmark"]),
    "weather": ("forecasts", ["forecast", "weather_alert", "air_quality", "historical_weather"]),
    "maps": ("places and routes", ["route", "place", "geocode_result", "travel_time", "map_tile"]),
    "hr": ("employees", ["employee", "time_off_request", "job_posting", "candidate", "performance_review"]),
    "payroll": ("salaries", ["paycheck", "salary_band", "bonus", "payroll_run", "deduction"]),
    "inventory": ("stock levels", ["product", "warehouse", "stock_level", "purchase_order", "supplier"]),
    "shipping": ("parcels", ["shipment", "shipping_label", "carrier", "tracking_event", "return_label"]),
    "analytics": ("usage numbers", ["dashboard", "report", "metric", "funnel", "cohort"]),
    "ads": ("advertising", ["campaign", "ad_group", "creative", "budget", "keyword_bid"]),
    "support": ("customer help desk", ["ticket", "macro", "satisfaction_survey", "escalation", "sla_policy"]),
    "wiki": ("knowledge pages", ["page", "space", "page_comment", "template", "attachment"]),
    "database": ("data tables", ["table", "query_result", "backup", "index", "migration"]),
    "cloud": ("servers and deployments", ["virtual_machine", "deployment", "dns_record", "load_balancer", "secret"]),
    "auth": ("sign-in and access", ["api_key", "role", "session", "sso_connection", "audit_entry"]),
    "notes": ("personal notes", ["note", "notebook", "checklist", "note_tag"]),
    "music": ("playback", ["playlist", "track", "album", "queue_entry"]),
    "travel": ("trips", ["flight", "hotel_booking", "itinerary", "rental_car", "visa_requirement"]),
}

# verb -> (description phrase, effect); descriptions use these words only.
VERBS: dict[str, tuple[str, Effect]] = {
    "get": ("Read one {entity} by its id", Effect.READ),
    "list": ("List {entities}, newest first, one page at a time", Effect.READ),
    "search": ("Search {entities} by words in their title or text", Effect.READ),
    "create": ("Create a new {entity}", Effect.WRITE),
    "update": ("Update fields of an existing {entity}", Effect.WRITE),
    "delete": ("Delete a {entity} permanently", Effect.DESTRUCTIVE),
    "archive": ("Archive a {entity} so it no longer shows in lists", Effect.WRITE),
    "export": ("Export {entities} as a CSV file", Effect.READ),
    "share": ("Share a {entity} with another person", Effect.WRITE),
}

# Held out: query phrasings and verb synonyms that never appear in a description.
QUERY_VERBS: dict[str, list[str]] = {
    "get": ["show me the {entity} with id 42 from {area}", "open the {entity} I was just looking at in {area}",
            "pull up details of one {entity} in {area}"],
    "list": ["what {entities} do we have in {area}", "show all my {entities} in {area}",
             "give me every {entity} in {area}"],
    "search": ["look for {entities} mentioning quarterly goals in {area}", "find {entities} about the launch in {area}",
               "which {entities} talk about pricing in {area}"],
    "create": ["make a brand new {entity} in {area}", "add another {entity} to {area}",
               "set up a fresh {entity} in {area}"],
    "update": ["change the {entity} details in {area}", "edit the {entity} I made yesterday in {area}",
               "modify the {entity} in {area}"],
    "delete": ["get rid of the {entity} I no longer need in {area}", "remove that {entity} from {area} for good",
               "erase the {entity} in {area}"],
    "archive": ["hide the old {entity} from view in {area}", "put the finished {entity} away in {area}",
                "shelve the {entity} in {area}"],
    "export": ["download all {entities} from {area} into a spreadsheet", "dump the {entities} of {area} to csv",
               "save every {entity} of {area} to a spreadsheet file"],
    "share": ["send the {entity} over to a colleague in {area}", "give my teammate access to the {entity} in {area}",
              "let someone else see the {entity} in {area}"],
}


def _words(entity: str) -> str:
    return entity.replace("_", " ")


def _plural(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") and not words.endswith("ey") else words + "s"


def build_catalog() -> list[ToolSpec]:
    """Every namespace x entity x verb as a ToolSpec (deterministic order)."""
    specs = []
    for namespace, (area, entities) in NAMESPACES.items():
        for entity in entities:
            for verb, (phrase, effect) in VERBS.items():
                words = _words(entity)
                description = (f"{phrase.format(entity=words, entities=_plural(words))} in {namespace} "
                               f"({area}). Use it only for {namespace} {_plural(words)}.")
                properties: dict[str, Any] = {}
                required: list[str] = []
                if verb in ("get", "update", "delete", "archive", "share"):
                    properties[f"{entity}_id"] = {"type": "string", "description": f"The {words} id."}
                    required.append(f"{entity}_id")
                if verb == "search":
                    properties["text"] = {"type": "string", "description": "Words to look for."}
                    required.append("text")
                if verb == "share":
                    properties["person_email"] = {"type": "string", "description": "Who to share it with."}
                    required.append("person_email")
                key = None
                if effect is not Effect.READ:
                    properties["action_id"] = {"type": "string", "description": "Your id for this action."}
                    required.append("action_id")
                    key = "action_id"
                specs.append(ToolSpec(
                    name=f"{namespace}.{verb}_{entity}", description=description,
                    input_schema={"type": "object", "properties": properties, "required": required,
                                  "additionalProperties": False},
                    output_schema={"type": "object"}, effect=effect, idempotency_key=key,
                    approval=ApprovalPolicy.ALWAYS if effect is Effect.DESTRUCTIVE else ApprovalPolicy.NEVER,
                ))
    return specs


def held_out_queries(specs: Sequence[ToolSpec], *, count: int, seed: int = 12) -> list[tuple[str, str]]:
    """(query, the tool it asks for) for `count` tools sampled with a fixed seed."""
    chooser = random.Random(seed)
    queries = []
    for spec in chooser.sample(list(specs), count):
        namespace, rest = spec.name.split(".", 1)
        verb, entity = rest.split("_", 1)
        words = _words(entity)
        template = chooser.choice(QUERY_VERBS[verb])
        queries.append((template.format(entity=words, entities=_plural(words), area=namespace), spec.name))
    return queries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_lab.py bench --only search", description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300, help="held-out queries to run (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="times each query is timed; the best counts")
    args, _ = parser.parse_known_args(argv)
    specs = build_catalog()
    namespaces = len({spec.name.split(".", 1)[0] for spec in specs})
    registry = Registry()
    try:
        for spec in specs:
            registry.register(spec, lambda arguments: {})
        queries = held_out_queries(specs, count=min(args.queries, len(specs)))
        started = time.perf_counter()
        registry.search("warm up", limit=5)
        build_ms = (time.perf_counter() - started) * 1000
        hits, latencies = 0, []
        for query, wanted in queries:
            best = float("inf")
            for _ in range(max(1, args.rounds)):
                began = time.perf_counter()
                found = registry.search(query, limit=5)
                best = min(best, time.perf_counter() - began)
            latencies.append(best * 1000)
            hits += any(tool["name"] == wanted for tool in found)
    finally:
        registry.close()
    latencies.sort()
    print(f"catalog: {len(specs)} tools in {namespaces} namespaces; {len(queries)} held-out queries")
    print(f"recall@5: {hits / len(queries):.3f} ({hits}/{len(queries)})")
    print(f"search latency per query: p50 {statistics.median(latencies):.3f} ms, "
          f"p95 {latencies[int(0.95 * (len(latencies) - 1))]:.3f} ms, max {latencies[-1]:.3f} ms")
    print(f"index build (first search): {build_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
