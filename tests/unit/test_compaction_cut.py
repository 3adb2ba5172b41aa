"""The compaction cut never separates a tool call from its result, whatever the transcript looks like."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bicameral.context.compaction import safe_cut
from bicameral.models.base import Message, TextBlock, ToolResultBlock, ToolUseBlock


def _transcript(shape: list[bool]) -> list[Message]:
    """A brief, then one step per entry: a tool call answered by its result (True) or a plain exchange (False)."""
    messages = [Message.user("the brief")]
    for n, tool in enumerate(shape):
        if tool:
            messages.append(Message(role="assistant", content=[ToolUseBlock(id=f"c{n}", name="t", input={})]))
            answered = [ToolResultBlock(tool_use_id=f"c{n}", content="ok"), TextBlock(text="note")]
            messages.append(Message(role="user", content=answered))
        else:
            messages.append(Message.assistant(f"answer {n}"))
            messages.append(Message.user(f"question {n}"))
    return messages


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(min_value=0, max_value=70), st.integers(0, 2))
def test_recent_turns_never_start_with_an_orphan_tool_result(shape, at_most, floor):
    messages = _transcript(shape)
    cut = safe_cut(messages, at_most, floor=floor)
    if cut is None:
        return
    assert floor < cut <= max(at_most, 0) and cut < len(messages)
    kept_calls = {b.id for m in messages[cut:] for b in m.content if isinstance(b, ToolUseBlock)}
    kept_results = {b.tool_use_id for m in messages[cut:] for b in m.content if isinstance(b, ToolResultBlock)}
    assert kept_results <= kept_calls
