"""A burst: many chats send one message each at the same instant; time until the last reply."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

from bench.harness import MIB, OWNER, RssSampler, TimedTelegram, collector_paused, tag, tag_of, wait_until
from tests.fakes.model_server import ModelServer

FIRST_CHAT = 5000


@dataclass
class Burst:
    """What one burst measured; times are seconds after the first message was sent."""

    chats: int
    answered: int
    makespan: float  # until the fake received the last reply
    first_request: float  # model server received the first / last tagged request
    last_request: float
    first_reply: float
    peak_rss_mib: float | None = None

    def phases(self) -> str:
        """Where the makespan went, for the report's notes."""
        return (
            f"model requests arrived +{self.first_request:.2f}…{self.last_request:.2f} s, "
            f"replies +{self.first_reply:.2f}…{self.makespan:.2f} s"
        )


async def warm_up(telegram: TimedTelegram, timeout: float = 60.0) -> float:
    """One owner message and its reply, so one-time set-up is not billed to what follows; returns its round trip."""
    expected = telegram.replies + 1
    message = telegram.user_sends(OWNER, "warm-up")
    await wait_until(lambda: telegram.replies >= expected, timeout, interval=0.01)
    seen = telegram.handed_out[(OWNER, int(message["message_id"]))]
    return min(ts for _, ts in telegram.send_calls() if ts >= seen) - seen


async def burst(
    telegram: TimedTelegram,
    models: ModelServer,
    chats: int,
    *,
    timeout: float,
    sample_pid: int | None = None,
    in_process: bool = False,
) -> Burst:
    """Send one tagged DM from each of `chats` chats at once and wait for every reply.

    `in_process`: the assistant runs in this process, so its garbage collection is part of what is measured.
    """
    expected = telegram.replies + chats
    sampler = RssSampler(sample_pid) if sample_pid is not None else nullcontext()
    with nullcontext() if in_process else collector_paused(), sampler:
        started = time.monotonic()
        for i in range(chats):
            telegram.user_sends(FIRST_CHAT + i, f"hello {tag(i)}")
        await wait_until(lambda: telegram.replies >= expected, timeout, interval=0.01)
    replies: dict[int, float] = {}
    for text, ts in telegram.send_calls():
        found = tag_of(text)
        if found is not None and ts >= started:
            replies.setdefault(found, ts - started)
    asked = [
        r.received_at - started
        for r in models.requests
        if r.received_at >= started and tag_of(r.last_user_text()) is not None
    ]
    return Burst(
        chats=chats,
        answered=len(replies),
        makespan=max(replies.values(), default=0.0),
        first_request=min(asked, default=0.0),
        last_request=max(asked, default=0.0),
        first_reply=min(replies.values(), default=0.0),
        peak_rss_mib=sampler.peak / MIB if isinstance(sampler, RssSampler) else None,
    )
