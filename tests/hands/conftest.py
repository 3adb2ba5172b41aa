"""Shared pieces for the hands tests: a registry of the real tools and a context for a chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from bicameral.events import Action, ActionResult, Authority, Role
from bicameral.tools.base import ToolContext
from bicameral.tools.registry import ToolRegistry, discover_tools


class Outbox:
    """Records every action a tool performs and answers ok."""

    def __init__(self) -> None:
        self.actions: list[Action] = []

    async def __call__(self, action: Action) -> ActionResult:
        self.actions.append(action)
        return ActionResult(ok=True, message_ids=(str(len(self.actions)),))


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(discover_tools(), timeout=60)


@pytest.fixture
def make_ctx(tmp_path: Path, outbox: Outbox):
    def make(chat: str = "telegram:1", *, owner: bool = True) -> ToolContext:
        return ToolContext(
            chat=chat,
            turn_id="t1",
            data_dir=tmp_path / "data",
            perform=outbox,
            authority=Authority(Role.OWNER if owner else Role.MEMBER),
        )

    return make
