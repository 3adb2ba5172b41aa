"""The tool registry: discovers every Tool under `bicameral.tools`, validates, runs and audits calls."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import pkgutil
import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from bicameral.failures import failure_detail
from bicameral.models.base import ToolSpec
from bicameral.observe import transcript
from bicameral.store.tool_calls import ToolCallStore
from bicameral.text import NestedTooDeep, normalize_data
from bicameral.tools.base import Approver, Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)
_NOT_TOOL_MODULES = {"base", "registry"}
_MAX_RESULT_CHARS = 20000
# Arguments nested deeper than this are refused, not walked: no tool's arguments go past three levels.
_MAX_DEPTH = 16


def discover_tools(package: str = "bicameral.tools") -> list[Tool[Any]]:
    """Instantiate every concrete Tool subclass defined in the package's modules, sorted by name."""
    root = importlib.import_module(package)
    found: dict[str, Tool[Any]] = {}
    for info in pkgutil.iter_modules(root.__path__):
        if info.name in _NOT_TOOL_MODULES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Tool) and cls is not Tool and cls.__module__ == module.__name__ and cls.name:
                if cls.name in found:
                    raise RuntimeError(f"two tools are named {cls.name!r}")
                found[cls.name] = cls()
    return [found[name] for name in sorted(found)]


class ToolRegistry:
    """The one place tools run (the native runner, the MCP server and sub-agents all call `execute`) and are gated."""

    def __init__(
        self,
        tools: Iterable[Tool[Any]],
        *,
        audit: ToolCallStore | None = None,
        disabled: Iterable[str] = (),
        timeout: float = 120.0,
        approver: Approver | None = None,
        dynamic: Callable[[], Iterable[Tool[Any]]] | None = None,
    ) -> None:
        tools = list(tools)
        # Tools that come and go while running (the owner's commands, `cmd_<name>`): asked for on every offer and call.
        self._dynamic = dynamic
        names = {t.name for t in tools}
        unknown = sorted(set(disabled) - names)
        if unknown:
            raise ValueError(f"cannot disable unknown tools {unknown}; available: {sorted(names)}")
        self._tools = {t.name: t for t in tools if t.name not in set(disabled)}
        self._audit = audit
        self._timeout = timeout
        # Asked before every call whether the owner must approve it first (tools/approvals.py); None: never.
        self.approver = approver
        self._specs = [
            ToolSpec(name=t.name, description=t.description, input_schema=t.json_schema()) for t in self._tools.values()
        ]

    @classmethod
    def discover(cls, **kwargs: Any) -> ToolRegistry:
        return cls(discover_tools(), **kwargs)

    async def aclose(self) -> None:
        """Let every tool release what it keeps (at shutdown); one that fails to is logged, the rest still close."""
        for tool in self._tools.values():
            try:
                await tool.aclose()
            except Exception:
                log.exception("tool %s did not close cleanly", tool.name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool[Any] | None:
        found = self._tools.get(name)
        if found is None and self._dynamic is not None:
            found = next((t for t in self._dynamic() if t.name == name), None)
        return found

    def subset(
        self, *, exclude_messaging: bool = False, only: Iterable[str] | None = None, exclude: Iterable[str] = ()
    ) -> ToolRegistry:
        """A restricted view sharing the same audit (for the back chamber and sub-agents): `only` these names, never
        those in `exclude`; the tools that come and go are filtered the same way on every offer."""
        keep = set(only) if only is not None else set(self._tools)
        drop = set(exclude)
        tools = [
            t for n, t in self._tools.items() if n in keep and n not in drop and not (exclude_messaging and t.messaging)
        ]
        dynamic, source = self._dynamic, self._dynamic
        if source is not None and (only is not None or drop):
            named = keep if only is not None else None
            dynamic = lambda: [t for t in source() if (named is None or t.name in named) and t.name not in drop]  # noqa: E731
        return ToolRegistry(tools, audit=self._audit, timeout=self._timeout, approver=self.approver, dynamic=dynamic)

    def specs(self, *, is_owner: bool = False) -> list[ToolSpec]:
        """The tools to offer a turn: owner-only ones only when the owner is asking."""
        offered = [spec for spec in self._specs if is_owner or not self._tools[spec.name].owner_only]
        for tool in self._dynamic() if self._dynamic is not None else ():
            if tool.name not in self._tools and (is_owner or not tool.owner_only):
                offered.append(ToolSpec(name=tool.name, description=tool.description, input_schema=tool.json_schema()))
        return offered

    async def execute(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Validate, run (with a timeout) and audit one call; failures come back as error results."""
        started = time.monotonic()
        # A model's arguments are as untrusted as what a user types (a fetched page can steer the model): a NUL
        # in a memory file, a bidi override in a file name, a lone surrogate no store can encode stop here, before
        # the transcript, the tool or the audit reads them. As data: no NFKC, CR kept (see `normalize_data`).
        try:
            raw_args = normalize_data(raw_args, max_depth=_MAX_DEPTH)
            refused = None
        except NestedTooDeep:
            raw_args = {}
            refused = ToolResult.error(f"arguments for {name} are nested more than {_MAX_DEPTH} levels deep; no tool takes that")
        transcript.tool_call(ctx.chat, name, raw_args)
        result = refused or await self._run(name, raw_args, ctx)
        duration_ms = (time.monotonic() - started) * 1000
        if len(result.content) > _MAX_RESULT_CHARS:
            result = ToolResult(result.content[:_MAX_RESULT_CHARS] + "\n[truncated]", result.is_error)
        if result.is_error:
            transcript.tool_error(ctx.chat, name, result.content, duration_ms)
        else:
            transcript.tool_ok(ctx.chat, name, result.content, duration_ms)
        if self._audit is not None:
            self._audit.record(
                chat=ctx.chat,
                turn_id=ctx.turn_id,
                name=name,
                args=raw_args,
                result=None if result.is_error else result.content,
                error=result.content if result.is_error else None,
                duration_ms=duration_ms,
            )
        return result

    async def _run(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        tool = self.get(name)
        if tool is not None and tool.owner_only and not ctx.is_owner:
            log.warning("refused owner-only tool %s in %s", name, ctx.chat)
            return ToolResult.error(f"{name} is only for the owner; it is not available in this chat")
        if tool is None:
            available = ", ".join(spec.name for spec in self.specs(is_owner=ctx.is_owner))
            return ToolResult.error(f"unknown tool {name!r}; available tools: {available}")
        if not isinstance(raw_args, dict) or "_raw" in raw_args:
            return ToolResult.error(f"arguments for {name} were not a JSON object: {str(raw_args)[:200]}")
        try:
            args = tool.args_model.model_validate(raw_args)
        except ValidationError as exc:
            return ToolResult.error(f"invalid arguments for {name}: {_brief(exc)}")
        if self.approver is not None:
            # The owner's ask_before list, or a run that read untrusted content calling a tool that acts outside:
            # nothing runs until the owner approves (the wait is not cut short by the tool timeout).
            denied = await self.approver.check(tool, args, raw_args, ctx)
            if denied is not None:
                return denied
        if tool.untrusted_results and ctx.tainted_by is None:
            ctx.tainted_by = f"untrusted content ({name})"
        try:
            return await asyncio.wait_for(tool.run(args, ctx), timeout=None if tool.waits_for_people else self._timeout)
        except TimeoutError:
            return ToolResult.error(f"{name} timed out after {self._timeout:.0f}s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken tool must not break the turn
            # The model may quote a tool's error to the user: it gets a plain account, the log the evidence.
            log.error("tool %s raised: %s", name, failure_detail(exc))
            return ToolResult.error(f"{name} failed unexpectedly (an internal error; the owner can find it in the log)")


def _brief(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts) or json.dumps(exc.errors(), default=str)[:300]
