"""The owner's choice of model, per role, globally or for one chat: picked again for every call."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping

from bicameral.models.base import Message, Model, ModelError, ModelEvent, ToolSpec
from bicameral.models.scope import current_chat

log = logging.getLogger(__name__)


class ModelChoices:
    """Which model each role uses instead of the configured one: a global choice and per-chat ones.

    Kept in memory (read on every call) and handed to `save` as a whole on each change, as one JSON text.
    """

    def __init__(self, saved: str | None = None, save: Callable[[str], None] | None = None) -> None:
        self._refs: dict[str, str] = _parse(saved)
        self._save = save

    def chosen(self, role: str, chat: str | None) -> str | None:
        """The model a call of `role` in `chat` uses, if the owner chose one: this chat's choice, else the global one."""
        refs = self._refs
        if not refs:
            return None  # the usual case: nothing chosen, nothing to look up
        if chat is not None and (ref := refs.get(f"{role}@{chat}")) is not None:
            return ref
        return refs.get(role)

    def global_choice(self, role: str) -> str | None:
        return self._refs.get(role)

    def chat_choice(self, role: str, chat: str) -> str | None:
        return self._refs.get(f"{role}@{chat}")

    def chats_choosing(self, role: str) -> list[str]:
        """The chats with a choice of their own for `role`."""
        prefix = f"{role}@"
        return sorted(key[len(prefix):] for key in self._refs if key.startswith(prefix))

    def choose(self, role: str, ref: str | None, chat: str | None = None) -> None:
        """Use `ref` for `role` (in `chat` only, when given); None clears the choice."""
        key = role if chat is None else f"{role}@{chat}"
        refs = dict(self._refs)
        if ref is None:
            refs.pop(key, None)
        else:
            refs[key] = ref
        if self._save is not None:
            self._save(json.dumps(refs, sort_keys=True))  # saved first: a choice that could not be kept is not made
        self._refs = refs


def _parse(saved: str | None) -> dict[str, str]:
    if not saved:
        return {}
    try:
        value = json.loads(saved)
    except ValueError:
        log.warning("the saved model choices are not JSON; using the configured models")
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        log.warning("the saved model choices have an unexpected shape; using the configured models")
        return {}
    return dict(value)


class ChosenModel:
    """A Model that hands each call to the model chosen for its role in the calling chat (`current_chat`), or to
    `default`. Chosen models are built by `build` at their first call and kept; `aclose` closes those."""

    def __init__(
        self, role: str, default: Model, choices: ModelChoices, build: Callable[[str], Model]
    ) -> None:
        self.role = role
        self.default = default
        self.name = default.name  # the configured model's; each call's own is its chosen model's
        self._choices = choices
        self._build = build
        self._built: dict[str, Model] = {}

    def pick(self, chat: str | None = None) -> Model:
        """The model a call in `chat` (the current one by default) goes to."""
        ref = self._choices.chosen(self.role, current_chat.get() if chat is None else chat)
        if ref is None:
            return self.default
        model = self._built.get(ref)
        if model is None:
            try:
                model = self._build(ref)
            except Exception as exc:
                log.exception("could not build the chosen %s model %s", self.role, ref)
                raise ModelError("bad_request", f"the chosen model {ref} could not be set up: {exc}") from exc
            self._built[ref] = model
        return model

    def models(self) -> Mapping[str, Model]:
        """The chosen models built so far, by reference."""
        return dict(self._built)

    async def aclose(self) -> None:
        built, self._built = self._built, {}
        for model in built.values():
            await model.aclose()

    def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec], max_tokens: int
    ) -> AsyncIterator[ModelEvent]:
        return self.pick().stream(system, messages, tools, max_tokens)
