"""Run as `python -I -m bicameral.commands.child` with no environment: loads one command file, then describes or calls
it, speaking JSON lines (a request in on stdin; `fetch` and `files` asks and the answer out on the saved stdout)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from typing import IO, Any

import bicameral.commands as declaring
from bicameral.commands import CommandContext, CommandSpec

_OUT: IO[str] = sys.stdout
_ASKING = asyncio.Lock()  # one question at a time: each answer on stdin belongs to the question before it


def _send(message: dict[str, Any]) -> None:
    _OUT.write(json.dumps(message, ensure_ascii=False) + "\n")
    _OUT.flush()


async def _ask(question: dict[str, Any]) -> Any:
    """Ask the assistant (a fetch, a file) and wait for its answer on stdin; its refusal raises ValueError."""
    async with _ASKING:
        _send(question)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    answer = json.loads(line or "{}")
    if "error" in answer or "text" not in answer:
        raise ValueError(answer.get("error", "no answer from the assistant"))
    return answer["text"]


def _load(path: str, module_name: str) -> list[CommandSpec]:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(declaring.declared)


def _describe(spec: CommandSpec) -> dict[str, Any]:
    params = [[p.name, p.type.__name__, p.description, p.required] for p in spec.params]
    return {"name": spec.name, "description": spec.description, "params": params,
            "capabilities": list(spec.capabilities), "takes_context": spec.takes_context}


async def _fetch(url: str) -> str:
    """`context.fetch`: asked of the assistant, which fetches under web_fetch's rules and answers on stdin."""
    return str(await _ask({"fetch": url}))


class _Files:
    """`context.files`: asked of the assistant, which reads and writes the chat's workspace under the file tools' rules."""

    async def read(self, path: str) -> str:
        return str(await _ask({"files": {"op": "read", "path": path}}))

    async def write(self, path: str, text: str) -> None:
        await _ask({"files": {"op": "write", "path": path, "text": text}})

    async def list(self, path: str = ".") -> list[str]:
        return [str(name) for name in await _ask({"files": {"op": "list", "path": path}})]


async def _call(spec: CommandSpec, request: dict[str, Any]) -> Any:
    kwargs = dict(request["arguments"])
    if spec.takes_context:
        fetch = "network" in spec.capabilities and request.get("fetch", False)
        files = "files" in spec.capabilities and request.get("files", False)
        kwargs["context"] = CommandContext(
            **request["context"], fetch=_fetch if fetch else None, files=_Files() if files else None
        )
    assert spec.handler is not None
    return await spec.handler(**kwargs)


def main() -> None:
    global _OUT
    _OUT, sys.stdout = sys.stdout, sys.stderr  # what the command prints never mixes with the answers
    request = json.loads(sys.stdin.readline())
    try:
        found = _load(request["path"], request["module"])
        if request["mode"] == "describe":
            _send({"declared": [_describe(s) for s in found]})
            return
        result = asyncio.run(_call(found[0], request))
        _send({"result": None if result is None else str(result)})
    except BaseException as exc:  # the parent words it; nothing here outlives this process
        _send({"error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
