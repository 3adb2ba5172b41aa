"""A completion request's body: the tool set's JSON is encoded once and spliced in, the body is the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bicameral.models import anthropic, openai
from bicameral.models.base import Message, TextBlock, ToolSpec
from bicameral.models.remote import RemoteModel

CLOCK = ToolSpec("clock", "The time now.", {"type": "object", "properties": {}})
NOTE = ToolSpec("note", "Keep a note: “quoted”, ünïcode.", {"type": "object", "properties": {"text": {"type": "string"}}})
HISTORY = [Message(role="user", content=[TextBlock(text="what time is it? \"now\" ✓")])]


@pytest.fixture(params=["openai", "anthropic"])
def model(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteModel:
    kind = {"openai": openai.OpenAIModel, "anthropic": anthropic.AnthropicModel}[request.param]
    return kind("m", api_key="k", base_url=None, max_retries=0, timeout=5, data_dir=tmp_path)


def _expected(model: RemoteModel, tools: list[ToolSpec], tmp_path: Path) -> dict:
    builder = openai.build_request if isinstance(model, openai.OpenAIModel) else anthropic.build_request
    params = builder("Be brief.", HISTORY, tools, tmp_path)
    return {**json.loads(model.encode_body("Be brief.", HISTORY, [], 300)), "tools": params["tools"]}


def test_the_spliced_body_is_the_request_the_provider_expects(model: RemoteModel, tmp_path: Path) -> None:
    sent = json.loads(model.encode_body("Be brief.", HISTORY, [CLOCK, NOTE], 300))
    assert sent == _expected(model, [CLOCK, NOTE], tmp_path)
    assert sent["messages"][-1]["content"]  # the call's own part is all there too


def test_without_tools_the_body_has_no_tools_field(model: RemoteModel) -> None:
    assert "tools" not in json.loads(model.encode_body("Be brief.", HISTORY, [], 300))


def test_a_tool_set_is_encoded_once_and_a_new_one_again(model: RemoteModel, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[list[str]] = []
    convert = model._tools
    monkeypatch.setattr(model, "_tools", lambda tools: encoded.append([t.name for t in tools]) or convert(tools))
    for _ in range(3):
        model.encode_body("Be brief.", HISTORY, [CLOCK, NOTE], 300)
    model.encode_body("Be brief.", HISTORY, [CLOCK], 300)
    rebuilt = ToolSpec("clock", "The time now, rebuilt.", {"type": "object"})
    body = json.loads(model.encode_body("Be brief.", HISTORY, [rebuilt], 300))
    assert encoded == [["clock", "note"], ["clock"], ["clock"]]
    assert json.dumps(body["tools"]).count("rebuilt") == 1  # a new spec object is never served an old encoding


def test_the_encodings_kept_are_bounded(model: RemoteModel) -> None:
    for i in range(50):
        model.encode_body("", HISTORY, [ToolSpec(f"t{i}", "", {"type": "object"})], 10)
    assert len(model._encoded_tools) <= 8
