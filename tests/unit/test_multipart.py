"""multipart/form-data bodies, read back with the standard library's MIME parser."""

from __future__ import annotations

from collections.abc import Iterator
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from bicameral.transport import encode_multipart

EVERY_BYTE = bytes(range(256))


def _parts(content_type: str, body: bytes) -> list[EmailMessage]:
    """The parts of a form body as a MIME parser reads it, after checking the framing raised no defect."""
    message = BytesParser(policy=policy.HTTP).parsebytes(b"Content-Type: " + content_type.encode("ascii") + b"\r\n\r\n" + body)
    assert isinstance(message, EmailMessage)
    assert message.is_multipart() and message.get_content_type() == "multipart/form-data"
    assert message.defects == []
    parts = [part for part in message.iter_parts() if isinstance(part, EmailMessage)]
    assert len(parts) == len(list(message.iter_parts()))
    for part in parts:
        assert part.defects == [] and part.get_content_disposition() == "form-data"
    return parts


def _name(part: EmailMessage) -> str | None:
    value = part.get_param("name", header="content-disposition")
    assert value is None or isinstance(value, str)
    return value


def _content(part: EmailMessage) -> bytes:
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload


def _tokens(*tokens: str) -> Iterator[str]:
    yield from tokens


def test_fields_and_files_round_trip_in_order() -> None:
    content_type, body = encode_multipart(
        {"chat_id": "42", "caption": "a report"},
        {"document": ("report.pdf", b"%PDF-1.7 ...", "application/pdf"), "thumbnail": ("t.jpg", b"\xff\xd8\xff", "image/jpeg")},
    )
    parts = _parts(content_type, body)
    assert [_name(p) for p in parts] == ["chat_id", "caption", "document", "thumbnail"]
    assert [p.get_filename() for p in parts] == [None, None, "report.pdf", "t.jpg"]
    assert [_content(p) for p in parts] == [b"42", b"a report", b"%PDF-1.7 ...", b"\xff\xd8\xff"]
    assert [p.get_content_type() for p in parts[2:]] == ["application/pdf", "image/jpeg"]
    assert all("content-type" not in p for p in parts[:2])


def test_the_wire_format_with_a_fixed_boundary() -> None:
    content_type, body = encode_multipart({"a": "1"}, {"f": ("x.txt", b"hi", "text/plain")}, token=lambda: "B0UNDARY")
    assert content_type == "multipart/form-data; boundary=B0UNDARY"
    assert body == (
        b"--B0UNDARY\r\n"
        b'Content-Disposition: form-data; name="a"\r\n'
        b"\r\n"
        b"1\r\n"
        b"--B0UNDARY\r\n"
        b'Content-Disposition: form-data; name="f"; filename="x.txt"\r\n'
        b"Content-Type: text/plain\r\n"
        b"\r\n"
        b"hi\r\n"
        b"--B0UNDARY--\r\n"
    )


def test_the_boundary_is_random_per_body() -> None:
    first, _ = encode_multipart({"a": "1"}, {})
    second, _ = encode_multipart({"a": "1"}, {})
    assert first != second
    assert len(first.partition("boundary=")[2]) >= 16


def test_binary_content_arrives_byte_for_byte() -> None:
    contents = {
        "every_byte": EVERY_BYTE * 4,
        "line_breaks": b"\r\n\r\n\n\r\r\nend\r\n",
        "starts_with_a_break": b"\r\nafter",
        "boundary_like": b"\r\n--" + b"0" * 32 + b"\r\n--" + b"f" * 32 + b"--\r\n-- \r\n--",
        "empty": b"",
    }
    files = {name: (f"{name}.bin", data, "application/octet-stream") for name, data in contents.items()}
    content_type, body = encode_multipart({}, files)
    parts = _parts(content_type, body)
    assert {_name(p): _content(p) for p in parts} == contents


def test_content_that_holds_the_drawn_boundary_gets_another_one() -> None:
    content = b"header\r\n--first\r\nContent-Disposition: form-data; name=\"forged\"\r\n\r\nx\r\n--first--\r\n"
    drawn = _tokens("first", "second")
    content_type, body = encode_multipart({"caption": "--first"}, {"f": ("f.txt", content, "text/plain")}, token=drawn.__next__)
    assert content_type == "multipart/form-data; boundary=second"
    parts = _parts(content_type, body)
    assert [(_name(p), _content(p)) for p in parts] == [("caption", b"--first"), ("f", content)]


def test_field_values_are_utf8_with_their_line_breaks_kept() -> None:
    content_type, body = encode_multipart({"text": "naïve 🚀\r\nsecond line\n"}, {})
    [part] = _parts(content_type, body)
    assert _content(part).decode("utf-8") == "naïve 🚀\r\nsecond line\n"


def test_an_empty_field_value_is_an_empty_part() -> None:
    content_type, body = encode_multipart({"empty": "", "next": "x"}, {})
    assert [(_name(p), _content(p)) for p in _parts(content_type, body)] == [("empty", b""), ("next", b"x")]


def test_hostile_filenames_cannot_break_the_framing() -> None:
    hostile = {
        "quote": 'a".txt',
        "injected_param": 'x"; name="other',
        "injected_header": "evil.txt\r\nContent-Type: text/html\r\n\r\n<script>",
        "lone_line_feed": "one\ntwo",
        "lone_carriage_return": "one\rtwo",
        "injected_part": "x\r\n--B0UNDARY\r\nContent-Disposition: form-data; name=\"forged\"\r\n\r\nforged",
    }
    files = {name: (filename, name.encode(), "text/plain") for name, filename in hostile.items()}
    content_type, body = encode_multipart({}, files, token=lambda: "B0UNDARY")
    parts = _parts(content_type, body)
    assert [_name(p) for p in parts] == list(hostile)
    assert [_content(p) for p in parts] == [name.encode() for name in hostile]
    assert all(p.get_content_type() == "text/plain" for p in parts)
    expected = [f.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A") for f in hostile.values()]
    assert [p.get_filename() for p in parts] == expected


def test_hostile_field_and_file_names_are_escaped_the_same_way() -> None:
    content_type, body = encode_multipart({'a"b\r\nc': "v"}, {'d"e\nf': ("g", b"w", "text/plain")})
    assert [(_name(p), _content(p)) for p in _parts(content_type, body)] == [("a%22b%0D%0Ac", b"v"), ("d%22e%0Af", b"w")]


def test_a_line_break_in_a_mime_type_cannot_add_a_header() -> None:
    content_type, body = encode_multipart({}, {"f": ("f.txt", b"x", "text/plain\r\nX-Injected: yes")}, token=lambda: "B0UNDARY")
    [part] = _parts(content_type, body)
    assert "x-injected" not in part and _content(part) == b"x"


def test_non_ascii_filenames_travel_as_utf8_as_browsers_send_them() -> None:
    content_type, body = encode_multipart({}, {"document": ("отчёт 2024 — final.pdf", b"%PDF", "application/pdf")})
    assert "отчёт 2024 — final.pdf".encode() in body
    [part] = _parts(content_type, body)
    assert part.get_filename() == "отчёт 2024 — final.pdf"


def test_no_fields_and_no_files_is_a_closed_empty_body() -> None:
    content_type, body = encode_multipart({}, {}, token=lambda: "B0UNDARY")
    assert (content_type, body) == ("multipart/form-data; boundary=B0UNDARY", b"--B0UNDARY--\r\n")
