"""`ask_user`: a question with a button per choice, answered by a press or in words; and `Questions`, where answers
arrive.

A question is stored (`store/questions.py`) before it is sent. Its buttons carry only `q:<token>:<index>`: a random
token per question and the choice's place, never user text. Only the people whose words caused the run may answer
(in a group, the asker; their answer needs no mention). A press or a typed answer is checked here, in `Questions`,
which sits between the gate and the console:

- the question is waiting in this process: its tool call gets the answer, the press or the message goes no further;
- the question is open but nothing waits for it (the process restarted, or the turn was stopped): the answer goes
  on as the person's message, reworded to name the question, and starts a turn like any message;
- anything else (forged or unknown data, another chat's message, someone else's press, a second press, a press after
  the deadline): the presser is told why in the press's answer, and nothing resumes.

Several workers may share one database while only one receives the chat's updates: the answer then arrives at
another process, which records it (nothing waits there). The waiting call looks at the store every `poll_seconds`
beside its future and takes the answer it finds there. No answer before the deadline resumes the tool call with
"no answer".
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field

from bicameral.events import AnswerPress, EditText, Inbound, SendText, person_key
from bicameral.store.messages import MessageStore
from bicameral.store.questions import Question, QuestionStore
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.types import Clock, Perform, sieved

log = logging.getLogger(__name__)

NO_ANSWER = "no answer"
MAX_CHOICES = 8
MAX_LABEL = 40
# What a presser is told when a press does nothing (answerCallbackQuery's toast).
UNKNOWN = "This button is not one of my open questions."
NOT_YOURS = "Only the person I asked can answer this."
ANSWERED = "This question was already answered."
CLOSED = "This question is closed."
PRESS_PREFIX = "q:"  # every question's button data: q:<token>:<index>
_DATA = re.compile(r"q:([A-Za-z0-9_-]{8,32}):(\d{1,2})")


class AskArgs(BaseModel):
    question: str = Field(min_length=1, max_length=1000, description="The question, as the person will read it.")
    choices: list[str] = Field(
        default_factory=list,
        max_length=MAX_CHOICES,
        description=(
            f"Up to {MAX_CHOICES} short answers (at most {MAX_LABEL} characters each), one button each; "
            "leave empty for a free answer. The person may always type an answer instead."
        ),
    )


@dataclasses.dataclass(frozen=True)
class Answer:
    text: str
    chosen: bool  # a choice (pressed, or typed as its number or label); False: the person's own words


class Questions:
    """Pending questions: `ask` waits for an answer; `take` (between the gate and the console) delivers them."""

    def __init__(
        self,
        store: QuestionStore,
        messages: MessageStore,
        perform: Perform,
        *,
        timeout: float,
        clock: Clock = time.time,
        poll_seconds: float = 1.0,
    ) -> None:
        if poll_seconds <= 0:
            raise ValueError(f"poll_seconds must be positive, not {poll_seconds}")
        self._store = store
        self._messages = messages
        self._perform = perform  # answers to presses, and the question's message closed
        self._timeout = timeout
        self._poll = poll_seconds  # how often a waiting call looks for an answer another process recorded
        self._clock = clock
        self._waiting: dict[str, asyncio.Future[Answer]] = {}
        self._started = clock()  # questions asked before this are an earlier process's

    async def ask(self, ctx: ToolContext, question: str, choices: tuple[str, ...]) -> ToolResult:
        askers = ctx.authority.people
        if not askers:
            return ToolResult.error("there is no one to ask here: this run was not started by a person")
        now = self._clock()
        earlier = self._earlier(ctx.chat, askers, question, choices, now)
        if earlier is not None and earlier.state == "answered" and earlier.answer is not None:
            # Answered after a restart, before the run that asked (run again) got here: the answer is its.
            self._store.taken(earlier.token)
            return _result(Answer(earlier.answer, chosen=earlier.answer in choices))
        token = earlier.token if earlier is not None else secrets.token_urlsafe(9)
        deadline = earlier.deadline if earlier is not None else now + self._timeout
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting[token] = answer
        try:
            if earlier is None:
                self._store.ask(token, ctx.chat, askers, question, choices, cause=ctx.message_ids, now=now, deadline=deadline)
                refused = await self._send(ctx, token, question, choices)
                if refused is not None:
                    return refused
            # else: the same question, asked before a restart, is still on screen: its buttons answer this call.
            got = await self._wait(token, answer, choices, deadline)
            if got is None and not self._store.close(token, "expired", self._clock()):
                # Answered in the very moment the time ran out (here or in another process): closing found it closed.
                got = answer.result() if answer.done() else self._answered(token, choices)
            if got is None:
                await self._closed(token, f"{question}\n\n({NO_ANSWER})")
                return ToolResult(NO_ANSWER)
            return _result(got)
        finally:
            # A cancelled call (a /stop, a shutdown) leaves the question open: an answer then arrives as a message.
            self._waiting.pop(token, None)

    async def _wait(
        self, token: str, answer: asyncio.Future[Answer], choices: tuple[str, ...], deadline: float
    ) -> Answer | None:
        """The answer: from this process's `take` at once, or recorded by another process's (seen within
        `poll_seconds`); None when the deadline comes first."""
        while (left := deadline - self._clock()) > 0:
            done, _ = await asyncio.wait({answer}, timeout=min(self._poll, left))
            if done:
                return answer.result()
            elsewhere = self._answered(token, choices)
            if elsewhere is not None:
                return elsewhere
        return None

    def _answered(self, token: str, choices: tuple[str, ...]) -> Answer | None:
        """The answer the store holds (another process took it, and closed the question's message), taken by this
        call so that no run asking the same again gets it too; None while it has none."""
        question = self._store.get(token)
        if question is None or question.state != "answered" or question.answer is None:
            return None
        self._store.taken(token)
        return Answer(question.answer, chosen=question.answer in choices)

    async def _send(self, ctx: ToolContext, token: str, question: str, choices: tuple[str, ...]) -> ToolResult | None:
        """Send the question with its buttons; an error result when the chat refused it."""
        buttons = tuple((label, f"q:{token}:{index}") for index, label in enumerate(choices))
        # A turn sends it as its own message. A task (it holds its files for its result) has no line to the chat
        # of its own: its question goes through the outbox here, the one message a task sends directly.
        send = self._perform if ctx.hold_files else ctx.perform
        sent = await send(SendText(chat=ctx.chat, text=question, audience=ctx.authority.people, buttons=buttons))
        if not sent.ok:
            self._store.close(token, "expired", self._clock())
            return ToolResult.error(f"the question could not be sent: {sent.error or 'unknown error'}")
        if sent.message_ids:
            self._store.sent(token, sent.message_ids[-1])
            ctx.sent_message_ids.extend(sent.message_ids)
        return None

    def _earlier(
        self, chat: str, askers: tuple[str, ...], question: str, choices: tuple[str, ...], now: float
    ) -> Question | None:
        """The same question asked by an earlier process (the run asking again after a restart), open or answered
        since, that nothing in this process waits for."""
        for earlier in self._store.asked_before(chat, self._started, now):
            if earlier.same(askers, question, choices) and earlier.token not in self._waiting:
                return earlier
        return None

    def awaits(self, inbound: Inbound) -> bool:
        """Whether this message answers an open question (so in a group it needs no mention)."""
        return self._open_for(inbound) is not None

    def _open_for(self, inbound: Inbound) -> Question | None:
        """The open question a person's new message answers, if any (never one the message itself made us ask)."""
        if not _typed(inbound):
            return None
        question = self._store.open_for(inbound.chat, person_key(inbound), self._clock())
        return None if question is None or inbound.message_id in question.cause else question

    async def take(self, inbound: Inbound) -> Inbound | None:
        """What goes on to the console: the message unchanged, an answer to a question nothing waits for any more
        (reworded to name the question), or None when it was consumed here (every press is)."""
        if inbound.kind == "press":
            # Other buttons (an approval, a cap) belong to whoever comes after; theirs start with another prefix.
            ours = inbound.press is not None and inbound.press.data.startswith(PRESS_PREFIX)
            return await self._pressed(inbound) if ours else inbound
        question = self._open_for(inbound)
        if question is None:
            return inbound
        answer = _typed_answer(inbound.text, question.choices)
        waiter = self._waiting.get(question.token)
        late = waiter is None or waiter.done()
        if not self._store.close(
            question.token, "answered", self._clock(), answer=answer.text, by=person_key(inbound), late=late
        ):
            return inbound
        if waiter is None or waiter.done():
            await self._closed(question.token, f"{question.question}\n\n→ {answer.text}")
            return self._as_message(inbound, question, answer.text)
        waiter.set_result(answer)
        self._messages.mark_consumed([inbound.row_id])  # it answered the question; it starts no turn
        await self._closed(question.token, f"{question.question}\n\n→ {answer.text}")
        return None

    def sieve(self, then: Callable[[Inbound], Awaitable[None]]) -> Callable[[Inbound], Awaitable[None]]:
        """`then`, with answers to questions taken out first."""
        return sieved(self.take, then)

    async def _pressed(self, inbound: Inbound) -> Inbound | None:
        refusal, question, label = self._check_press(inbound)
        if refusal is not None or question is None or label is None:
            self._messages.mark_consumed([inbound.row_id])
            log.info("press in %s refused: %s", inbound.chat, refusal)
            await self._answer_press(inbound, refusal or UNKNOWN)
            return None
        person = person_key(inbound)
        pressed = dataclasses.replace(inbound, kind="message", text=f"[pressed “{label}”]", press=None)
        waiter = self._waiting.get(question.token)
        late = waiter is None or waiter.done()
        if not self._store.close(question.token, "answered", self._clock(), answer=label, by=person, late=late):
            self._messages.mark_consumed([inbound.row_id])
            await self._answer_press(inbound, ANSWERED)
            return None
        await self._answer_press(inbound, f"✓ {label}")
        if waiter is None or waiter.done():
            # Nothing waits any more (a restart, a stopped turn): the answer goes on as the person's message.
            forward = self._as_message(pressed, question, label)
            await self._closed(question.token, f"{question.question}\n\n→ {label}")
            return forward
        waiter.set_result(Answer(label, chosen=True))
        self._messages.rewrite(inbound.row_id, pressed)  # the history shows what was pressed
        self._messages.mark_consumed([inbound.row_id])
        await self._closed(question.token, f"{question.question}\n\n→ {label}")
        return None

    def _check_press(self, inbound: Inbound) -> tuple[str | None, Question | None, str | None]:
        """(why the press does nothing, or None; the question; the chosen label)."""
        match = _DATA.fullmatch(inbound.press.data) if inbound.press is not None else None
        if match is None:
            return UNKNOWN, None, None
        question = self._store.get(match[1])
        index = int(match[2])
        if (
            question is None
            or question.chat != inbound.chat
            or (question.message_id is not None and question.message_id != inbound.message_id)
            or index >= len(question.choices)
        ):
            return UNKNOWN, None, None
        if person_key(inbound) not in question.askers:
            return NOT_YOURS, None, None
        if question.state == "answered":
            return ANSWERED, None, None
        if not question.is_open(self._clock()):
            self._store.close(question.token, "expired", self._clock())
            return CLOSED, None, None
        return None, question, question.choices[index]

    def _as_message(self, inbound: Inbound, question: Question, answer: str) -> Inbound:
        """An answer nothing waits for, as the person's message that names the question it answers."""
        text = f"(answering your question “{question.question}”) {answer}"
        message = dataclasses.replace(inbound, kind="message", text=text, press=None)
        self._messages.rewrite(inbound.row_id, message)
        return message

    async def _answer_press(self, inbound: Inbound, text: str) -> None:
        if inbound.press is not None:
            await self._perform(AnswerPress(chat=inbound.chat, press_id=inbound.press.id, text=text))

    async def _closed(self, token: str, text: str) -> None:
        """The question's message without its buttons, saying how it ended (its buttons answer CLOSED anyway)."""
        question = self._store.get(token)
        if question is None or question.message_id is None or not question.choices:
            return
        result = await self._perform(EditText(chat=question.chat, message_id=question.message_id, text=text))
        if not result.ok:
            log.info("could not close the question's message in %s: %s", question.chat, result.error)


class AskUser(Tool[AskArgs]):
    name = "ask_user"
    description = (
        "Ask the person you are working for a question and wait for the answer: one button per choice (they may also "
        "type an answer). Use it only when you cannot go on without their decision. Returns their answer, or "
        f"'{NO_ANSWER}' if they did not answer in time."
    )
    args_model = AskArgs
    waits_for_people = True  # its own deadline, not the registry's tool timeout

    def __init__(self, questions: Questions | None = None) -> None:
        self._questions = questions

    async def run(self, args: AskArgs, ctx: ToolContext) -> ToolResult:
        if self._questions is None:
            return ToolResult.error("asking is not available here")
        choices = tuple(dict.fromkeys(c.strip() for c in args.choices if c.strip()))
        if any(len(c) > MAX_LABEL for c in choices):
            return ToolResult.error(f"each choice must be at most {MAX_LABEL} characters")
        return await self._questions.ask(ctx, args.question.strip() or args.question, choices)


def _typed(inbound: Inbound) -> bool:
    """A person's new words that could answer a question (a command, an edit or a forward never does)."""
    return (
        inbound.kind == "message"
        and bool(inbound.text.strip())
        and not inbound.text.startswith("/")
        and "forwarded" not in inbound.flags
    )


def _typed_answer(text: str, choices: tuple[str, ...]) -> Answer:
    """A typed answer: a choice's number or label counts as that choice, anything else as the person's own words."""
    words = text.strip()
    if words.isdigit() and 1 <= int(words) <= len(choices):
        return Answer(choices[int(words) - 1], chosen=True)
    for choice in choices:
        if words.casefold() == choice.casefold():
            return Answer(choice, chosen=True)
    return Answer(words, chosen=False)


def _result(answer: Answer) -> ToolResult:
    if answer.chosen:
        return ToolResult(f"The user chose: {answer.text}")
    return ToolResult(f"The user answered: {answer.text}")
