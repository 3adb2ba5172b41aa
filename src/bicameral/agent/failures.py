"""What to tell a user when the model fails: one sentence per error kind, never a raw error."""

from __future__ import annotations

from bicameral.models.base import ModelError

_MESSAGES = {
    "rate_limit": "My model provider is rate-limiting me right now. Give me a minute and ask again.",
    "overloaded": "My model provider is overloaded at the moment. Please try again shortly.",
    "auth": "My model credentials were rejected, so I can't think right now. The owner needs to check the API key.",
    "bad_request": "The model refused that request. Try rephrasing, or send /reset to start a fresh conversation.",
    "server": "My model provider had an internal error. Please try again in a moment.",
    "connection": "I can't reach my model provider right now. Please try again shortly.",
    "timeout": "My model took too long to answer. Please try again.",
    "unavailable": "My model isn't available. The owner needs to check the model settings (`bicameral doctor`).",
}


def describe_model_error(error: ModelError) -> str:
    return _MESSAGES.get(error.kind, "Something went wrong on my side while thinking. Please try again.")


def describe_stop(reason: str) -> str:
    return f"I stopped working on this because {reason}. Tell me if you want me to try another way."
