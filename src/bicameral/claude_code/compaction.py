"""A CLI session past its token budget: durable facts flushed to memory through our tools, then the CLI's `/compact`."""

from __future__ import annotations

import logging
from dataclasses import replace

from bicameral.claude_code.exchange import Prompt
from bicameral.claude_code.spec import MCP_NAMESPACE
from bicameral.claude_code.worker import ClaudeCodeWorker
from bicameral.events import Action, ActionResult
from bicameral.tools.base import ToolContext

log = logging.getLogger(__name__)

FLUSH = (
    "<system>This conversation is about to be summarised and its older turns dropped. First, call "
    f"{MCP_NAMESPACE}__remember once for each durable fact the user told you here that you have not remembered yet "
    "(preferences, names, relationships, dates, places, decisions, standing plans); skip small talk and anything "
    "already remembered. Do not message the user. Then answer with the single word: done.</system>"
)
# The CLI's own compaction keeps the session (its id and resume) and replaces older turns with a summary.
COMPACT = (
    "/compact Keep open requests and promises, decisions, results so far, names, numbers, files and links, "
    "and the user's stated preferences."
)


async def _silent(action: Action) -> ActionResult:
    # The flush is housekeeping: nothing it does may reach the chat.
    return ActionResult.failed("this is a memory flush: nothing is sent to the user now")


async def compact_if_full(worker: ClaudeCodeWorker, ctx: ToolContext, context_tokens: int, budget_tokens: int) -> bool:
    """Past the budget: a flush turn (remember what matters), then `/compact`; True when the session was compacted."""
    if budget_tokens <= 0 or context_tokens <= budget_tokens:
        return False
    log.info("%s: the CLI session holds %d tokens (budget %d); flushing facts, then compacting",
             worker.name, context_tokens, budget_tokens)
    quiet = replace(ctx, perform=_silent, sent_message_ids=[])
    flushed = await worker.run_turn(Prompt(FLUSH), quiet)
    if flushed.failure is not None:
        log.warning("%s: the memory flush failed (%s); not compacting now", worker.name, flushed.failure.kind)
        return False
    compacted = await worker.run_turn(Prompt(COMPACT), quiet)
    if compacted.failure is not None:
        log.warning("%s: /compact failed (%s)", worker.name, compacted.failure.kind)
        return False
    log.info("%s: compacted the CLI session", worker.name)
    return True
