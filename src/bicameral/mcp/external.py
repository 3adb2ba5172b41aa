"""`plugins.json`'s `mcps`: each external MCP server's entry checked on its own, and its `${VAR}`s resolved at start."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_VAR = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$"


class ExternalServer(BaseModel):
    """One `mcps` entry, in the shape other assistants use (`shared` and `timeout_seconds` are ours)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=32)
    type: Literal["stdio", "http", "sse"] = "stdio"
    command: str | None = Field(default=None, min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    # False: its tools are the owner's only (offered to and run for the owner's turns); true: everyone's.
    shared: bool = False
    # Tool names to offer (`mcp__<server>` for all of them, `*` a wildcard); empty: every tool.
    allowed_tools: tuple[str, ...] = ()
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _transport_fields(self) -> ExternalServer:
        if self.type == "stdio":
            if self.command is None:
                raise ValueError("a stdio server needs a command (e.g. \"npx\" or \"node\")")
            if self.url is not None or self.headers:
                raise ValueError("url and headers are for http and sse servers; a stdio server has a command")
        else:
            if self.url is None:
                raise ValueError(f"an {self.type} server needs a url")
            if self.command is not None or self.args:
                raise ValueError(f"command and args are for stdio servers; an {self.type} server has a url")
        return self


@dataclass(frozen=True)
class Resolved:
    """An entry with its `${VAR}`s filled in: what a start uses, never kept beyond it nor shown anywhere."""

    server: ExternalServer
    args: tuple[str, ...]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str]


def parse_servers(entries: Sequence[Any]) -> tuple[list[ExternalServer], list[str]]:
    """The valid entries, and one line for each entry left out (a bad one never stops the rest, nor start-up)."""
    servers: list[ExternalServer] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        label = f"mcps[{index}]"
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            label = f"mcps[{index}] ({entry['name'][:40]!r})"
        try:
            server = ExternalServer.model_validate(entry)
        except ValidationError as exc:
            problems.append(f"plugin {label} is left out: {_brief(exc)}")
            continue
        if server.name in seen:
            problems.append(f"plugin {label} is left out: another entry already has the name {server.name!r}")
            continue
        seen.add(server.name)
        if server.enabled:
            servers.append(server)
    return servers, problems


def variables(server: ExternalServer) -> list[str]:
    """Every `${VAR}` the entry refers to, in order, once each."""
    found: list[str] = []
    for text in _texts(server):
        for name in _VAR.findall(text):
            if name not in found:
                found.append(name)
    return found


def resolve(server: ExternalServer, lookup: Callable[[str], str | None]) -> Resolved | str:
    """The entry with its `${VAR}`s replaced, or why it cannot start (a variable unset, empty or misspelt).

    One pass: a value is never expanded again, so `A=${A}` or `A=${B}`, `B=${A}` cannot loop.
    """
    names = variables(server)
    bad = [name for name in names if not _VAR_NAME.fullmatch(name)]
    if bad:
        return f"'${{{bad[0]}}}' is not a variable name (letters, digits and _, not starting with a digit)"
    values = {name: lookup(name) for name in names}
    missing = [name for name, value in values.items() if not value]
    if missing:
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"

    def fill(text: str) -> str:
        return _VAR.sub(lambda match: values[match.group(1)] or "", text)

    return Resolved(
        server=server,
        args=tuple(fill(arg) for arg in server.args),
        env={key: fill(value) for key, value in server.env.items()},
        url=fill(server.url) if server.url is not None else None,
        headers={key: fill(value) for key, value in server.headers.items()},
    )


def _texts(server: ExternalServer) -> list[str]:
    return [*server.args, *server.env.values(), *([server.url] if server.url else []), *server.headers.values()]


def _brief(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = f"unknown key (known: {', '.join(ExternalServer.model_fields)})"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
