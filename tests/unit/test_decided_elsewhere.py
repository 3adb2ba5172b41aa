"""A question answered, or an approval decided, in another process over the same database (several workers, one of
them receiving the chat's updates): the call waiting in this process gets the answer or decision from the store
long before its deadline, takes it (a rerun does not get it again), and leaves the closing edit to the process that
took it. An answer recorded in the very moment of the deadline is the call's answer, not "no answer"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bicameral.events import Authority, EditText, Inbound, Press, Role, Sender, SendText
from bicameral.store import Stores
from bicameral.store.approvals import ApprovalStore
from bicameral.store.questions import QuestionStore
from bicameral.tools.approvals import DENIED, Approvals, AskBefore
from bicameral.tools.ask import Questions
from bicameral.tools.base import ToolContext, ToolResult
from tests.unit.test_approvals_store import Channel as RecordingChannel
from tests.unit.test_approvals_store import Note, NoteArgs

OWNER = 1001
CHAT = f"telegram:{OWNER}"
START = 1000.0
TIMEOUT = 600.0  # the injected clocks never get near it unless a test moves them there
POLL = 0.01  # how often the waiting process looks at the store


class Channel(RecordingChannel):
    """One process's outbound side: every action succeeds, each text gets the next message id."""

    async def until_sent(self) -> SendText:
        while not self.texts():
            self._more.clear()
            await asyncio.wait_for(self._more.wait(), timeout=10)
        return self.texts()[0]

    def texts(self) -> list[SendText]:
        return [a for a in self.sent if isinstance(a, SendText)]

    def edits(self) -> list[EditText]:
        return [a for a in self.sent if isinstance(a, EditText)]


class Process:
    """One worker: its own connection to the shared database, its own clock and outbound side."""

    def __init__(self, location: Path | str, data_dir: Path) -> None:
        self.stores = Stores.open(location, data_dir=data_dir)
        self.clock = [START]
        self.channel = Channel()
        self.questions = Questions(
            QuestionStore(self.stores.db), self.stores.messages, self.channel.perform,
            timeout=TIMEOUT, clock=lambda: self.clock[0], poll_seconds=POLL,
        )
        self.approvals = Approvals(
            ApprovalStore(self.stores.db), self.stores.messages, self.channel.perform, owner_id=OWNER,
            ask_before=AskBefore(["note"]), timeout=TIMEOUT, redact=self.stores.redact,
            clock=lambda: self.clock[0], poll_seconds=POLL,
        )

    def ctx(self) -> ToolContext:
        return ToolContext(chat=CHAT, turn_id="t", data_dir=Path("/nonexistent"), perform=self.channel.perform,
                           authority=Authority.of(Role.OWNER, [CHAT]))


@pytest.fixture
def processes(tmp_path, database_location):
    """Worker A (receives the owner's press or words) and worker B (runs the turn that waits), one database."""
    a, b = Process(database_location, tmp_path), Process(database_location, tmp_path)
    yield a, b
    a.stores.close()
    b.stores.close()


def _press(message_id: str, data: str) -> Inbound:
    return Inbound(
        channel="telegram", chat=CHAT, message_id=message_id, sender=Sender(id=str(OWNER), name="Owner"), text="",
        ts=0.0, kind="press", press=Press(id="p1", data=data),
    )


def _typed(text: str) -> Inbound:
    return Inbound(
        channel="telegram", chat=CHAT, message_id="typed-1", sender=Sender(id=str(OWNER), name="Owner"), text=text,
        ts=0.0,
    )


def _token(data: str) -> str:
    return data.split(":")[1]


async def _finished(task: asyncio.Task[Any]) -> Any:
    """The task's result; the wait only guards against a hang (B's clock never reaches the deadline)."""
    return await asyncio.wait_for(task, timeout=30)


async def test_a_question_answered_by_a_press_at_another_process(processes):
    a, b = processes
    asking = asyncio.create_task(b.questions.ask(b.ctx(), "Which one?", ("red", "blue")))
    sent = await b.channel.until_sent()
    blue = dict(sent.buttons)["blue"]
    forwarded = await a.questions.take(_press(str(len(b.channel.sent)), blue))
    assert forwarded is not None and "blue" in forwarded.text  # nothing waits at A: it forwards, as before
    result = await _finished(asking)
    assert result.content == "The user chose: blue"
    assert b.clock[0] < START + TIMEOUT, "answered long before the deadline"
    question = QuestionStore(b.stores.db).get(_token(blue))
    assert question is not None and question.state == "answered" and not question.late, "taken by the waiting call"
    assert len(a.channel.edits()) == 1 and b.channel.edits() == [], "the question's message closed once, by A"


async def test_a_question_answered_in_words_at_another_process(processes):
    a, b = processes
    asking = asyncio.create_task(b.questions.ask(b.ctx(), "Which one?", ("red", "blue")))
    await b.channel.until_sent()
    assert await a.questions.take(_typed("green, actually")) is not None
    result = await _finished(asking)
    assert result.content == "The user answered: green, actually"
    assert b.clock[0] < START + TIMEOUT


async def test_a_question_answered_in_the_moment_of_its_deadline_gets_the_answer(processes):
    a, b = processes
    asking = asyncio.create_task(b.questions.ask(b.ctx(), "Which one?", ("red", "blue")))
    sent = await b.channel.until_sent()
    red = dict(sent.buttons)["red"]
    # A records the press and B's time runs out before B looks again (nothing yields in between): B's closing it
    # as expired finds it answered, and the answer is the call's, not "no answer" (nor an unfinished future's).
    await a.questions.take(_press(str(len(b.channel.sent)), red))
    b.clock[0] = START + TIMEOUT
    result = await _finished(asking)
    assert result.content == "The user chose: red"
    question = QuestionStore(b.stores.db).get(_token(red))
    assert question is not None and question.state == "answered" and not question.late
    assert b.channel.edits() == []


async def test_an_unanswered_question_still_ends_at_its_deadline(processes):
    _, b = processes
    asking = asyncio.create_task(b.questions.ask(b.ctx(), "Which one?", ("red", "blue")))
    await b.channel.until_sent()
    b.clock[0] = START + TIMEOUT
    result = await _finished(asking)
    assert result.content == "no answer"
    assert len(b.channel.edits()) == 1


async def test_the_local_answer_wins_at_once_however_rarely_the_store_is_read(tmp_path, database_location):
    stores = Stores.open(database_location, data_dir=tmp_path)
    channel = Channel()
    questions = Questions(
        QuestionStore(stores.db), stores.messages, channel.perform, timeout=TIMEOUT, clock=lambda: START,
        poll_seconds=3600,
    )
    ctx = ToolContext(chat=CHAT, turn_id="t", data_dir=Path("/nonexistent"), perform=channel.perform,
                      authority=Authority.of(Role.OWNER, [CHAT]))
    asking = asyncio.create_task(questions.ask(ctx, "Which one?", ("red", "blue")))
    sent = await channel.until_sent()
    assert await questions.take(_press("1", dict(sent.buttons)["red"])) is None
    assert (await _finished(asking)).content == "The user chose: red"
    stores.close()


def test_the_poll_must_be_positive(tmp_path):
    stores = Stores.open(tmp_path / "db.sqlite", data_dir=tmp_path)
    channel = Channel()
    with pytest.raises(ValueError, match="poll_seconds"):
        Questions(QuestionStore(stores.db), stores.messages, channel.perform, timeout=1, poll_seconds=0)
    stores.close()


async def _check(process: Process, args: dict[str, Any]) -> ToolResult | None:
    return await process.approvals.check(Note(), NoteArgs(**args), args, process.ctx())


@pytest.mark.parametrize("button", ["Approve", "Deny"])
async def test_an_approval_decided_at_another_process(processes, button):
    a, b = processes
    checking = asyncio.create_task(_check(b, {"text": "x"}))
    sent = await b.channel.until_sent()
    data = dict(sent.buttons)[button]
    assert await a.approvals.take(_press(str(len(b.channel.sent)), data)) is None
    outcome = await _finished(checking)
    if button == "Approve":
        assert outcome is None, "approved: the call runs"
    else:
        assert outcome is not None and outcome.content == DENIED
    assert b.clock[0] < START + TIMEOUT, "decided long before the deadline"
    approval = ApprovalStore(b.stores.db).get(_token(data))
    assert approval is not None and approval.state == ("approved" if button == "Approve" else "denied")
    assert not approval.late, "taken: a rerun asking for the same call does not take it again"
    assert len(a.channel.edits()) == 1 and b.channel.edits() == [], "the asking message closed once, by A"
