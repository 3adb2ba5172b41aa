"""VoiceReader against a transcription endpoint on loopback: the real multipart upload, and a sentence for every failure."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from aiohttp import web

from bicameral.app.voice import voice_config
from bicameral.config import Settings
from bicameral.events import Attachment
from bicameral.failures import failure_sentence
from bicameral.media.voice import VoiceConfig, VoiceReader, audio_format
from bicameral.models.transcription import OPENAI_BASE_URL, TranscriptionEndpoint
from tests.fakes.transcription_server import FakeTranscription
from tests.media.speech import spoken_wav

KEY = "voice-key"


@pytest.fixture
async def endpoint():
    fake = await FakeTranscription(key=KEY).start()
    yield fake
    await fake.stop()


def saved(data_dir: Path, data: bytes, name: str = "voice.ogg") -> Attachment:
    """A voice attachment as the channel saves it: a file under the data dir, its path relative to it."""
    path = data_dir / "attachments" / "1" / f"5-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Attachment(kind="voice", path=path.relative_to(data_dir).as_posix(), name=name, size=len(data))


def reader_for(fake: FakeTranscription, *, key: str | None = KEY, timeout: float = 10.0, **config: int) -> VoiceReader:
    endpoint = TranscriptionEndpoint(base_url=fake.url, model="whisper-1", api_key=key, timeout_seconds=timeout)
    return VoiceReader(VoiceConfig(endpoint=endpoint, offline=False, **config))


async def test_a_spoken_note_is_uploaded_as_openai_expects_and_its_text_comes_back(tmp_path, endpoint, caplog):
    caplog.set_level(logging.DEBUG)
    wav = spoken_wav(tmp_path, "please water the plants")
    attachment = saved(tmp_path, wav.read_bytes(), "note.wav")
    read = await reader_for(endpoint).read(attachment, data_dir=tmp_path, chat="telegram:1")
    assert read.text == "remind me to water the plants" and read.note is None
    [upload] = endpoint.uploads
    assert upload.authorization == f"Bearer {KEY}"
    assert upload.content_type.startswith("multipart/form-data; boundary=")
    assert upload.fields == {"model": "whisper-1", "response_format": "json"}
    # The name's extension tells the API the format (from the bytes, whatever the file was called).
    assert (upload.filename, upload.file_type) == ("voice.wav", "audio/wav")
    assert upload.audio == wav.read_bytes()
    assert KEY not in caplog.text and KEY not in repr(reader_for(endpoint).config)


@pytest.mark.parametrize(
    ("status", "body", "sentence"),
    [
        (500, '{"error": {"message": "The server had an error"}}', "voice_failed"),
        (502, "<html>Bad gateway</html>", "voice_failed"),
        (200, "<html>not json</html>", "voice_failed"),
        (200, '{"transcript": "wrong field"}', "voice_failed"),
        (200, '["a list"]', "voice_failed"),
        (200, '{"text": "   "}', "voice_silent"),
        (413, '{"error": {"message": "Maximum content size limit exceeded"}}', "voice_failed"),
    ],
)
async def test_a_failing_or_garbled_endpoint_is_a_sentence(tmp_path, endpoint, status, body, sentence):
    endpoint.answer = lambda upload: web.Response(status=status, text=body, content_type="application/json")
    read = await reader_for(endpoint).read(saved(tmp_path, b"OggS" + b"\x00" * 200), data_dir=tmp_path, chat="c")
    assert read.text is None and read.note == failure_sentence(sentence)
    assert len(endpoint.uploads) == 1


async def test_a_rejected_key_tells_the_owner_which_setting(tmp_path, endpoint):
    read = await reader_for(endpoint, key="wrong").read(saved(tmp_path, b"OggS" + b"\x00" * 64), data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("voice_key")
    assert "BICAMERAL_TRANSCRIPTION_API_KEY" in read.note


async def test_an_endpoint_that_never_answers_times_out_into_a_sentence(tmp_path, endpoint):
    release = asyncio.Event()

    async def stall(upload):
        await release.wait()
        return web.json_response({"text": "too late"})

    endpoint.answer = stall
    try:
        read = await reader_for(endpoint, timeout=0.5).read(saved(tmp_path, b"OggS" + b"\x00" * 64), data_dir=tmp_path, chat="c")
    finally:
        release.set()
    assert read.note == failure_sentence("voice_failed")


async def test_an_endpoint_that_is_down_is_a_sentence(tmp_path, endpoint):
    await endpoint.stop()
    read = await reader_for(endpoint).read(saved(tmp_path, b"OggS" + b"\x00" * 64), data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("voice_failed")


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7\n" + b"x" * 500, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, b"just some text pretending to be a voice note", b""],
)
async def test_audio_that_is_not_audio_is_refused_before_any_upload(tmp_path, endpoint, data):
    read = await reader_for(endpoint).read(saved(tmp_path, data), data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("voice_not_audio")
    assert endpoint.uploads == []


async def test_a_recording_over_the_limit_is_refused_before_any_upload(tmp_path, endpoint):
    read = await reader_for(endpoint, max_bytes=1000).read(saved(tmp_path, b"OggS" + b"\x00" * 2000), data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("voice_too_large")
    assert endpoint.uploads == []


async def test_a_missing_file_is_unreadable(tmp_path, endpoint):
    gone = Attachment(kind="voice", path="attachments/1/5-gone.ogg")
    read = await reader_for(endpoint).read(gone, data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("unreadable_file")


async def test_with_neither_endpoint_nor_offline_model_voice_is_off_and_says_how_to_turn_it_on(tmp_path):
    reader = VoiceReader(VoiceConfig(endpoint=None, offline=False))
    read = await reader.read(saved(tmp_path, b"OggS" + b"\x00" * 64), data_dir=tmp_path, chat="c")
    assert read.note == failure_sentence("voice_off") and read.text is None
    assert "off" in read.note and "OPENAI_API_KEY" in read.note and "bicameral[voice]" in read.note


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"OggS\x00\x02", "ogg"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", "wav"),
        (b"ID3\x04\x00", "mp3"),
        (b"\xff\xfb\x90\x64", "mp3"),
        (b"fLaC\x00\x00\x00\x22", "flac"),
        (b"\x00\x00\x00\x20ftypM4A ", "m4a"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86", "webm"),
        (b"RIFF\x24\x00\x00\x00AVI LIST", None),
        (b"PK\x03\x04", None),
        (b"\xff\xd8\xff\xe0", None),  # a JPEG starts with 0xFF too
        (b"", None),
    ],
)
def test_audio_is_told_by_its_first_bytes(head, kind):
    assert audio_format(head) == kind


def test_settings_pick_the_endpoint_the_key_and_the_offline_model(tmp_path, monkeypatch):
    import bicameral.app.voice as configs

    def settings(**values: object) -> Settings:
        return Settings.for_test(tmp_path, **values)

    monkeypatch.setattr(configs, "offline_why_off", lambda: "not installed")
    assert voice_config(settings()) == VoiceConfig(endpoint=None, offline=False)
    openai = voice_config(settings(openai_api_key="sk-openai")).endpoint
    assert openai is not None and (openai.base_url, openai.model, openai.api_key) == (OPENAI_BASE_URL, "whisper-1", "sk-openai")
    own = voice_config(settings(openai_api_key="sk-openai", transcription_base_url="http://127.0.0.1:9/v1",
                                transcription_api_key="own", transcription_model="small")).endpoint
    assert own is not None and (own.base_url, own.model, own.api_key) == ("http://127.0.0.1:9/v1", "small", "own")
    assert voice_config(settings(openai_api_key="sk-openai", transcription_base_url="off")).endpoint is None
    assert "own" in settings(transcription_api_key="own").secret_values()

    monkeypatch.setattr(configs, "offline_why_off", lambda: None)
    assert voice_config(settings()) == VoiceConfig(endpoint=None, offline=True)
    assert voice_config(settings(openai_api_key="k")).offline is False  # auto: the endpoint first
    on = voice_config(settings(openai_api_key="k", transcription_offline="on"))
    assert on.endpoint is None and on.offline  # on: the audio never leaves the host
    assert voice_config(settings(transcription_offline="off")) == VoiceConfig(endpoint=None, offline=False)


async def test_doctor_says_how_voice_is_heard(tmp_path, monkeypatch):
    import bicameral.app.voice as configs
    import bicameral.media.whisper_local as whisper_local
    from bicameral.doctor import _voice

    monkeypatch.setattr(configs, "offline_why_off", lambda: None)
    endpoint = await _voice(Settings.for_test(tmp_path, openai_api_key="sk-secret"))
    assert endpoint.ok and f"{OPENAI_BASE_URL}/audio/transcriptions (whisper-1, with a key)" in endpoint.detail
    assert "sk-secret" not in endpoint.detail
    offline = await _voice(Settings.for_test(tmp_path))
    assert offline.ok and "offline model" in offline.detail and "English only" in offline.detail
    for module in (configs, whisper_local):
        monkeypatch.setattr(module, "offline_why_off", lambda: "faster_whisper not installed")
    off = await _voice(Settings.for_test(tmp_path))
    assert not off.ok and not off.required and off.detail.startswith("off: ") and "faster_whisper not installed" in off.detail
