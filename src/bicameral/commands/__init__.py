"""The `@command` decorator an owner-made command imports; standard library only, so a command loads nothing else."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

Handler = Callable[..., Coroutine[Any, Any, Any]]
# A page's text by its URL, through web_fetch's rules (public addresses only, size and time limits).
Fetch = Callable[[str], Coroutine[Any, Any, str]]
# What a command may be granted beyond pure computation: `network` gives its handler `context.fetch`, `files` gives it
# `context.files` (the asking chat's workspace).
CAPABILITIES = frozenset({"network", "files"})
H = TypeVar("H", bound=Handler)
# The types a parameter may declare: what `/name args` parses from the words typed, and a tool's schema names.
PARAM_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Files(Protocol):
    """The asking chat's workspace under the file tools' checks and limits; a refusal raises ValueError saying why."""

    async def read(self, path: str) -> str: ...

    async def write(self, path: str, text: str) -> None: ...

    async def list(self, path: str = ".") -> list[str]: ...


# A chat's workspace files, given the chat (in the assistant: the file tools' checks; in the child: asked of it).
FilesFor = Callable[[str], Files]


@dataclass(frozen=True)
class Param:
    """One declared parameter: its name, type (str, int, float or bool), what it is for, and whether it must be given."""

    name: str
    type: type
    description: str
    required: bool = True


@dataclass(frozen=True)
class CommandSpec:
    """What `@command` declared, with the handler it decorated."""

    name: str
    description: str
    params: tuple[Param, ...]
    handler: Handler | None  # None in the assistant: it knows a command by its file, and only its child runs it
    takes_context: bool
    capabilities: tuple[str, ...] = ()
    path: str = ""  # the file it was declared in, as the assistant loaded it


@dataclass(frozen=True)
class CommandContext:
    """Who asked, in which chat, on which channel: what a handler taking the keyword `context` is given."""

    sender_id: str
    sender_name: str
    chat: str
    channel: str
    is_owner: bool
    fetch: Fetch | None = None  # given only to a command granted `network`
    files: Files | None = None  # given only to a command granted `files`


class DeclarationError(ValueError):
    """An `@command` whose declaration cannot work (a bad name, an unknown type, a handler that is not async)."""


# Filled while one command module is executed (commands/loader.py empties it first and reads it after).
declared: list[CommandSpec] = []


def command(
    *, name: str, description: str, params: list[tuple[str, type, str, bool]] | None = None,
    capabilities: list[str] | None = None,
) -> Callable[[H], H]:
    """Declare the async handler below as the command `name`; the handler is returned unchanged."""

    def register(handler: H) -> H:
        import inspect

        checked: Any = handler  # looked at, not narrowed: the handler goes back as it came
        if not inspect.iscoroutinefunction(checked):
            raise DeclarationError(f"the handler of {name!r} must be an `async def`")
        if not name.isidentifier() or not name.islower():
            raise DeclarationError(f"the command name {name!r} must be a lowercase identifier")
        declared_params = tuple(Param(*p) for p in params or ())
        for param in declared_params:
            if param.type not in PARAM_TYPES:
                raise DeclarationError(f"parameter {param.name!r} of {name!r}: type must be str, int, float or bool")
        if unknown := sorted(set(capabilities or ()) - CAPABILITIES):
            raise DeclarationError(f"{name!r} asks for unknown capabilities {unknown}; there are `network` and `files`")
        takes_context = "context" in inspect.signature(checked).parameters
        granted = tuple(sorted(set(capabilities or ())))
        declared.append(CommandSpec(name, description, declared_params, checked, takes_context, granted))
        return handler

    return register
