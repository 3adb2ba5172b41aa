"""Group admins, asked of Telegram (getChatMember) for the group messages whose words may act, and remembered."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from telegram import Bot

from bicameral.events import Inbound, split_chat_key

log = logging.getLogger(__name__)

# The commands that act on others' work or the whole chat, which admins may use like the owner.
MANAGING_COMMANDS = frozenset({"stop", "reset"})
_ADMIN_STATUSES = frozenset({"creator", "administrator"})
_LOOKUP_TIMEOUT = 5
_REMEMBER_SECONDS = 600.0  # a demoted admin keeps admin rights at most this long
_REMEMBERED = 4096


class AdminLookup:
    """Marks the sender of an addressed group message (or a /stop, /reset) as an admin when Telegram says so.

    Who is an admin decides who may steer others' work, so the answer comes from the platform, never from a
    name; it is remembered for a while so a busy group costs one lookup per person, not one per message.
    A lookup that fails means no admin rights this time (and is not remembered), never a lost message.
    """

    def __init__(self, bot: Bot, redact: Callable[[str], str] = str, clock: Callable[[], float] = time.monotonic) -> None:
        self._bot = bot
        self._redact = redact
        self._clock = clock
        self._known: OrderedDict[tuple[str, str], tuple[bool, float]] = OrderedDict()

    async def flag(self, inbound: Inbound) -> Inbound:
        if inbound.is_private or not (inbound.addressed or inbound.command in MANAGING_COMMANDS):
            return inbound
        admin = await self._is_admin(inbound)
        if not admin:
            return inbound
        return dataclasses.replace(inbound, sender=dataclasses.replace(inbound.sender, is_admin=True))

    async def _is_admin(self, inbound: Inbound) -> bool:
        chat_id = split_chat_key(inbound.chat)[1]
        # An anonymous admin posts as the group itself, which only admins can do.
        if inbound.sender.id == chat_id:
            return True
        if not inbound.sender.id.isdigit() or inbound.sender.is_bot:
            return False
        key = (inbound.chat, inbound.sender.id)
        known = self._known.get(key)
        if known is not None and self._clock() - known[1] < _REMEMBER_SECONDS:
            return known[0]
        try:
            # A raw dict: only `status` matters, and the typed ChatMember union is strict about the rest.
            member = await self._bot.do_api_request(
                "getchatmember",
                api_kwargs={"chat_id": int(chat_id), "user_id": int(inbound.sender.id)},
                read_timeout=_LOOKUP_TIMEOUT,
            )
        except Exception as exc:
            log.info("telegram: admin lookup for %s in %s failed: %s", inbound.sender.id, inbound.chat, self._redact(str(exc)))
            return False
        admin = isinstance(member, dict) and member.get("status") in _ADMIN_STATUSES
        self._known[key] = (admin, self._clock())
        self._known.move_to_end(key)
        while len(self._known) > _REMEMBERED:
            self._known.popitem(last=False)
        return admin
