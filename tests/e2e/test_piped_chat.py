"""`echo ... | bicameral chat`: the end of input finishes the turn in progress, prints it, then exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.test_process import chat_env
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow


def _chat(tmp_path, models, text: str, **extra: object) -> subprocess.CompletedProcess[str]:
    env = chat_env(tmp_path, models)
    env.update({k: str(v) for k, v in extra.items()})
    return subprocess.run(
        [sys.executable, "-m", "bicameral", "chat"],
        input=text, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90,
    )


def test_piped_input_is_answered_before_the_chat_exits(tmp_path, models):
    models.script(Reply(text="Hi! Piped and answered.", latency=1.0))
    result = _chat(tmp_path, models, "hi\n")
    assert result.returncode == 0, result.stderr
    assert "Piped and answered." in result.stdout
    assert "hi" in models.requests[0].last_user_text()
    assert "Traceback" not in result.stderr


def test_piped_lines_inside_the_debounce_window_are_answered_as_one_turn(tmp_path, models):
    models.script(Reply(text="Both lines, one answer."))
    result = _chat(tmp_path, models, "first line\nsecond line\n", BICAMERAL_DEBOUNCE_MS=5000)
    assert result.returncode == 0, result.stderr
    assert "Both lines, one answer." in result.stdout
    assert len(models.requests) == 1
    prompt = models.requests[0].last_user_text()
    assert "first line" in prompt and "second line" in prompt


def test_piped_input_in_two_chamber_mode_waits_for_the_task_result(tmp_path, models):
    models.script(
        Reply(tool_calls=[
            ToolCall("spawn", {"spec": "Check the weather.", "label": "weather"}),
            ToolCall("reply", {"text": "On it."}),
        ]),
        Reply(text="It is sunny today, says the back."),
        model="front",
    )
    models.script(Reply(text="It is sunny today.", latency=1.0), model="back")
    result = _chat(
        tmp_path, models, "what's the weather?\n",
        BICAMERAL_MODE="bicameral", BICAMERAL_FRONT_MODEL="openai:front", BICAMERAL_DELIVERY_PAUSE_SCALE=0,
    )
    assert result.returncode == 0, result.stderr
    assert "On it." in result.stdout
    assert "sunny today" in result.stdout
