"""The models the app calls: built from the settings or handed in, switched by the owner's /model, all metered."""

from __future__ import annotations

import functools

from bicameral.app.configs import owners
from bicameral.config import Settings
from bicameral.models import build_model
from bicameral.models.base import Model
from bicameral.models.caps import SpendingCaps
from bicameral.models.chosen import ChosenModel, ModelChoices
from bicameral.models.metered import Meter, ModelCall
from bicameral.store import Stores
from bicameral.store.usage import UsageTotal
from bicameral.types import Clock

from .configs import model_config

# The owner's choices of model (/model), as one JSON text in the kv table.
MODEL_CHOICES_KEY = "console.models"


class AppModels:
    """Builds each role's model once, and closes every model it built or was given at the end."""

    def __init__(self, settings: Settings, mode: str, stores: Stores, clock: Clock) -> None:
        self._config = model_config(settings)
        self._mode = mode
        self._stores = stores
        self._opened: list[Model] = []
        # The spending caps (BICAMERAL_USER_DAILY_TOKENS, BICAMERAL_DAILY_TOKENS), checked before each call.
        self.caps = SpendingCaps(
            per_user=settings.user_daily_tokens, everyone=settings.daily_tokens, owner_id=owners(settings),
            load_spend=stores.caps.spend_since, load_allowances=stores.caps.allowances, clock=clock,
        )
        # Every model call is recorded (model_usage), and each goes to the model the owner chose (/model), if any.
        capped = self.caps.active
        self.meter = Meter(
            functools.partial(_store_usage, stores), clock=clock, check=self.caps.refusal_text if capped else None,
            count=self.caps.note if capped else None,
        )
        self.choices = ModelChoices(stores.kv.get(MODEL_CHOICES_KEY), save=functools.partial(stores.kv.set, MODEL_CHOICES_KEY))

    def for_role(self, given: Model | None, ref: str, role: str) -> Model:
        """The model of `role` (front or back): the one passed in, or one built from `ref`, unless the owner chose
        another (/model), globally or for the calling chat; either way metered."""
        if given is None:
            given = build_model(ref, self._config)
            self._opened.append(given)
        counted_as = "single" if self._mode == "single" else role

        def build(chosen: str) -> Model:
            return self.meter.wrap(build_model(chosen, self._config), counted_as)

        model = ChosenModel(role, self.meter.wrap(given, counted_as), self.choices, build)
        self._opened.append(model)  # closes the models it built for the owner's choices
        return model

    def usage_totals(self, since: float) -> list[UsageTotal]:
        return self._stores.usage.totals(since, group_by=("model", "role", "chat"))

    async def aclose(self) -> None:
        for model in self._opened:
            await model.aclose()


def _store_usage(stores: Stores, call: ModelCall) -> None:
    """One finished model call into the usage record."""
    usage = call.usage
    stores.usage.record(
        at=call.at, model=call.model, role=call.role, chat=call.chat, input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens, outcome=call.outcome, cost_usd=call.cost_usd,
        people=" ".join(call.people) or None,
    )
