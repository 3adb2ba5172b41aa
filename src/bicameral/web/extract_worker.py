"""The extraction child: `python -m bicameral.web.extract_worker --cpu-seconds ...`; documents in on stdin, text out.

pypdf, trafilatura, python-docx, openpyxl and python-pptx have no work or memory limits of their own, so a hostile
file can keep them busy for minutes. Here they run in a process of their own that limits itself before it reads a
byte, and that the parent can kill. It imports only what it parses with, never the app.

A child stays warm between documents (importing trafilatura costs half a second of CPU; reading a page,
milliseconds): it reads one job at a time, `KIND SIZE\\n` and SIZE bytes, and answers `STATUS SIZE\\n` and
SIZE bytes, where STATUS is `ok` (the text), `unreadable` (why, for the log), `oom`, or a refusal made before
any parser ran: `bomb` (an archive that unpacks far beyond its size) or `unsupported`. Each job gets its
own CPU allowance: the soft CPU limit is moved to what the process has used so far plus the allowance, so
a document that needs more ends the process with SIGXCPU. At the end of stdin it exits.

Web pages are `pdf` and `html`, read here; the kinds of files people send (`extract_formats.KINDS`) are read by
`extract_formats`, imported on the first of them.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import resource
import sys
from typing import BinaryIO

# Exit statuses the parent reads (a limit crossed shows up as a signal instead).
UNREADABLE = 3
OUT_OF_MEMORY = 4
KINDS = ("pdf", "html", "pdf-pages", "html-doc", "office", "csv", "json")  # the last five: extract_formats
# Lower than the assistant's, so a busy reader yields the core to the turns being answered.
_NICENESS = 10
_HEADER_BYTES = 64


def main(argv: list[str] | None = None) -> int:
    """Limit this process, then answer documents from stdin until it ends."""
    parser = argparse.ArgumentParser(prog="python -m bicameral.web.extract_worker")
    parser.add_argument("--cpu-seconds", type=int, required=True)
    parser.add_argument("--memory-bytes", type=int, required=True)
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("--max-chars", type=int, required=True)
    args = parser.parse_args(argv)
    _limit(args.memory_bytes)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while job := _job(source):
        kind, data = job
        _allow_cpu(args.cpu_seconds)
        try:
            text = _read(kind, data, args.max_pages, args.max_chars)
        except MemoryError:
            _answer(sink, "oom", b"")
            return OUT_OF_MEMORY  # the heap may be left in pieces: a fresh child reads the next one
        except Exception as exc:  # any parser failure on a hostile file is "unreadable", named for the log
            # extract_formats.Refused carries its own status: a check refused the file before a parser ran.
            status = getattr(exc, "refusal", None) or "unreadable"
            _answer(sink, status, f"{type(exc).__name__}: {str(exc)[:200]}".encode("utf-8", "replace"))
            continue
        _answer(sink, "ok", text[: args.max_chars].encode("utf-8", "replace"))
    return 0


def _read(kind: str, data: bytes, max_pages: int, max_chars: int) -> str:
    """The text of one document: a web page here, a sent file's kind by `extract_formats` (loaded on first use)."""
    if kind == "pdf":
        return pdf_text(data, max_pages, max_chars)
    if kind == "html":
        return html_text(data)
    from bicameral.web import extract_formats

    return extract_formats.read(kind, data, extract_formats.Caps(max_pages=max_pages, max_chars=max_chars))


def _job(source: BinaryIO) -> tuple[str, bytes] | None:
    """The next document, or None at the end of input (or on a header that is not ours)."""
    header = source.readline(_HEADER_BYTES).split()
    if len(header) != 2 or header[0].decode("ascii", "replace") not in KINDS or not header[1].isdigit():
        return None
    size = int(header[1])
    data = source.read(size)
    return (header[0].decode("ascii"), data) if len(data) == size else None


def _answer(sink: BinaryIO, status: str, payload: bytes) -> None:
    sink.write(f"{status} {len(payload)}\n".encode("ascii") + payload)
    sink.flush()


def _limit(memory_bytes: int) -> None:
    """Address space, no core file, low priority: for the life of the process."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(_NICENESS)


def _allow_cpu(seconds: int) -> None:
    """SIGXCPU once this job has used `seconds` of CPU on top of what the process used before it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def pdf_text(data: bytes, max_pages: int, max_chars: int) -> str:
    """The text of the first `max_pages` pages, stopping once `max_chars` are in hand."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    parts: list[str] = []
    total = 0
    for page in reader.pages[:max_pages]:
        part = page.extract_text() or ""
        parts.append(part)
        total += len(part) + 2
        if total >= max_chars:
            break
    return "\n\n".join(parts)


def html_text(data: bytes) -> str:
    """The page's main text as Markdown (trafilatura), without the site's chrome or comments."""
    import trafilatura

    return trafilatura.extract(data, output_format="markdown", include_comments=False) or ""


if __name__ == "__main__":
    sys.exit(main())
