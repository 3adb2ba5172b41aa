"""What to tell a user when the model fails or a run stops: sentences from the one failure table."""

from __future__ import annotations

from bicameral.failures import failure_sentence
from bicameral.models.base import ModelError


def describe_model_error(error: ModelError) -> str:
    return failure_sentence(error.kind)


def describe_stop(reason: str) -> str:
    return f"I stopped working on this because {reason}. Tell me if you want me to try another way."
