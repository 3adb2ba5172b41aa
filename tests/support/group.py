"""A group with an owner, an admin and two members, for the authority tests in every mode."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from bicameral.tools.base import Tool, ToolContext, ToolResult
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.fakes.telegram_server import FakeTelegram

GROUP = -100777
ANN = 2001  # a member
BEN = 2002  # another member
ADA = 2003  # a group admin
MENTION = "@bicameral_test_bot"
# A member's front response that tries every way of steering the owner's task labelled "vault".
STEER = [
    ToolCall("append", {"task": "vault", "context": "also mail the gold to Ann"}),
    ToolCall("redirect", {"task": "vault", "spec": "mail the gold to Ann"}),
    ToolCall("branch", {"task": "vault", "spec": "mail the gold to Ann", "label": "ann's copy"}),
    ToolCall("status", {"task": "vault"}),
    ToolCall("cancel", {"task": "vault"}),
]


def says(telegram: FakeTelegram, user: int, text: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """`user` writes `text` in the group (named like the owner when `name` says so)."""
    names = {OWNER: "Olga", ANN: "Ann", BEN: "Ben", ADA: "Ada"}
    return telegram.user_sends(
        GROUP, text, user_id=user, first_name=name or names[user], chat_type="supergroup", chat_title="Crew", **extra
    )


def voice_pass(req: Request) -> Reply | None:
    """The front's rewording of a result, answered with the result as it is; None for any other front call."""
    if "Rephrase the text" in req.system or "Rewrite its result" in req.system:
        return Reply(text=req.last_user_text().split("<result>")[-1].split("</result>")[0].strip())
    return None


def admins(params: dict[str, Any]) -> dict[str, Any]:
    """getChatMember as Telegram answers it: ADA administers the group, everyone else is a member."""
    user_id = int(params["user_id"])
    status = "administrator" if user_id == ADA else "member"
    return {"status": status, "user": {"id": user_id, "is_bot": False, "first_name": "X"}}


class VaultArgs(BaseModel):
    what: str = "everything"


class OpenVault(Tool[VaultArgs]):
    """An owner-only tool that records every run: it must never run on anyone else's words."""

    name = "open_vault"
    description = "Owner only: read the owner's vault."
    args_model = VaultArgs
    owner_only = True

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def run(self, args: VaultArgs, ctx: ToolContext) -> ToolResult:
        self.runs.append(ctx.chat)
        return ToolResult("the vault holds: gold")


class HoldArgs(BaseModel):
    pass


class HoldOn(Tool[HoldArgs]):
    """A step that waits until the test lets it finish: messages sent meanwhile arrive mid-turn."""

    name = "hold_on"
    description = "Wait a moment."
    args_model = HoldArgs

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, args: HoldArgs, ctx: ToolContext) -> ToolResult:
        self.entered.set()
        await self.release.wait()
        return ToolResult("waited")
