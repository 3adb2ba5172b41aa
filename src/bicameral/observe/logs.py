"""Logging setup: readable lines on the console, JSON lines in a daily-rotated file, secrets redacted."""

from __future__ import annotations

import json
import logging
import logging.handlers
from datetime import UTC, datetime
from pathlib import Path

from bicameral.errors import ConfigError
from bicameral.redaction import Redactor

_NOISY = ("httpx", "httpx2", "httpcore", "telegram", "nio", "aiohttp.access", "mcp", "uvicorn.access")
_FORMAT = "%(asctime)s %(levelname)-5s %(name)-16s %(message)s"


class RedactingFilter(logging.Filter):
    """Replaces configured secrets and anything that looks like a credential in every record."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._redact = Redactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        # Each handler carries this filter, and both see the same record: redact it once.
        if getattr(record, "_redacted", False):
            return True
        record._redacted = True
        record.msg, record.args = self._redact(record.getMessage()), ()
        if record.exc_info and not record.exc_text:
            # A traceback quotes whatever the failing code held (a request, a path, a key): redact it too.
            record.exc_text = self._redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "component": record.name.split(".")[1] if record.name.startswith("bicameral.") else record.name,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_text:
            entry["exc"] = record.exc_text  # already redacted by the filter
        elif record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(
    level: str, logs_dir: Path | None, secrets: list[str], *, keep_days: int = 7, console: bool = True
) -> None:
    """Install the console and file handlers on the root logger (idempotent)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_bicameral", False):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    # Neither format shows where a call was made, nor from which thread or process: gathering that for every
    # record (the logging HOWTO's "Optimization" switches) was about 9 of 43 us a record.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    redact = RedactingFilter(secrets)
    handlers: list[logging.Handler] = []
    if console:
        stream = logging.StreamHandler()
        stream.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
        handlers.append(stream)
    if logs_dir is not None:
        try:
            logs_dir.mkdir(parents=True, exist_ok=True)
            rotating = logging.handlers.TimedRotatingFileHandler(
                logs_dir / "bicameral.log", when="midnight", backupCount=keep_days, encoding="utf-8", utc=True
            )
        except OSError as exc:
            raise ConfigError(
                f"the logs dir {logs_dir} cannot be written ({exc.strerror}): "
                "make the data dir writable or set BICAMERAL_DATA_DIR"
            ) from None
        rotating.setFormatter(JsonFormatter())
        handlers.append(rotating)
    for handler in handlers:
        handler.addFilter(redact)
        handler._bicameral = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    for name in _NOISY:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
