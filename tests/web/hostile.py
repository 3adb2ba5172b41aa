"""Crafted documents that cost a reader far more than their size: a dense PDF and a gzip-in-gzip bomb."""

from __future__ import annotations

import functools
import gzip
import zlib


def pdf(page_streams: list[bytes], *, shared: bytes | None = None, pages: int = 0) -> bytes:
    """A PDF whose pages show the given content streams (Flate-compressed), with a correct cross-reference table.

    `shared` with `pages`: that many pages all drawing one stream, so the file stays small while a reader
    parses the stream once per page.
    """
    streams = [shared] if shared is not None else page_streams
    count = pages if shared is not None else len(page_streams)
    first_page, first_stream = 4, 4 + count
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i in range(count):
        stream = first_stream + (0 if shared is not None else i)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>" % stream
        )
    for content in streams:
        packed = zlib.compress(content, 9)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_page(text: str) -> bytes:
    """A content stream that shows `text` once."""
    return f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()


def dense_stream(operators: int) -> bytes:
    """A content stream of `operators` tiny text moves and empty shows: no text, but slow to extract (about 0.7 s a page)."""
    return b"BT /F1 1 Tf " + b"0.1 0 Td () Tj " * operators + b"ET"


@functools.cache
def heavy_pdf(pages: int = 200, operators: int = 20_000) -> bytes:
    """Every page draws the same dense stream: a few kilobytes that keep pypdf busy for a long time."""
    return pdf([], shared=dense_stream(operators), pages=pages)


@functools.cache
def memory_hungry_pdf() -> bytes:
    """60 KB holding one 60 MB string to show: pypdf needs several copies of it (over 512 MiB in all)."""
    return pdf([b"BT /F1 12 Tf (" + b"x" * 60_000_000 + b") Tj ET"])


def drawing_only_pdf() -> bytes:
    """One page with a filled rectangle and no text at all, as a scan without OCR would have."""
    return pdf([b"0 0 1 rg 72 72 200 200 re f"])


@functools.cache
def double_gzip_bomb(inner_bytes: int = 512 << 20) -> bytes:
    """gzip(gzip(`inner_bytes` zeros)): a few kilobytes on the wire, `inner_bytes` once both layers are undone."""
    # The fastest level for the inner layer (under a second); the outer one squeezes its repetition anyway.
    packer = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    inner = bytearray()
    for _ in range(inner_bytes // len(block)):
        inner += packer.compress(block)
    inner += packer.flush()
    return gzip.compress(bytes(inner), 9)
