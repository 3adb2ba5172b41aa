"""Group admins, asked of Telegram (getChatMember) only for the commands that need to know."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from telegram import Bot

from bicameral.events import Inbound, split_chat_key

log = logging.getLogger(__name__)

# The commands that act on others' work or the whole chat, which admins may use like the owner.
MANAGING_COMMANDS = frozenset({"stop", "reset"})
_ADMIN_STATUSES = frozenset({"creator", "administrator"})
_LOOKUP_TIMEOUT = 5


async def with_admin_flag(bot: Bot, inbound: Inbound, redact: Callable[[str], str] = str) -> Inbound:
    """Mark the sender of a group /stop or /reset as an admin when Telegram says they are one."""
    if inbound.is_private or inbound.command not in MANAGING_COMMANDS:
        return inbound
    chat_id = split_chat_key(inbound.chat)[1]
    # An anonymous admin posts as the group itself, which only admins can do.
    admin = inbound.sender.id == chat_id
    if not admin and inbound.sender.id.isdigit():
        try:
            # A raw dict: only `status` matters, and the typed ChatMember union is strict about the rest.
            member = await bot.do_api_request(
                "getchatmember",
                api_kwargs={"chat_id": int(chat_id), "user_id": int(inbound.sender.id)},
                read_timeout=_LOOKUP_TIMEOUT,
            )
        except Exception as exc:  # no answer means no admin rights, never a lost command
            log.info("telegram: admin lookup for %s in %s failed: %s", inbound.sender.id, inbound.chat, redact(str(exc)))
            return inbound
        admin = isinstance(member, dict) and member.get("status") in _ADMIN_STATUSES
    if not admin:
        return inbound
    return dataclasses.replace(inbound, sender=dataclasses.replace(inbound.sender, is_admin=True))
