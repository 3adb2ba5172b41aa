"""Tool arguments pass the one normaliser before a tool sees them: what a steered model writes is bounded too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bicameral.events import Action, ActionResult
from bicameral.store.db import Database
from bicameral.store.tool_calls import ToolCallStore
from bicameral.tools.base import Tool, ToolContext, ToolResult
from bicameral.tools.registry import ToolRegistry

HIDDEN = "\x00\x07\x1b\x7f\x85\u200b\u200d\ufeff\u202e\u2066\U000e0041"


class _Args(BaseModel):
    text: str
    lines: list[str] = []
    named: dict[str, str] = {}
    nested: Any = None


class _Keep(Tool[_Args]):
    name = "keep_args"
    description = "Keeps what it was given."
    args_model = _Args

    def __init__(self) -> None:
        self.seen: list[_Args] = []

    async def run(self, args: _Args, ctx: ToolContext) -> ToolResult:
        self.seen.append(args)
        return ToolResult(f"kept {args.text}")


def _ctx() -> ToolContext:
    async def perform(action: Action) -> ActionResult:
        return ActionResult(ok=True)

    return ToolContext(chat="telegram:7", turn_id="t1", data_dir=Path("data"), perform=perform)


async def test_every_string_is_cleaned_at_any_depth_and_data_stays_as_written() -> None:
    tool = _Keep()
    registry = ToolRegistry([tool])
    result = await registry.execute(
        "keep_args",
        {
            "text": f"fact{HIDDEN} one",
            "lines": [f"a{HIDDEN}b", "x² ﬁle ｆｕｌｌ\r\n\tindented"],
            "named": {f"k{HIDDEN}ey": f"v{HIDDEN}alue"},
            "nested": {"deeper": [[f"c{HIDDEN}d"]]},
        },
        _ctx(),
    )
    assert not result.is_error, result.content
    [args] = tool.seen
    assert args.text == "fact one"
    # Newlines, tabs and CR survive, and so do compatibility characters: arguments are often data.
    assert args.lines == ["ab", "x² ﬁle ｆｕｌｌ\r\n\tindented"]
    assert args.named == {"key": "value"}
    assert args.nested == {"deeper": [["cd"]]}


async def test_a_lone_surrogate_is_repaired_and_the_call_is_audited(tmp_path: Path) -> None:
    tool = _Keep()
    db = Database(tmp_path / "bicameral.db")
    try:
        registry = ToolRegistry([tool], audit=ToolCallStore(db))
        result = await registry.execute("keep_args", {"text": "caf\ud800", "lines": ["\udfff"]}, _ctx())
        assert result == ToolResult("kept caf\ufffd")
        assert tool.seen[0].lines == ["\ufffd"]
        [row] = db.query("SELECT args, result FROM tool_calls")
        assert "caf\ufffd" in row["args"] and row["result"] == "kept caf\ufffd"
    finally:
        db.close()


async def test_arguments_nested_absurdly_deep_are_refused_with_a_reason() -> None:
    tool = _Keep()
    registry = ToolRegistry([tool])
    deep: Any = "bottom"
    for _ in range(500):  # as deep as json.loads will still parse
        deep = [deep]
    result = await registry.execute("keep_args", {"text": "x", "nested": deep}, _ctx())
    assert result.is_error and "nested more than" in result.content
    assert tool.seen == []
    assert not (await registry.execute("keep_args", {"text": "x", "nested": [[["fine"]]]}, _ctx())).is_error
