"""Calling a command: its arguments parsed by the declared types, run in its child process, failures as sentences."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from bicameral.commands import PARAM_TYPES, CommandContext, CommandSpec, Fetch, FilesFor, Param
from bicameral.commands.process import ChildFailed, ChildTimedOut, Confinement, ask
from bicameral.failures import owner_command_failed, owner_command_timed_out

log = logging.getLogger(__name__)
_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}
MAX_ANSWER_CHARS = 4000


class BadArguments(ValueError):
    """What was typed does not fit the declared parameters; the message is the usage line."""


def usage(spec: CommandSpec) -> str:
    """`/shout <text> [times]` and what each parameter is for."""
    words = [f"<{p.name}>" if p.required else f"[{p.name}]" for p in spec.params]
    lines = [" ".join([f"/{spec.name}", *words])]
    lines += [f"{p.name} ({p.type.__name__}): {p.description}" for p in spec.params]
    return "\n".join(lines)


def parse_typed(spec: CommandSpec, text: str) -> dict[str, Any]:
    """The words after `/name`, split like a shell does, one per parameter in order; the last str takes the rest."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise BadArguments(f"{exc}.\nUsage: {usage(spec)}") from exc
    params = spec.params
    if len(words) > len(params) and params and params[-1].type is str:
        words = [*words[: len(params) - 1], " ".join(words[len(params) - 1 :])]
    if len(words) > len(params):
        raise BadArguments(f"too many arguments.\nUsage: {usage(spec)}")
    missing = [p.name for p in params[len(words) :] if p.required]
    if missing:
        raise BadArguments(f"missing {', '.join(missing)}.\nUsage: {usage(spec)}")
    return {p.name: _convert(p, word, spec) for p, word in zip(params, words, strict=False)}


def check_arguments(spec: CommandSpec, given: dict[str, Any]) -> dict[str, Any]:
    """A model's arguments (JSON) checked against the declared types; unknown names refused."""
    known = {p.name: p for p in spec.params}
    if unknown := sorted(set(given) - set(known)):
        raise BadArguments(f"unknown argument(s) {', '.join(unknown)}.\nUsage: {usage(spec)}")
    missing = [p.name for p in spec.params if p.required and p.name not in given]
    if missing:
        raise BadArguments(f"missing {', '.join(missing)}.\nUsage: {usage(spec)}")
    out: dict[str, Any] = {}
    for name, value in given.items():
        param = known[name]
        ok = isinstance(value, param.type) and not (param.type is int and isinstance(value, bool))
        if param.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            value = _convert(param, str(value), spec)
        out[name] = value
    return out


def _convert(param: Param, word: str, spec: CommandSpec) -> Any:
    try:
        if param.type is bool:
            if word.lower() in _TRUE | _FALSE:
                return word.lower() in _TRUE
            raise ValueError(word)
        return param.type(word)
    except ValueError:
        kind = PARAM_TYPES[param.type]
        raise BadArguments(f"{param.name} must be a {kind}, not {word!r}.\nUsage: {usage(spec)}") from None


def schema(spec: CommandSpec) -> dict[str, Any]:
    """The JSON Schema a model is shown for the command's parameters."""
    return {
        "type": "object",
        "properties": {p.name: {"type": PARAM_TYPES[p.type], "description": p.description} for p in spec.params},
        "required": [p.name for p in spec.params if p.required],
        "additionalProperties": False,
    }


async def call(
    spec: CommandSpec, arguments: dict[str, Any], context: CommandContext, *, timeout: float, fetch: Fetch | None = None,
    confinement: Confinement | None = None, files: FilesFor | None = None,
) -> tuple[str, bool]:
    """Run the command in a child process of its own under `timeout`: (its answer as text, True) or (a sentence saying
    it failed, False). A command granted `network` may ask for pages; `fetch` gets them here. One granted `files` may
    read and write the asking chat's workspace, and only that one: `files(context.chat)`."""
    who = {"sender_id": context.sender_id, "sender_name": context.sender_name, "chat": context.chat,
           "channel": context.channel, "is_owner": context.is_owner}
    granted = fetch if "network" in spec.capabilities else None
    workspace = files(context.chat) if files is not None and "files" in spec.capabilities else None
    try:
        answer = await ask(Path(spec.path), {"mode": "call", "arguments": arguments, "context": who},
                           timeout=timeout, fetch=granted, files=workspace, confinement=confinement)
    except ChildTimedOut:
        log.warning("command /%s in %s ran past %g s and was stopped", spec.name, context.chat, timeout)
        return owner_command_timed_out(spec.name, timeout), False
    except ChildFailed as exc:
        log.error("command /%s in %s failed: %s", spec.name, context.chat, exc)
        return owner_command_failed(spec.name), False
    if "error" in answer or "result" not in answer:
        log.error("command /%s in %s raised: %s", spec.name, context.chat, str(answer.get("error"))[:2000])
        return owner_command_failed(spec.name), False
    text = "" if answer["result"] is None else str(answer["result"])
    if len(text) > MAX_ANSWER_CHARS:
        text = text[:MAX_ANSWER_CHARS] + "…"
    return text or "Done.", True
