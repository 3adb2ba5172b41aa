"""`python -m bench [--quick] [--only NAME] [--mode MODE] [--json]`: run the scenarios and print their figures."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import get_args

from rich.console import Console

from bench.chambers import run_chambers
from bench.chaos import run_chaos
from bench.concurrency import run_concurrency
from bench.harness import pinned, shipped_mode
from bench.heavy import run_heavy
from bench.idle import run_idle
from bench.local import run_local
from bench.memory import run_memory
from bench.offline import run_both
from bench.overhead import cap_check_figures, run_overhead, run_overhead_subprocess
from bench.recall import run_recall
from bench.report import Figure, machine, print_report
from bench.scale import run_scale
from bench.scheduler import run_scheduler
from bench.startup import run_startup
from bench.tools import run_tools
from bench.voice import run_voice
from bicameral.config import Settings

MODEL_LATENCY = 1.0


@dataclass(frozen=True)
class Plan:
    """How much work each scenario does."""

    messages: int
    chats: int
    startup_runs: int
    idle_seconds: float = 60.0  # idle: how long the bot sits unused while its CPU is counted
    trivial_exchanges: int = 20  # chambers: "hey" exchanges per mode
    task_exchanges: int = 10  # chambers: one-tool-call requests per mode
    mode: str | None = None  # None: the shipped default
    recall_sizes: tuple[int, ...] = (300, 10_000, 100_000)  # recall: facts in the store
    stored_schedules: int = 10_000  # scheduler: schedules in the store at start-up
    tool_runs: int = 30  # tools: sandboxed `true` runs, and web_fetch calls on the local page
    tool_chats: int = 20  # tools: chats each running `sleep 1` at once
    scale_chats: int = 1000  # scale: chats at once against 1, 2 and 4 workers, and in the chaos run's waves


FULL = Plan(messages=200, chats=200, startup_runs=5)
QUICK = Plan(
    messages=50, chats=50, startup_runs=1, trivial_exchanges=6, task_exchanges=3, idle_seconds=10.0,
    recall_sizes=(300, 10_000), stored_schedules=2_000, tool_runs=10, scale_chats=100,
)

Scenario = Callable[[Plan], Awaitable[list[Figure]]]


async def _memory(plan: Plan) -> list[Figure]:
    return (await run_memory(plan.chats, MODEL_LATENCY, plan.mode)).figures()


async def _overhead(plan: Plan) -> list[Figure]:
    in_process = await run_overhead(plan.messages, plan.mode)
    child = await run_overhead_subprocess(plan.messages, plan.mode)
    return in_process.figures() + child.figures() + await cap_check_figures()


async def _concurrency(plan: Plan) -> list[Figure]:
    return (await run_concurrency(plan.chats, MODEL_LATENCY, plan.mode)).figures()


async def _startup(plan: Plan) -> list[Figure]:
    return (await run_startup(plan.startup_runs, plan.mode)).figures()


async def _local(plan: Plan) -> list[Figure]:
    return (await run_local()).figures()


async def _offline(plan: Plan) -> list[Figure]:
    # The rules alone on the labelled phrasings (no chat, no model): the mode does not apply.
    return [figure for result in run_both() for figure in result.figures()]


async def _idle(plan: Plan) -> list[Figure]:
    return (await run_idle(plan.idle_seconds, plan.mode)).figures()


async def _chambers(plan: Plan) -> list[Figure]:
    # Compares both modes by design, so --mode does not apply.
    return (await run_chambers(plan.trivial_exchanges, plan.task_exchanges)).figures()


async def _recall(plan: Plan) -> list[Figure]:
    # Retrieval only (no chat, no model): the mode does not apply.
    return (await run_recall(plan.recall_sizes)).figures()


async def _scheduler(plan: Plan) -> list[Figure]:
    # Reminders go out without a model; the mode does not apply.
    return (await run_scheduler(stored=plan.stored_schedules)).figures()


async def _tools(plan: Plan) -> list[Figure]:
    # The tools alone (no chat, no model): the mode does not apply.
    return (await run_tools(runs=plan.tool_runs, chats=plan.tool_chats, fetches=plan.tool_runs)).figures()


async def _heavy(plan: Plan) -> list[Figure]:
    # Single mode by design: the plain message is answered by one model call, so the load is what moves it.
    return (await run_heavy()).figures()


async def _voice(plan: Plan) -> list[Figure]:
    # The offline transcription child alone (no chat, no model): the mode does not apply; skipped where it is off.
    result = await run_voice()
    return result.figures() if result is not None else []


async def _scale(plan: Plan) -> list[Figure]:
    # Blocking by design (worker processes, a killer thread, PostgreSQL): it runs on a thread of its own.
    scaled = await asyncio.to_thread(run_scale, plan.scale_chats, MODEL_LATENCY, plan.mode)
    chaos = await asyncio.to_thread(run_chaos, plan.scale_chats, MODEL_LATENCY, plan.mode)
    if (alarm := chaos.alarming()) is not None:
        print(f"\n!!! {alarm}\n", file=sys.stderr)
    return scaled.figures() + chaos.figures()


# Memory runs first: its in-process figures should not include what later scenarios leave behind.
SCENARIOS: dict[str, Scenario] = {
    "memory": _memory,
    "overhead": _overhead,
    "concurrency": _concurrency,
    "startup": _startup,
    "idle": _idle,
    "chambers": _chambers,
    "local": _local,
    "offline": _offline,
    "recall": _recall,
    "scheduler": _scheduler,
    "tools": _tools,
    "heavy": _heavy,
    "voice": _voice,
    "scale": _scale,
}
# Minutes long and needs PostgreSQL: only with --only.
OPT_IN = frozenset({"scale"})


def _settings_lines(plan: Plan) -> list[str]:
    """What was measured, under which settings, for the report's header."""
    mode = plan.mode or shipped_mode()
    others = {k: v for k, v in pinned(plan.mode).items() if k != "mode"}
    cap = Settings.model_fields["max_concurrent_turns"].default
    return [
        f"counts: {plan.messages} sequential DMs (overhead), {plan.chats} chats at once (concurrency, memory), "
        f"{plan.startup_runs} start-up(s), {plan.scale_chats} chats (scale, only with --only scale)",
        f"mode: {mode}" + (" (the shipped default; --mode to change)" if mode == shipped_mode() else " (--mode)"),
        "settings: debounce_ms=0, telegram_poll_timeout=1, "
        + "".join(f"{k}={v} (typing pauses are pacing, not overhead), " for k, v in others.items())
        + f"max_concurrent_turns={cap} unless stated, the rest as shipped",
        f"models: front and back openai:bench on the fake OpenAI server (streaming); latency 0 s (overhead) "
        f"or {MODEL_LATENCY:g} s (concurrency, memory); access policy open for the multi-chat scenarios",
        "logging: INFO to the JSON log file in-process (no console); `bicameral run` defaults in the subprocess",
    ]


async def _run(names: list[str], plan: Plan, console: Console) -> tuple[list[Figure], list[str]]:
    """Run the scenarios in order; a crash is reported and the rest still run."""
    figures: list[Figure] = []
    failed: list[str] = []
    for name in names:
        started = time.monotonic()
        with console.status(f"running {name}…"):
            try:
                figures += await SCENARIOS[name](plan)
            except Exception:
                failed.append(name)
                console.print(f"[red]{name} failed:[/red]\n{traceback.format_exc()}")
        console.print(f"{name}: done in {time.monotonic() - started:.1f} s")
    return figures, failed


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print; exit status 0 unless a scenario crashed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), metavar="NAME",
                        help=f"run only this scenario (repeatable): {', '.join(SCENARIOS)}; "
                             f"{', '.join(sorted(OPT_IN))} only when named here")
    parser.add_argument("--mode", choices=get_args(Settings.model_fields["mode"].annotation),
                        help=f"which chamber set-up to measure (default: {shipped_mode()}, as shipped)")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as one JSON document on stdout (progress goes to stderr)")
    args = parser.parse_args(argv)
    plan = replace(QUICK if args.quick else FULL, mode=args.mode)
    names = [n for n in SCENARIOS if n in args.only] if args.only else [n for n in SCENARIOS if n not in OPT_IN]
    console = Console(stderr=args.json)
    if not console.is_terminal:
        console = Console(width=132, stderr=args.json)  # piped into a file or CI log: no need to wrap at 80
    header = [f"machine: {machine()}", *_settings_lines(plan)]
    for line in header:
        console.print(line, markup=False)
    started = time.monotonic()
    figures, failed = asyncio.run(_run(names, plan, console))
    if args.json:
        document = {"header": header, "scenarios": names, "failed": failed, "figures": [asdict(f) for f in figures]}
        print(json.dumps(document, ensure_ascii=False, indent=1))
    else:
        print_report(console, figures)
    console.print(f"total {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
