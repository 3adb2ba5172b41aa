"""A Telegram voice note end to end: downloaded, transcribed at a loopback endpoint, and read by the model as the
sender's words; a failing endpoint or no endpoint at all is a sentence the model sees, and other chats go on."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from bicameral.failures import failure_sentence
from bicameral.markup import quoteattr
from tests.conftest import OWNER
from tests.fakes.model_server import Reply
from tests.fakes.transcription_server import FakeTranscription
from tests.media.speech import speech_ogg
from tests.support.access import write_access
from tests.support.chat import eventually

KEY = "voice-key"
STRANGER = 2002


@pytest.fixture
async def endpoint():
    fake = await FakeTranscription(key=KEY, text="Remind me to water the plants at six.").start()
    yield fake
    await fake.stop()


def voice_settings(endpoint: FakeTranscription) -> dict[str, object]:
    return {"transcription_base_url": endpoint.url, "transcription_api_key": KEY, "transcription_offline": "off"}


def request_text(models, index: int = 0) -> str:
    return json.dumps(models.requests[index].raw, ensure_ascii=False)


def said(request) -> str:
    """Every text the model was shown in a request's messages, as it read them."""
    parts = []
    for message in request.messages:
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
        parts += [b for b in blocks if isinstance(b, str)]
    return "\n".join(parts)


def noted(kind: str) -> str:
    return f"note={quoteattr(failure_sentence(kind))}"


async def test_a_voice_note_reaches_the_model_as_the_senders_words(tmp_path, telegram, models, start_bot, endpoint):
    models.script(Reply(text="I'll remind you at six."))
    app = await start_bot(**voice_settings(endpoint))
    note = speech_ogg(tmp_path, "remind me to water the plants at six")
    telegram.user_sends(OWNER, voice=note)
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "I'll remind you at six."
    [upload] = endpoint.uploads
    assert upload.audio == note and upload.filename == "voice.ogg" and upload.fields["model"] == "whisper-1"
    # The transcript is the message's text: the model reads it as what the owner said.
    shown = said(models.requests[0])
    assert "Remind me to water the plants at six.</msg>" in shown
    assert 'kind="voice"' in shown and 'transcribed="true"' in shown
    # Kept with the message: history (and the owner asking "what did I say?") find the words.
    [row] = [r for r in app.stores.messages.recent(f"telegram:{OWNER}") if r["direction"] == "in"]
    assert row["text"] == "Remind me to water the plants at six."


async def test_an_audio_file_with_a_caption_joins_the_caption(tmp_path, telegram, models, start_bot, endpoint):
    models.script(Reply(text="noted"))
    await start_bot(**voice_settings(endpoint))
    telegram.user_sends(OWNER, audio=("memo.ogg", speech_ogg(tmp_path, "a short memo")), caption="from the car:")
    await telegram.await_sent(OWNER, 1)
    assert "from the car:\\nRemind me to water the plants at six." in request_text(models)


async def test_a_failing_endpoint_is_a_note_and_other_chats_keep_working(
    tmp_path, telegram, models, start_bot, make_settings, endpoint
):
    release = asyncio.Event()

    async def failing(upload):
        await release.wait()
        return web.Response(status=500, text='{"error": {"message": "The server had an error"}}')

    endpoint.answer = failing
    models.responder(lambda request: Reply(text="answered"))
    settings = voice_settings(endpoint)
    write_access(make_settings(), policy="open")
    await start_bot(**settings)
    telegram.user_sends(OWNER, voice=speech_ogg(tmp_path, "hello"))
    await eventually(lambda: endpoint.uploads, "the upload")
    telegram.user_sends(STRANGER, "hi there", first_name="Bob")
    await telegram.await_sent(STRANGER, 1)  # the stalled note holds only its own chat
    assert telegram.sent_messages(OWNER) == []
    release.set()
    await telegram.await_sent(OWNER, 1)
    assert any(noted("voice_failed") in said(request) for request in models.requests)


async def test_with_no_endpoint_the_model_is_told_voice_is_off(tmp_path, telegram, models, start_bot):
    models.script(Reply(text="Voice is off here; please type it."))
    await start_bot(transcription_base_url="off", transcription_offline="off")
    telegram.user_sends(OWNER, voice=speech_ogg(tmp_path, "hello"))
    sent = await telegram.await_sent(OWNER, 1)
    assert sent[0]["text"] == "Voice is off here; please type it."
    assert noted("voice_off") in said(models.requests[0])


async def test_a_file_sent_as_audio_that_is_not_audio_is_never_uploaded(telegram, models, start_bot, endpoint):
    models.script(Reply(text="that is not a recording"))
    await start_bot(**voice_settings(endpoint))
    telegram.user_sends(OWNER, audio=("song.mp3", b"%PDF-1.7\n" + b"x" * 2048))
    await telegram.await_sent(OWNER, 1)
    assert endpoint.uploads == []
    assert noted("voice_not_audio") in said(models.requests[0])
