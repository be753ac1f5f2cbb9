"""Where a server is: a command line to spawn (stdio) or an http(s):// URL (Streamable HTTP).

`parse_server` reads the text a user gives `--mcp`, `mcp = ...` in `[tool.agent-lab]` or
`connect()`:

- a command line, split as a POSIX shell would (quotes, backslashes; no expansion, no pipes):
  `npx -y @modelcontextprotocol/server-memory`. Leading `NAME=VALUE` words set environment variables
  of the child only: `MEMORY_FILE_PATH=/tmp/m.jsonl npx -y @modelcontextprotocol/server-memory`.
- a URL, `https://mcp.example.com/mcp`, whose fragment may name the environment variable holding a
  bearer token: `https://mcp.example.com/mcp#EXAMPLE_TOKEN` (the fragment never leaves the process;
  the token is read when connecting and sent to that origin only). Credentials written in the URL
  itself (`https://user:secret@...`) are refused: they would end up in logs and reports.

`{world}` in a command's words or environment values stands for a lab world's directory
(`with_world`), so each case of a lab gets a server writing to a fresh directory.
"""

from __future__ import annotations

import re
import shlex
import urllib.parse
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

__all__ = ["WORLD_PLACEHOLDER", "ServerAddress", "credential_values", "parse_server"]

WORLD_PLACEHOLDER = "{world}"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
MAX_LABEL_CHARS = 80
MIN_SECRET_LENGTH = 4  # as agent_lab.redaction's: a shorter value is a secret only by its variable's name
_SECRET_FLAG = re.compile(r"(?P<flag>--?[\w.-]*(?:key|token|secret|password|passwd|credential|auth)[\w.-]*)"
                          r"(?:=(?P<value>.*))?", re.IGNORECASE | re.DOTALL)
_CREDENTIAL_NAME = r"[\w.-]*(?:key|token|secret|password|passwd|credential|auth|cookie|session)[\w.-]*"
_CREDENTIAL_ENV = re.compile(_CREDENTIAL_NAME, re.IGNORECASE)
# The shapes a credential takes inside one word of a command line; the group "secret" is what is hidden:
_SECRET_IN_WORD = (
    # a header given to a proxy such as mcp-remote (`--header "Authorization: Bearer ..."`, `-H 'X-Api-Key: ...'`)
    re.compile(rf"(?:^|[=\s]){_CREDENTIAL_NAME}\s*:\s*(?P<secret>.+)", re.IGNORECASE | re.DOTALL),
    # an assignment handed on to another program (`-e API_KEY=...` for docker, `--env GITHUB_TOKEN=...`)
    re.compile(rf"^{_CREDENTIAL_NAME}=(?P<secret>.+)", re.IGNORECASE | re.DOTALL),
    # an HTTP authorization scheme anywhere in a word
    re.compile(r"\b(?:bearer|basic|token)\s+(?P<secret>\S+)", re.IGNORECASE),
    # a URL's password (`postgresql://app:PASSWORD@db/app`) and its query (`?api_key=...`)
    re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:(?P<secret>[^/\s]*)@", re.IGNORECASE),
    re.compile(r"[a-z][a-z0-9+.-]*://[^\s?#]*\?(?P<secret>[^\s#]+)", re.IGNORECASE),
)


@dataclass(frozen=True)
class ServerAddress:
    """A parsed server address. `transport` is "stdio" (argv, env) or "http" (url, token_env)."""

    transport: str
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    url: str | None = None
    token_env: str | None = None

    @property
    def label(self) -> str:
        """How messages and reports name the server: the command (without its environment, without the
        value of a flag named like a credential, `--api-key`, `--token`, ..., and without the credential
        of a header, an assignment, an authorization scheme or a URL written in a word, `-H
        "Authorization: Bearer ..."`, `-e API_KEY=...`, `postgresql://app:PASSWORD@db/app`) or the URL
        without its query (which may hold one too), shortened. The label reaches the model (in
        upstream errors' details), reports and SARIF."""
        if self.transport == "stdio":
            text = " ".join(_masked_words(self.argv))
        else:
            parts = urllib.parse.urlsplit(self.url or "")
            text = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
            if parts.query:
                text += "?\u2026"
        return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "\u2026"

    @property
    def origin(self) -> str | None:
        """scheme://host:port of an HTTP server (the only place its token is ever sent)."""
        if self.url is None:
            return None
        return origin_of(self.url)

    def with_world(self, directory: str) -> ServerAddress:
        """The address with `{world}` replaced by `directory` in every word and environment value."""
        if self.transport != "stdio":
            return self
        return replace(
            self,
            argv=tuple(word.replace(WORLD_PLACEHOLDER, directory) for word in self.argv),
            env=MappingProxyType({name: value.replace(WORLD_PLACEHOLDER, directory) for name, value in self.env.items()}),
        )

    @property
    def mentions_world(self) -> bool:
        return any(WORLD_PLACEHOLDER in text for text in (*self.argv, *self.env.values()))


def _masked_words(words: tuple[str, ...]) -> list[str]:
    """The words, quoted as a shell would read them, with each credential hidden (`_hidden_in`)."""
    return [_masked(word, hidden) for word, hidden in _hidden_in(words)]


def _hidden_in(words: tuple[str, ...]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each word with the spans of it that hold a credential: what follows a flag named like one
    (`--api-key=…`, `--token …`: the label reaches the model, reports and SARIF, and such a value belongs
    in the environment instead) and the shapes of `_SECRET_IN_WORD`."""
    found: list[tuple[str, list[tuple[int, int]]]] = []
    hide_next = False
    for word in words:
        if hide_next:
            found.append((word, [(0, len(word))] if word else []))
            hide_next = False
            continue
        match = _SECRET_FLAG.fullmatch(word)
        if match is not None and match.group("value") is not None:
            found.append((word, [match.span("value")] if match.group("value") else []))
            continue
        hide_next = match is not None
        spans: list[tuple[int, int]] = []
        for pattern in _SECRET_IN_WORD:
            spans += [hit.span("secret") for hit in pattern.finditer(word)]
        found.append((word, spans))
    return found


def _masked(word: str, spans: list[tuple[int, int]]) -> str:
    """`word` quoted as a shell would read it, each span shown as an ellipsis."""
    if not spans:
        return shlex.quote(word)
    shown, at = [], 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        visible = word[at:max(start, at)]
        shown.append((shlex.quote(visible) if visible else "") + "…")
        at = end
    return "".join(shown) + (shlex.quote(word[at:]) if word[at:] else "")


def credential_values(address: ServerAddress, environment: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The credentials a user gave a server, which the server may repeat back (in an error, its stderr)
    and which must then be masked: the value of every environment variable set on the command line or
    passed from `environment` (of a name like a credential's, or of at least MIN_SECRET_LENGTH
    characters: `DEBUG=1` stays), each part of a word its label hides, and a URL's query."""
    variables = {**(environment or {}), **address.env}
    values = [value for name, value in variables.items()
              if value.strip() and (len(value) >= MIN_SECRET_LENGTH or _CREDENTIAL_ENV.fullmatch(name))]
    query = urllib.parse.urlsplit(address.url).query if address.url else ""
    if query:
        values.append(query)
        values += [value for _, value in urllib.parse.parse_qsl(query) if value.strip()]
    for word, spans in _hidden_in(address.argv):
        values += [word[start:end] for start, end in spans if word[start:end].strip()]
    return tuple(values)


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


def parse_server(text: str) -> ServerAddress:
    """The address `text` names (ValueError with a one-line reason otherwise)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("an MCP server must be a command line or an http(s):// URL, not an empty value")
    stripped = text.strip()
    if re.match(r"(?i)https?://", stripped):
        return _parse_url(stripped)
    if re.match(r"(?i)[a-z][a-z0-9+.-]*://", stripped):
        raise ValueError(f"an MCP server URL must start with http:// or https:// (got {stripped.split('://')[0]}://)")
    try:
        words = shlex.split(stripped, posix=True)
    except ValueError as error:
        raise ValueError(f"cannot split the command line {stripped!r}: {error}") from None
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.fullmatch(words[0]):
        name, value = _ASSIGNMENT.fullmatch(words.pop(0)).groups()  # type: ignore[union-attr]
        env[name] = value
    if not words:
        raise ValueError(f"the command line {stripped!r} sets environment variables but names no command")
    if any("\x00" in word for word in words) or any("\x00" in value for value in env.values()):
        raise ValueError("a command line cannot contain a NUL character")
    return ServerAddress("stdio", argv=tuple(words), env=MappingProxyType(env))


def _parse_url(text: str) -> ServerAddress:
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as error:
        raise ValueError(f"not a valid URL: {error}") from None
    if not parts.hostname:
        raise ValueError("an MCP server URL needs a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("an MCP server URL must not carry credentials (user:password@); name the environment "
                         "variable that holds a bearer token after '#' instead, e.g. https://host/mcp#MY_TOKEN")
    token_env = parts.fragment or None
    if token_env is not None and not _ENV_NAME.fullmatch(token_env):
        raise ValueError(f"the part after '#' names the environment variable holding the bearer token; "
                         f"{token_env!r} is not a variable name")
    url = urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc, parts.path or "/", parts.query, ""))
    return ServerAddress("http", url=url, token_env=token_env)
