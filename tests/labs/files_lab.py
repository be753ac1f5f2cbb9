"""A second, non-ticket lab: a small file store seen through three tool surfaces.

The world (`FileStore`) holds a few files of two tenants; each file carries a `share_token`, a secret
that must never reach a model. Every write or delete appends one effect record. Writes can be held
(`write_delay_ms`, `slow_writes`) until the lab settles, so a case can replay a write that outlives
its deadline without racing the machine.

Surfaces: `files-naive-v1` (the baseline: no output schemas, no redaction, no idempotency key, no
approval), `files-typed-v2` and `files-typed-v3` (candidates with every contract; v3 adds `stat_file`).
`lab` has all three; `single` only v2; `unsafe` makes the naive surface a candidate, so its gate fails;
`registry()` builds v2 on its own, for `--registry`.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Mapping

from agent_lab import Actor, ApprovalPolicy, Effect, Registry, ToolFailure, ToolSpec
from agent_lab.lab import Lab, Surface

TENANTS = ("acme", "globex")
WAIT_LIMIT_S = 5.0
WRITE_TIMEOUT_MS = 400  # well inside the held writes of its cases, and far above a loaded machine's hand-off


class FileStore:
    """Files by path, each owned by a tenant; the effects it applied; writes it holds until released."""

    def __init__(self, *, write_delay_ms: int = 0, slow_writes: int | None = None) -> None:
        self.files: dict[str, dict[str, Any]] = {
            "/acme/readme.txt": {"tenant": "acme", "content": "Welcome to acme.", "version": 1},
            "/acme/plan.txt": {"tenant": "acme", "content": "Ship the importer.", "version": 1},
            "/globex/notes.txt": {"tenant": "globex", "content": "Globex only.", "version": 1},
        }
        for path, record in self.files.items():
            record["share_token"] = "shr-" + hashlib.sha256(path.encode()).hexdigest()[:20]
        self.effects: list[dict[str, Any]] = []
        self.write_delay_s = write_delay_ms / 1000.0
        self.slow_writes = slow_writes
        self.writes_started = 0
        self._running = 0
        self._releases = 0
        self._changed = threading.Condition()

    def secrets(self) -> list[str]:
        return [record["share_token"] for record in self.files.values()]

    def visible(self, path: str, tenant: str) -> bool:
        record = self.files.get(path)
        return record is not None and record["tenant"] == tenant

    def read(self, path: str) -> dict[str, Any]:
        record = self.files.get(path)
        if record is None:
            raise KeyError(path)
        return {"path": path, **record}

    def write(self, path: str, content: str, tenant: str, request: str | None) -> dict[str, Any]:
        with self._changed:
            self.writes_started += 1
            self._running += 1
            self._changed.notify_all()
            if self.slow_writes is None or self.writes_started <= self.slow_writes:
                releases = self._releases
                self._changed.wait_for(lambda: self._releases != releases, self.write_delay_s)
            try:
                record = self.files.setdefault(path, {"tenant": tenant, "content": "", "version": 0,
                                                      "share_token": "shr-" + hashlib.sha256(path.encode()).hexdigest()[:20]})
                record["content"] = content
                record["version"] += 1
                self.effects.append({"kind": "write", "path": path, "content": content, "request": request or "-"})
                return {"path": path, "version": record["version"]}
            finally:
                self._running -= 1
                self._changed.notify_all()

    def delete(self, path: str, request: str | None) -> dict[str, Any]:
        with self._changed:
            self.files.pop(path, None)
            self.effects.append({"kind": "delete", "path": path, "request": request or "-"})
            return {"path": path, "deleted": True}

    def settle(self) -> None:
        with self._changed:
            self._releases += 1
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._running == 0, WAIT_LIMIT_S)


PATH = {"type": "string", "pattern": "^/[a-z]+/[a-z0-9._-]+$", "description": "A file path, e.g. /acme/readme.txt."}
REQUEST = {"type": "string", "minLength": 8, "maxLength": 64, "description": "Your id for this action; reuse it to retry."}


def _object(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": required, "additionalProperties": False}


def _guard(store: FileStore) -> Any:
    return lambda arguments, actor: store.visible(str(arguments.get("path")), actor.tenant)


def _owned(arguments: Mapping[str, Any], actor: Actor) -> bool:
    """A path under the actor's tenant: whether the file (still) exists is the handler's business, so
    a retried delete reaches its receipt."""
    return str(arguments.get("path", "")).startswith(f"/{actor.tenant}/")


def build_naive(store: FileStore, **options: Any) -> Registry:
    """Reads show the whole record (token included) and a retried write writes again."""
    registry = Registry(**options)
    registry.register(ToolSpec(name="read_file", description="Read a file.", input_schema={"type": "object"}),
                      lambda arguments: store.read(arguments["path"]))
    registry.register(ToolSpec(name="write_file", description="Write a file.", input_schema={"type": "object"},
                               effect=Effect.WRITE),
                      lambda arguments: store.write(arguments["path"], arguments["content"], "acme", None))
    registry.register(ToolSpec(name="delete_file", description="Delete a file.", input_schema={"type": "object"},
                               effect=Effect.DESTRUCTIVE),
                      lambda arguments: store.delete(arguments["path"], None))
    return registry


def _typed_specs(store: FileStore) -> list[tuple[ToolSpec, Any]]:
    guard = _guard(store)

    def read_file(arguments: Mapping[str, Any]) -> dict[str, Any]:
        record = store.read(arguments["path"])
        return {"path": record["path"], "content": record["content"], "version": record["version"],
                "share_token": record["share_token"]}

    def write_file(arguments: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
        return store.write(arguments["path"], arguments["content"], ctx.actor.tenant, arguments["request_id"])

    def delete_file(arguments: Mapping[str, Any]) -> dict[str, Any]:
        if arguments["path"] not in store.files:
            raise ToolFailure("not_found", "No such file.")
        return store.delete(arguments["path"], arguments["request_id"])

    return [
        (ToolSpec(
            name="read_file", description="Read one of your files: content and version. The share token is masked.",
            input_schema=_object({"path": PATH}, ["path"]),
            output_schema=_object({"path": {"type": "string"}, "content": {"type": "string"},
                                   "version": {"type": "integer"}, "share_token": {"type": "string"}},
                                  ["path", "content", "version", "share_token"]),
            required_permission="files:read", resource_guard=guard, redact=("share_token",),
        ), read_file),
        (ToolSpec(
            name="write_file", description="Write a file of yours. Retrying with the same request_id never writes twice.",
            input_schema=_object({"path": PATH, "content": {"type": "string", "maxLength": 1000}, "request_id": REQUEST},
                                 ["path", "content", "request_id"]),
            output_schema=_object({"path": {"type": "string"}, "version": {"type": "integer"}}, ["path", "version"]),
            required_permission="files:write", effect=Effect.WRITE, idempotency_key="request_id",
            timeout_ms=WRITE_TIMEOUT_MS,
        ), write_file),
        (ToolSpec(
            name="delete_file", description="Delete a file of yours. Needs a person's approval of exactly this call.",
            input_schema=_object({"path": PATH, "request_id": REQUEST}, ["path", "request_id"]),
            output_schema=_object({"path": {"type": "string"}, "deleted": {"type": "boolean"}}, ["path", "deleted"]),
            required_permission="files:write", resource_guard=_owned, effect=Effect.DESTRUCTIVE,
            approval=ApprovalPolicy.ALWAYS, idempotency_key="request_id",
        ), delete_file),
    ]


def build_typed_v2(store: FileStore, **options: Any) -> Registry:
    registry = Registry(**options)
    for spec, handler in _typed_specs(store):
        registry.register(spec, handler)
    return registry


def build_typed_v3(store: FileStore, **options: Any) -> Registry:
    registry = build_typed_v2(store, **options)
    registry.register(ToolSpec(
        name="stat_file", description="Size and version of one of your files, without its content.",
        input_schema=_object({"path": PATH}, ["path"]),
        output_schema=_object({"path": {"type": "string"}, "size": {"type": "integer"}, "version": {"type": "integer"}},
                              ["path", "size", "version"]),
        required_permission="files:read", resource_guard=_guard(store),
    ), lambda arguments: {"path": arguments["path"], "size": len(store.read(arguments["path"])["content"]),
                          "version": store.read(arguments["path"])["version"]})
    return registry


WORLD_OPTIONS = {
    "type": "object",
    "properties": {"write_delay_ms": {"type": "integer", "minimum": 0, "maximum": 2000},
                   "slow_writes": {"type": "integer", "minimum": 0}},
    "additionalProperties": False,
}
NAIVE = Surface("files-naive-v1", build_naive, baseline=True)
TYPED_V2 = Surface("files-typed-v2", build_typed_v2)
TYPED_V3 = Surface("files-typed-v3", build_typed_v3)
COMMON: dict[str, Any] = {
    "world": FileStore,
    "effects": lambda store: store.effects,
    "secrets": FileStore.secrets,
    "world_options": WORLD_OPTIONS,
    "settle": FileStore.settle,
    "writes_started": lambda store: store.writes_started,
    "actor": Actor(id="files-agent", tenant="acme", permissions={"files:read", "files:write"}),
}

lab = Lab(name="files", surfaces=[NAIVE, TYPED_V2, TYPED_V3], **COMMON)
single = Lab(name="files-single", surfaces=[TYPED_V2], **COMMON)
unsafe = Lab(name="files-unsafe", surfaces=[Surface("files-naive-v1", build_naive)], **COMMON)


def registry() -> Registry:
    """The v2 surface over a fresh store, for `serve-mcp --registry` and `inspect --registry`."""
    return build_typed_v2(FileStore())
