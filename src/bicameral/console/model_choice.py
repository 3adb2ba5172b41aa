"""/model: which model the front and the back use, globally or in one chat; switched from the next call on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bicameral.config import parse_model_ref
from bicameral.console.desk import Asked, OwnerCommand
from bicameral.models.chosen import ModelChoices

HOW = (
    "Switch with /model front provider:model or /model back provider:model (e.g. /model back openai:gpt-4o); "
    "add here to switch in this chat only; /model back default (or front) goes back to the configured model."
)


@dataclass(frozen=True)
class ModelSetup:
    """What /model reads and changes: the choices, the running mode and the configured models."""

    choices: ModelChoices
    mode: str  # the running mode: single or bicameral
    front: str  # the configured references (BICAMERAL_FRONT_MODEL, BICAMERAL_BACK_MODEL)
    back: str
    unavailable: Callable[[str], str | None]  # why a reference cannot be used here, or None

    @property
    def back_is_cli(self) -> bool:
        return self.back.split(":", 1)[0] == "claude-code"


def model_command(setup: ModelSetup) -> OwnerCommand:
    async def model(asked: Asked) -> str:
        return switch(setup, asked.argument, asked.inbound.chat)

    return OwnerCommand("model", "/model [front|back] [provider:model] [here]", "show or switch the models", model)


def switch(setup: ModelSetup, argument: str, chat: str) -> str:
    """The answer to `/model <argument>` in `chat`, having made the switch it asks for (or none)."""
    words = argument.split()
    if not words:
        return show(setup, chat)
    here = len(words) > 1 and words[-1].lower() == "here"
    if here:
        words = words[:-1]
    part = words[0].lower()
    if part not in ("front", "back") or len(words) != 2:
        return f"Say which part and which model. {HOW}"
    single = setup.mode == "single"
    if setup.back_is_cli and (single or part == "back"):
        return (
            f"The {'assistant' if single else 'back'} is the Claude Code CLI ({setup.back}): it can't be switched from "
            "here. Set BICAMERAL_BACK_MODEL and restart to change it."
        )
    role = "back" if single else part  # single mode's one model is the configured back model
    configured = setup.back if role == "back" else setup.front
    where = "in this chat" if here else "everywhere"
    name = "the one model (single mode)" if single else f"the {part} model"
    if words[1].lower() == "default":
        setup.choices.choose(role, None, chat if here else None)
        if here:
            now = setup.choices.chosen(role, None) or configured
            return f"From the next call on, {name} in this chat is the one used everywhere again: {now}."
        return f"From the next call on, {name} is {configured} everywhere again, as configured.{_keeping(setup, role)}"
    try:
        ref = parse_model_ref(words[1])
    except ValueError as exc:
        return f"Not switched: {exc}."
    why = setup.unavailable(ref)
    if why is None and not single and ref.provider == "local":
        why = "the local model can't call tools, and in bicameral mode both the front and the back do."
    if why is not None:
        return f"Not switched: {why}"
    was = setup.choices.chosen(role, chat if here else None) or configured
    setup.choices.choose(role, None if ref == configured and not here else str(ref), chat if here else None)
    answer = f"From the next call on, {name} is {ref} {where} (it was {was})."
    return answer if here else answer + _keeping(setup, role)


def _keeping(setup: ModelSetup, role: str) -> str:
    own = setup.choices.chats_choosing(role)
    return f" Chats with a choice of their own keep it: {', '.join(own)}." if own else ""


def show(setup: ModelSetup, chat: str) -> str:
    """The models in use, globally and in this chat."""
    choices = setup.choices
    if setup.mode == "single" and setup.back_is_cli:
        return f"The Claude Code CLI ({setup.back}) answers everything; it is chosen at start with BICAMERAL_BACK_MODEL."
    parts = [("the one model (single mode)", "back", setup.back)] if setup.mode == "single" else [
        ("front", "front", setup.front), ("back", "back", setup.back)
    ]
    lines = []
    for label, role, configured in parts:
        if role == "back" and setup.back_is_cli:
            lines.append(f"{label.capitalize()}: the Claude Code CLI ({configured}), chosen at start")
            continue
        chosen = choices.global_choice(role)
        line = f"{label[0].upper()}{label[1:]}: {chosen or configured}"
        line += f" (your choice; configured: {configured})" if chosen else " (as configured)"
        here = choices.chat_choice(role, chat)
        if here is not None:
            line += f"; in this chat: {here}"
        others = [c for c in choices.chats_choosing(role) if c != chat]
        if others:
            line += f"; chats with their own: {', '.join(others)}"
        lines.append(line)
    return "\n".join([*lines, "", HOW])
