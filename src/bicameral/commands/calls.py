"""Calling a command: its arguments parsed from what was typed by the declared types, a time limit, failures as sentences."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import threading
from dataclasses import replace
from typing import Any

from bicameral.commands import PARAM_TYPES, CommandContext, CommandSpec, Fetch, Param
from bicameral.failures import failure_detail, owner_command_failed, owner_command_timed_out

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
    spec: CommandSpec, arguments: dict[str, Any], context: CommandContext, *, timeout: float, fetch: Fetch | None = None
) -> tuple[str, bool]:
    """Run the handler under `timeout`: (its answer as text, True) or (a sentence saying it failed, False). A command
    granted `network` gets `fetch` in its context, run on this loop (the handler's own loop only waits for it)."""
    kwargs = dict(arguments)
    if "network" in spec.capabilities and fetch is not None:
        context = replace(context, fetch=_bridge(fetch, asyncio.get_running_loop()))
    if spec.takes_context:
        kwargs["context"] = context
    try:
        answer = await asyncio.wait_for(_in_thread(spec, kwargs), timeout)
    except TimeoutError:
        log.warning("command /%s in %s ran past %.0f s and was stopped", spec.name, context.chat, timeout)
        return owner_command_timed_out(spec.name, timeout), False
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the owner's code must not take a turn, or the process, down
        log.error("command /%s in %s raised: %s", spec.name, context.chat, failure_detail(exc))
        return owner_command_failed(spec.name), False
    text = "" if answer is None else str(answer)
    if len(text) > MAX_ANSWER_CHARS:
        text = text[:MAX_ANSWER_CHARS] + "…"
    return text or "Done.", True


def _in_thread(spec: CommandSpec, kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run the handler on a loop of its own in a daemon thread: one that never yields (a `while True` with no await)
    then holds only that thread, and the time limit still answers here."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return  # given up on at its time limit
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result: Any = asyncio.run(spec.handler(**kwargs))
            error: BaseException | None = None
        except Exception as exc:  # handed to the caller's loop, which words it
            result, error = None, exc
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: never let them reach the caller's loop as such
            result, error = None, RuntimeError(f"the command raised {type(exc).__name__}")
        with contextlib.suppress(RuntimeError):  # that loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=f"command:{spec.name}", daemon=True).start()
    return done


def _bridge(fetch: Fetch, loop: asyncio.AbstractEventLoop) -> Fetch:
    """`fetch` callable from the handler's loop: the request runs on `loop`, where the fetcher and its client live."""

    async def bridged(url: str) -> str:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fetch(url), loop))

    return bridged
