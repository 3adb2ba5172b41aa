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


def test_the_console_and_the_file_both_get_the_redacted_record_redacted_once(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from bicameral.observe import logs

    calls: list[str] = []
    original = logs.Redactor.__call__

    def counting(self: logs.Redactor, text: str) -> str:
        calls.append(text)
        return original(self, text)

    monkeypatch.setattr(logs.Redactor, "__call__", counting)
    setup_logging("INFO", tmp_path, [SECRET], console=True)
    try:
        logging.getLogger("bicameral.test").info("token is %s", SECRET)
    finally:
        for handler in logging.getLogger().handlers:
            handler.flush()
        setup_logging("WARNING", None, [], console=False)
    console = capsys.readouterr().err
    written = (tmp_path / "bicameral.log").read_text(encoding="utf-8")
    assert "token is [REDACTED:secret]" in console and "token is [REDACTED:secret]" in written
    assert SECRET not in console + written
    assert calls == [f"token is {SECRET}"]


def test_records_skip_what_no_format_shows_the_caller_thread_and_process(tmp_path: Path) -> None:
    seen: list[logging.LogRecord] = []
    setup_logging("INFO", tmp_path, [], console=False)
    grab = logging.Handler()
    grab.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(grab)
    try:
        logging.getLogger("bicameral.test").info("hello")
    finally:
        logging.getLogger().removeHandler(grab)
        setup_logging("WARNING", None, [], console=False)
    [record] = seen
    assert (record.funcName, record.lineno) == ("(unknown function)", 0)  # no frame was looked up
    assert record.threadName is None and record.processName is None
