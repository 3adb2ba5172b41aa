"""The extraction child: `python -m bicameral.web.extract_worker KIND ...`; a document on stdin, its text on stdout.

pypdf and trafilatura have no work or memory limits of their own, so a hostile file can keep them busy for
minutes. Here they run in a process of their own that limits itself before it reads a byte, and that the
parent can kill. It imports only what it parses with, never the app.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import sys

# Exit statuses the parent reads (a limit crossed shows up as a signal instead).
UNREADABLE = 3
OUT_OF_MEMORY = 4
# Lower than the assistant's, so a busy reader yields the core to the turns being answered.
_NICENESS = 10


def main(argv: list[str] | None = None) -> int:
    """Limit this process, read the document from stdin, write its text (capped) to stdout."""
    parser = argparse.ArgumentParser(prog="python -m bicameral.web.extract_worker")
    parser.add_argument("kind", choices=("pdf", "html"))
    parser.add_argument("--cpu-seconds", type=int, required=True)
    parser.add_argument("--memory-bytes", type=int, required=True)
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("--max-chars", type=int, required=True)
    args = parser.parse_args(argv)
    _limit(args.cpu_seconds, args.memory_bytes)
    data = sys.stdin.buffer.read()
    try:
        if args.kind == "pdf":
            text = pdf_text(data, args.max_pages, args.max_chars)
        else:
            text = html_text(data)
    except MemoryError:
        return OUT_OF_MEMORY
    except Exception as exc:  # any parser failure on a hostile file is "unreadable", named for the log
        print(type(exc).__name__, str(exc)[:200], file=sys.stderr)
        return UNREADABLE
    sys.stdout.buffer.write(text[: args.max_chars].encode("utf-8", "replace"))
    return 0


def _limit(cpu_seconds: int, memory_bytes: int) -> None:
    """CPU time (SIGXCPU at the soft limit, SIGKILL a second later), address space, no core file, low priority."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(_NICENESS)


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
