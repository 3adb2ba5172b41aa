"""A scripted stand-in for `claude` speaking stream-json, for edge cases the real CLI cannot be made to produce."""

from __future__ import annotations

import sys
from pathlib import Path

_SCRIPT = r'''#!{python}
import json, sys, uuid

SCENARIO = {scenario!r}
SESSION = sys.argv[sys.argv.index("--resume") + 1] if "--resume" in sys.argv else sys.argv[sys.argv.index("--session-id") + 1]


def emit(obj):
    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
    sys.stdout.flush()


def text(words, synthetic=False):
    model = "<synthetic>" if synthetic else "fake"
    emit({{"type": "assistant", "session_id": SESSION, "parent_tool_use_id": None,
          "message": {{"model": model, "content": [{{"type": "text", "text": words}}]}}}})


def result(words, is_error=False):
    emit({{"type": "result", "subtype": "success", "is_error": is_error, "result": words, "session_id": SESSION,
          "duration_ms": 5, "num_turns": 1}})


for raw in sys.stdin:
    message = json.loads(raw)
    if message.get("type") != "user":
        continue
    emit({{"type": "system", "subtype": "init", "session_id": SESSION, "tools": [], "mcp_servers": []}})
    emit({{"type": "user", "isReplay": True, "uuid": message["uuid"], "session_id": SESSION, "message": message["message"]}})
    if SCENARIO == "garbage":
        emit("this is not json")
        emit('{{"type": "assistant", "message": ')
        emit("[1, 2, 3]")
        emit({{"type": "command_lifecycle", "state": "started"}})
        text("hello through the noise")
        result("hello through the noise")
    elif SCENARIO == "asks":
        emit({{
            "type": "control_request",
            "request_id": "req_fake_1",
            "request": {{"subtype": "can_use_tool", "tool_name": "Bash"}},
        }})
        answer = json.loads(sys.stdin.readline())
        text("the host said " + answer["response"]["subtype"])
        result("done")
    elif SCENARIO == "synthetic-auth":
        text("Invalid API key · Please run /login", synthetic=True)
        result("Invalid API key · Please run /login")
'''


def write_fake_cli(path: Path, scenario: str) -> Path:
    """An executable fake CLI at `path` that plays `scenario` for every user message."""
    path.write_text(_SCRIPT.format(python=sys.executable, scenario=scenario))
    path.chmod(0o755)
    return path
