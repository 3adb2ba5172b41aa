"""What reaches the log file: secrets redacted in messages and in tracebacks alike."""

from __future__ import annotations

import logging
from pathlib import Path

from bicameral.observe.logs import setup_logging

SECRET = "configured-secret-value-123"
PASTED = "sk-ant-api03-" + "x" * 40


def test_a_traceback_is_redacted_like_the_message(tmp_path: Path) -> None:
    setup_logging("INFO", tmp_path, [SECRET], console=False)
    log = logging.getLogger("bicameral.test")
    try:
        try:
            raise ValueError(f"request failed with key {SECRET} and {PASTED}")
        except ValueError:
            log.exception("call failed for %s", SECRET)
    finally:
        for handler in logging.getLogger().handlers:
            handler.flush()
        setup_logging("WARNING", None, [], console=False)  # leave no file handler behind
    written = (tmp_path / "bicameral.log").read_text(encoding="utf-8")
    assert "ValueError" in written and "call failed for" in written
    assert SECRET not in written and PASTED not in written
    assert "[REDACTED:secret]" in written and "[REDACTED:anthropic_key]" in written
