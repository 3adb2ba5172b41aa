"""`bicameral trace`: a captured session rendered as a transcript, listed, and followed while it grows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bicameral.claude_code import trace
from bicameral.claude_code.capture import WireCapture
from bicameral.cli import cli

REAL = Path(__file__).parent / "data" / "real_session.stream.jsonl"
SESSION = "502864bd-28ff-44b2-8e0b-d8ccb39fb7f9"


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A data dir holding one real captured session (plus one older, smaller one)."""
    monkeypatch.chdir(tmp_path)  # no stray .env or bicameral.toml
    for key in ("BICAMERAL_DATA_DIR",):
        monkeypatch.delenv(key, raising=False)
    data = tmp_path / "data"
    logs = data / "cc_logs"
    logs.mkdir(parents=True)
    old = WireCapture(logs, "11111111-aaaa-4bbb-8ccc-000000000000")
    old.stdout('{"type":"result","subtype":"success","is_error":false,"result":"old","session_id":"11111111"}')
    old.write_meta(label="telegram:42", pid=None)
    old.close()
    shutil.copy(REAL, logs / f"{SESSION}.stream.jsonl")
    (logs / f"{SESSION}.meta.json").write_text(json.dumps({"session_id": SESSION, "label": "telegram:1001", "pid": None}))
    monkeypatch.setenv("BICAMERAL_DATA_DIR", str(data))
    return data


def test_trace_renders_the_latest_session_as_a_transcript(data_dir):
    result = CliRunner().invoke(cli, ["trace"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"session {SESSION} (telegram:1001)"
    body = "\n".join(lines[1:])
    assert "── turn starts · model claude-sonnet-4-5" in body and "mcp bicameral: connected" in body
    assert '▶ user     <msg id="1" from="Alice"' in body and "hi there" in body
    assert '→ tool     mcp__bicameral__send_message({"text": "Hello Ada, got it"})' in body
    assert "✓ result  sent message_id=2" in body
    assert "◆ text     sent" in body
    assert "■ done     success · 0.2s" in body
    order = [body.index(s) for s in ("▶ user", "→ tool", "✓ result", "◆ text", "■ done")]
    assert order == sorted(order)


def test_trace_picks_a_session_by_prefix_and_cuts_long_blocks(data_dir):
    result = CliRunner().invoke(cli, ["trace", "--session", "1111", "--max", "10"])
    assert result.exit_code == 0, result.output
    assert "telegram:42" in result.output and "■ done     success" in result.output
    cut = CliRunner().invoke(cli, ["trace", "--session", SESSION[:8], "--max", "12"])
    assert '<msg id="1"…' in cut.output


def test_trace_lists_sessions_newest_first(data_dir):
    result = CliRunner().invoke(cli, ["trace", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 2
    assert {SESSION, "11111111-aaaa-4bbb-8ccc-000000000000"} == {line.split()[0] for line in lines}
    assert any(line.endswith("telegram:1001") for line in lines)


def test_trace_explains_what_is_missing(data_dir, tmp_path, monkeypatch):
    unknown = CliRunner().invoke(cli, ["trace", "--session", "zzz"])
    assert unknown.exit_code == 2 and "no captured session starts with 'zzz'" in unknown.output
    monkeypatch.setenv("BICAMERAL_DATA_DIR", str(tmp_path / "empty"))
    empty = CliRunner().invoke(cli, ["trace"])
    assert empty.exit_code == 2 and "no captured Claude Code sessions" in empty.output


def test_malformed_captured_lines_are_shown_not_fatal():
    assert trace.render_line("{broken", 50) == ["⚠ malformed line: {broken"]
    assert trace.render_line('{"type":"command_lifecycle"}') == []
    assert trace.render_line("") == []


def test_follow_prints_lines_as_they_are_appended(tmp_path):
    path = tmp_path / "live.stream.jsonl"
    lines = REAL.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]))
    out: list[str] = []
    offset = trace.render(path, out.append)
    assert any("turn starts" in line for line in out)
    out.clear()
    # Each poll appends half a line: the follower must wait for a line's end before rendering it.
    pending = [piece for line in lines[3:] for piece in (line[:20], line[20:])]
    polls = 0

    def sleep(_: float) -> None:
        nonlocal polls
        polls += 1
        if pending:
            with path.open("a") as handle:
                handle.write(pending.pop(0))

    trace.follow(path, out.append, offset=offset, sleep=sleep, stop=lambda: polls > 2 * len(lines) + 2)
    text = "\n".join(out)
    assert "▶ user" in text and "→ tool" in text and "■ done" in text
    assert not any("malformed" in line for line in out)
