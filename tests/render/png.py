"""A small PNG reader for the render tests: the size from the header, and the pixels (8-bit RGB/RGBA, unfiltered)."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def size(png: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk."""
    assert png[:8] == SIGNATURE, "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def pixels(png: bytes) -> list[bytes]:
    """Each row's pixel bytes, the scanline filters undone (what Chromium writes: 8-bit RGB or RGBA, no interlace)."""
    width, height = size(png)
    bit_depth, colour_type, interlace = png[24], png[25], png[28]
    assert bit_depth == 8 and colour_type in (2, 6) and interlace == 0, (bit_depth, colour_type, interlace)
    step = 3 if colour_type == 2 else 4
    data, at = b"", 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        if kind == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    raw = zlib.decompress(data)
    stride = width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return rows


def colours(png: bytes) -> set[bytes]:
    """The distinct pixel values of the picture."""
    step = 3 if png[25] == 2 else 4
    return {row[i : i + step] for row in pixels(png) for i in range(0, len(row), step)}
