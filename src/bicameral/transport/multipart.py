"""multipart/form-data bodies for file uploads, framed so no name, filename or content can break out."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping

# What browsers do to a name or filename inside its quotes (the HTML form-data encoding algorithm).
_QUOTED_ESCAPES = str.maketrans({'"': "%22", "\r": "%0D", "\n": "%0A"})
_LINE_BREAK_ESCAPES = str.maketrans({"\r": "%0D", "\n": "%0A"})


def encode_multipart(
    fields: Mapping[str, str],
    files: Mapping[str, tuple[str, bytes, str]],
    *,
    token: Callable[[], str] = lambda: secrets.token_hex(16),
) -> tuple[str, bytes]:
    """(Content-Type value, body) for text fields and files given as name -> (filename, content, mime type)."""
    parts = [(_disposition(name), value.encode("utf-8")) for name, value in fields.items()]
    parts += [(_file_head(name, filename, mime_type), content) for name, (filename, content, mime_type) in files.items()]
    boundary = token()
    # A random boundary cannot be guessed by whoever wrote a file, but one the content happens to hold is redrawn.
    while any(b"--" + boundary.encode("ascii") in content for _, content in parts):
        boundary = token()
    delimiter = b"--" + boundary.encode("ascii")
    body = b"".join(delimiter + b"\r\n" + head + b"\r\n\r\n" + content + b"\r\n" for head, content in parts)
    return f"multipart/form-data; boundary={boundary}", body + delimiter + b"--\r\n"


def _file_head(name: str, filename: str, mime_type: str) -> bytes:
    """The header lines of one file part; a line break in the mime type cannot start a header of its own."""
    return _disposition(name, filename) + b"\r\nContent-Type: " + mime_type.translate(_LINE_BREAK_ESCAPES).encode("utf-8")


def _disposition(name: str, filename: str | None = None) -> bytes:
    """The Content-Disposition line of one part, its name and filename quoted safely."""
    line = f'Content-Disposition: form-data; name="{name.translate(_QUOTED_ESCAPES)}"'
    if filename is not None:
        line += f'; filename="{filename.translate(_QUOTED_ESCAPES)}"'
    return line.encode("utf-8")
