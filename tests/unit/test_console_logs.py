"""/logs' reading: N from the command, the file read backwards and bounded, entries made compact, redacted again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bicameral.console import logs
from bicameral.console.logs import LogSource, compact, last_lines, line_count, logs_text
from bicameral.redaction import Redactor

TOKEN = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789"


def entry(msg: str, *, ts: str = "2030-01-02T10:11:12.345+00:00", level: str = "INFO", component: str = "gate",
          exc: str | None = None) -> str:
    line = {"ts": ts, "level": level, "component": component, "logger": f"bicameral.{component}", "msg": msg}
    if exc is not None:
        line["exc"] = exc
    return json.dumps(line)


@pytest.mark.parametrize(
    ("argument", "wanted"),
    [
        ("", (20, False)),
        ("  ", (20, False)),
        ("5", (5, False)),
        ("200", (200, False)),
        ("201", (200, True)),
        ("99999", (200, True)),
        ("9" * 5000, (200, True)),  # read as "too many", never handed to int()
        ("abc", None),
        ("-5", None),
        ("0", None),
        ("5 lines", None),
        ("2.5", None),
        ("５", None),  # a full-width digit: not a count anyone typed on purpose
    ],
)
def test_the_count_after_logs(argument: str, wanted: tuple[int, bool] | None) -> None:
    assert line_count(argument) == wanted


def test_an_entry_is_one_compact_line() -> None:
    day, text = compact(entry("access policy\nloaded:   owner_only"), str)
    assert day == "2030-01-02"
    assert text == "10:11:12 INFO gate: access policy loaded: owner_only"


def test_an_entry_with_a_traceback_shows_only_its_last_line() -> None:
    exc = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad value"
    _, text = compact(entry("send failed", level="ERROR", exc=exc), str)
    assert text == "10:11:12 ERROR gate: send failed [ValueError: bad value]"


def test_a_line_that_is_not_json_is_shown_as_it_is_redacted_and_cut() -> None:
    redact = Redactor([TOKEN])
    day, text = compact(f"plain text with {TOKEN} " + "x" * 1000, redact)
    assert day is None
    assert TOKEN not in text and "[REDACTED:secret]" in text
    assert len(text) == logs.LINE_CHARS and text.endswith("…")


def test_a_secret_is_redacted_before_the_line_is_cut() -> None:
    """Cut first, a secret straddling the cut would show its first half unredacted."""
    padding = "x" * (logs.LINE_CHARS - 30)
    _, text = compact(entry(f"{padding} {TOKEN}"), Redactor([TOKEN]))
    assert TOKEN[:10] not in text


def test_only_the_end_of_a_big_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bicameral.log"
    path.write_text("".join(entry(f"line {i}") + "\n" for i in range(50_000)), encoding="utf-8")
    read: list[int] = []
    opened = Path.open

    def counting(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        file = opened(self, *args, **kwargs)  # type: ignore[call-overload]
        real_read = file.read

        def reading(size: int = -1) -> bytes:
            data = real_read(size)
            read.append(len(data))
            return data

        file.read = reading
        return file

    monkeypatch.setattr(Path, "open", counting)
    lines = last_lines(path, 3)
    assert [json.loads(line)["msg"] for line in lines] == ["line 49997", "line 49998", "line 49999"]
    assert sum(read) <= 64 << 10  # one block from the end of a file of several MB
    assert path.stat().st_size > 4 << 20 > sum(read)


def test_reading_stops_at_the_byte_bound_even_without_enough_lines(tmp_path: Path) -> None:
    path = tmp_path / "bicameral.log"
    path.write_bytes(b"a" * 300_000 + b"\n" + b"b" * 10 + b"\n")
    assert logs._tail(path, 5, max_bytes=100_000) == ["b" * 10]  # the cut line at the bound is not shown


def test_a_partly_written_last_line_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "bicameral.log"
    path.write_text(entry("one") + "\n\n" + entry("two") + "\n" + '{"ts": "2030-01-02T10:1', encoding="utf-8")
    lines = last_lines(path, 3)
    assert len(lines) == 3 and lines[-1] == '{"ts": "2030-01-02T10:1'


def test_the_day_before_is_read_when_today_holds_fewer_lines(tmp_path: Path) -> None:
    (tmp_path / "bicameral.log.2030-01-01").write_text(
        "".join(entry(f"old {i}", ts=f"2030-01-01T23:59:0{i}.000+00:00") + "\n" for i in range(5)), encoding="utf-8"
    )
    (tmp_path / "bicameral.log.2029-12-31").write_text(entry("older") + "\n", encoding="utf-8")
    (tmp_path / "bicameral.log").write_text(entry("new", ts="2030-01-02T00:00:01.000+00:00") + "\n", encoding="utf-8")
    text = logs_text(LogSource(tmp_path / "bicameral.log", str), 3)
    assert text.splitlines() == [
        "The log's last 3 lines (times UTC):",
        "```",
        "-- 2030-01-01 --",
        "23:59:03 INFO gate: old 3",
        "23:59:04 INFO gate: old 4",
        "-- 2030-01-02 --",
        "00:00:01 INFO gate: new",
        "```",
    ]


def test_the_answer_is_redacted_fenced_once_and_fits(tmp_path: Path) -> None:
    path = tmp_path / "bicameral.log"
    lines = [entry(f"step {i} " + "y" * 200) for i in range(200)]
    lines.append(entry(f"token {TOKEN} and a fence ``` inside"))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = logs_text(LogSource(path, Redactor([TOKEN])), 200, clamped=True)
    assert TOKEN not in text and "token [REDACTED:secret] and a fence ''' inside" in text
    assert text.count("```") == 2
    assert len(text) <= logs.TEXT_CHARS + 200
    head = text.splitlines()[0]
    assert head.startswith("The log's last 200 lines (times UTC); 200 is the most I send; the ")
    assert "oldest left out to fit" in head
    assert "step 199" in text and "step 0 " not in text  # the newest kept, the oldest dropped


def test_no_file_and_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "bicameral.log"
    assert logs_text(LogSource(path, str), 20) == "The log (bicameral.log) has not been written yet."
    path.write_text("\n\n", encoding="utf-8")
    assert logs_text(LogSource(path, str), 20) == "The log (bicameral.log) is empty."
