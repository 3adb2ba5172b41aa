"""/access, /allow, /deny, /policy and /pair: who may talk to the assistant, changed from the owner's chat."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bicameral.console.desk import Asked, OwnerCommand, Secret
from bicameral.events import owner_ids, person_key
from bicameral.gate.access import POLICIES, AccessConfig, AccessFileError, AccessPolicy, Policy
from bicameral.gate.pairing import CODE_VALID_SECONDS, Pairing

Kind = Literal["user", "chat"]
_KIND_WORDS: dict[str, Kind] = {"user": "user", "group": "chat", "chat": "chat"}
_LIST: dict[Kind, str] = {"user": "allowed_users", "chat": "allowed_chats"}
# A Telegram id (a group's is negative), or a Matrix user (@name:server) or room (!room:server).
_NUMERIC = re.compile(r"-?[1-9][0-9]{0,19}")
_MATRIX_USER = re.compile(r"@[^\s:]+:\S+")
_MATRIX_ROOM = re.compile(r"![^\s:]+:\S+")

POLICY_MEANING: dict[Policy, str] = {
    "owner_only": "only you, in private; no groups",
    "allowlist": "you, the allowed users in private, and the allowed chats",
    "open": "anyone, in private and in any group",
}
ALLOW_USAGE = "/allow <id> or /allow user <id> or /allow group <chat id>"
DENY_USAGE = "/deny <id> or /deny user <id> or /deny group <chat id>"
POLICY_USAGE = "/policy open|owner_only|allowlist"


@dataclass(frozen=True)
class Target:
    """Someone, or some chat, on one of the lists: the id as stored (a number, or a Matrix name)."""

    kind: Kind
    id: int | str

    @property
    def noun(self) -> str:
        return "user" if self.kind == "user" else "chat"


def parse_target(argument: str) -> Target | None:
    """`ID`, `user ID` or `group ID`; a bare number is a user when positive, a chat (Telegram group) when negative."""
    words = argument.split()
    if len(words) == 2 and words[0].lower() in _KIND_WORDS:
        kind: Kind | None = _KIND_WORDS[words[0].lower()]
        raw = words[1]
    elif len(words) == 1:
        kind, raw = None, words[0]
    else:
        return None
    if _NUMERIC.fullmatch(raw):
        number = int(raw)
        inferred: Kind = "chat" if number < 0 else "user"
        if kind == "user" and number < 0:
            return None  # a person's id is never negative
        return Target(kind or inferred, number)
    if _MATRIX_USER.fullmatch(raw) and kind in (None, "user"):
        return Target("user", raw)
    if _MATRIX_ROOM.fullmatch(raw) and kind in (None, "chat"):
        return Target("chat", raw)
    return None


def _listed(values: list[int | str], wanted: int | str) -> bool:
    return any(str(v) == str(wanted) for v in values)


def _ids(values: list[int | str]) -> str:
    return ", ".join(str(v) for v in values) if values else "none"


def describe(access: AccessPolicy, config: AccessConfig) -> str:
    return "\n".join([
        f"Access ({access.path}):",
        f"policy: {config.policy} — {POLICY_MEANING[config.policy]}",
        f"allowed users: {_ids(config.allowed_users)}",
        f"allowed chats: {_ids(config.allowed_chats)}",
    ])


def _unreadable(exc: AccessFileError) -> str:
    return (
        f"Nothing changed: {exc.path} can't be read ({exc.reason}). I'm still using the last policy I could read. "
        "Fix the file by hand (JSON like "
        '{"policy": "allowlist", "allowed_users": [123], "allowed_chats": [-100456]}) or delete it to start over.'
    )


def access_commands(access: AccessPolicy, pairing: Pairing) -> list[OwnerCommand]:
    """The commands that read and change access.json, and /pair."""
    owner = access.owner_id

    async def show(asked: Asked) -> str:
        try:
            config = access.read()  # what the file says now, even if it changed a moment ago
        except AccessFileError as exc:
            return f"{exc.path} can't be read ({exc.reason}); I'm using the last policy I could read.\n" + describe(
                access, access.config
            )
        return describe(access, config)

    async def allow(asked: Asked) -> str:
        target = parse_target(asked.argument)
        if target is None:
            return f"Usage: {ALLOW_USAGE}"
        if target.kind == "user" and str(target.id) in owner_ids(owner):
            return "That's you: the owner is always allowed."
        said: list[str] = []

        def add(config: AccessConfig) -> AccessConfig:
            values = getattr(config, _LIST[target.kind])
            if _listed(values, target.id):
                said.append(f"{target.noun.capitalize()} {target.id} is already allowed.")
                return config
            update: dict[str, object] = {_LIST[target.kind]: [*values, target.id]}
            said.append(f"Allowed {target.noun} {target.id}.")
            if config.policy == "owner_only":
                update["policy"] = "allowlist"
                said.append("The policy was owner_only, which doesn't read the lists, so it is allowlist now.")
            elif config.policy == "open":
                said.append("The policy is open, so everyone may talk to me anyway.")
            return config.model_copy(update=update)

        try:
            access.update(add)
        except AccessFileError as exc:
            return _unreadable(exc)
        return " ".join(said)

    async def deny(asked: Asked) -> str:
        target = parse_target(asked.argument)
        if target is None:
            return f"Usage: {DENY_USAGE}"
        if target.kind == "user" and str(target.id) in owner_ids(owner):
            return "That's you: the owner is always allowed, so there is nothing to deny."
        said: list[str] = []

        def remove(config: AccessConfig) -> AccessConfig:
            values = getattr(config, _LIST[target.kind])
            if not _listed(values, target.id):
                said.append(f"{target.noun.capitalize()} {target.id} isn't in {_LIST[target.kind]}; nothing changed.")
                return config
            said.append(f"Removed {target.noun} {target.id} from {_LIST[target.kind]}.")
            if config.policy == "open":
                said.append("The policy is open, so they may still talk to me: /policy allowlist to use the lists.")
            kept = [v for v in values if str(v) != str(target.id)]
            return config.model_copy(update={_LIST[target.kind]: kept})

        try:
            access.update(remove)
        except AccessFileError as exc:
            return _unreadable(exc)
        return " ".join(said)

    async def policy(asked: Asked) -> str:
        wanted = asked.argument.strip().lower()
        if wanted not in POLICIES:
            return f"Usage: {POLICY_USAGE}"
        chosen: Policy = next(p for p in POLICIES if p == wanted)
        before: list[Policy] = []

        def set_policy(config: AccessConfig) -> AccessConfig:
            before.append(config.policy)
            return config.model_copy(update={"policy": chosen})

        try:
            access.update(set_policy)
        except AccessFileError as exc:
            return _unreadable(exc)
        if before[0] == chosen:
            return f"The policy is already {chosen}: {POLICY_MEANING[chosen]}."
        warning = " Anyone who finds me can talk to me now, at your models' cost." if chosen == "open" else ""
        return f"Policy: {chosen} (was {before[0]}): {POLICY_MEANING[chosen]}.{warning}"

    async def pair(asked: Asked) -> str | Secret:
        if not asked.inbound.is_private:
            return "Ask me for a pairing code in our private chat: anyone here could read it."
        issued = pairing.issue(person_key(asked.inbound))
        minutes = CODE_VALID_SECONDS // 60
        return Secret(
            f"Pairing code: {issued.code}\n"
            f"Whoever sends me this code in a private chat (alone, or as /start {issued.code}) within {minutes} minutes "
            "is added to the allowed users. It works once."
        )

    return [
        OwnerCommand("access", "/access", "who may talk to me: the policy and the allowed users and chats", show),
        OwnerCommand("allow", "/allow <id>", "let a user (or a group, by its negative id) talk to me", allow),
        OwnerCommand("deny", "/deny <id>", "take a user or a group off the allowed lists", deny),
        OwnerCommand("policy", "/policy open|owner_only|allowlist", "set who may talk to me", policy),
        OwnerCommand("pair", "/pair", f"a one-time code that lets someone in ({CODE_VALID_SECONDS // 60} minutes)", pair),
    ]
