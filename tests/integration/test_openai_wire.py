"""What OpenAIModel puts on the wire: the key as a bearer token and the request body exactly as built."""

from __future__ import annotations

from pathlib import Path

from bicameral.models.base import Message, ToolSpec, complete
from bicameral.models.openai import OpenAIModel, build_request
from tests.fakes.model_server import ModelServer, Reply

API_KEY = "sk-test-wire-0123456789"
CLOCK = ToolSpec(name="clock", description="The time", input_schema={"type": "object", "properties": {}})


async def test_the_request_carries_the_key_and_the_built_body(tmp_path: Path) -> None:
    with ModelServer() as server:
        server.responder(lambda req: Reply(text="hi"))
        model = OpenAIModel(
            "gpt-test", api_key=API_KEY, base_url=server.openai_url, max_retries=0, timeout=30, data_dir=tmp_path
        )
        history = [Message.user("hello"), Message.assistant("hey"), Message.user("the time?")]
        try:
            result = await complete(model, "Be brief.", history, [CLOCK], 50)
        finally:
            await model.aclose()
        (request,) = server.requests
    assert result.text == "hi"
    assert request.headers.get("Authorization") == f"Bearer {API_KEY}"
    expected = build_request("Be brief.", history, [CLOCK], tmp_path)
    assert request.raw["messages"] == expected["messages"] and request.raw["tools"] == expected["tools"]
    assert request.raw["model"] == "gpt-test" and request.raw["stream"] is True
    assert request.raw["stream_options"] == {"include_usage": True} and request.raw["max_tokens"] == 50
