"""`voice_config`: the voice settings turned into how voice notes are heard (an endpoint, the offline model, or off)."""

from __future__ import annotations

from bicameral.config import Settings
from bicameral.media.voice import VoiceConfig
from bicameral.media.whisper_local import offline_why_off
from bicameral.models.transcription import OPENAI_BASE_URL, TranscriptionEndpoint


def voice_config(settings: Settings) -> VoiceConfig:
    """The endpoint (OpenAI's when only OPENAI_API_KEY is set; `off` for none), else the offline model, else off."""
    base = settings.transcription_base_url
    key = settings.transcription_api_key or settings.openai_api_key
    if base is None and settings.openai_api_key is not None:
        base = OPENAI_BASE_URL
    endpoint = None
    if base and base.strip().lower() != "off":
        endpoint = TranscriptionEndpoint(
            base_url=base.strip(), model=settings.transcription_model,
            api_key=key.get_secret_value() if key is not None else None,
            timeout_seconds=settings.model_timeout_seconds, proxy_variables=settings.proxy_variables(),
        )
    wanted = settings.transcription_offline
    offline = wanted != "off" and offline_why_off() is None
    if wanted == "on" and offline:
        endpoint = None  # the audio never leaves the host
    return VoiceConfig(endpoint=endpoint, offline=offline and endpoint is None)
