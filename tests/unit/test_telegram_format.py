"""Tests for Markdown -> Telegram HTML rendering and message splitting."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bicameral.channels.telegram.format import (
    _MARKUP_RE,
    _parsed,
    _plain_paragraphs,
    html_to_plain,
    markdown_to_html,
)
from bicameral.channels.telegram.split import split_for_telegram

ALLOWED_TAGS = {"b", "i", "u", "s", "code", "pre", "a", "blockquote", "tg-spoiler"}
ALLOWED_ENTITIES = {"lt", "gt", "amp", "quot"}
TAG_RE = re.compile(
    r'</?(?:b|i|u|s|pre|blockquote|tg-spoiler)>|</?code>|<code class="language-[^"<>&]+">'
    r'|<a href="[^"<>]*">|</a>'
)


class TelegramHtmlValidator(HTMLParser):
    """Collects violations of Telegram's parse_mode=HTML rules."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        parent = self.stack[-1] if self.stack else None
        if tag not in ALLOWED_TAGS:
            self.errors.append(f"disallowed tag <{tag}>")
        if parent == "code" or (parent == "pre" and tag != "code"):
            self.errors.append(f"<{tag}> inside <{parent}>")
        if tag in ("a", "code", "pre") and "a" in self.stack:
            self.errors.append(f"<{tag}> inside <a>")
        if tag == "blockquote" and "blockquote" in self.stack:
            self.errors.append("nested blockquote")
        names = [name for name, _ in attrs]
        if tag == "a":
            if names != ["href"]:
                self.errors.append(f"bad <a> attributes {attrs}")
        elif tag == "code" and attrs:
            if parent != "pre" or names != ["class"] or not str(attrs[0][1]).startswith("language-"):
                self.errors.append(f"bad <code> attributes {attrs}")
        elif attrs:
            self.errors.append(f"<{tag}> has attributes {attrs}")
        self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> with open {self.stack}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for char in "<>&":
            if char in data:
                self.errors.append(f"raw {char!r} in text {data!r}")

    def handle_entityref(self, name: str) -> None:
        if name not in ALLOWED_ENTITIES:
            self.errors.append(f"entity &{name};")

    def handle_charref(self, name: str) -> None:
        self.errors.append(f"numeric entity &#{name};")

    def handle_comment(self, data: str) -> None:
        self.errors.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.errors.append("declaration")

    def handle_pi(self, data: str) -> None:
        self.errors.append("processing instruction")

    def unknown_decl(self, data: str) -> None:
        self.errors.append("unknown declaration")


def validation_errors(html_text: str) -> list[str]:
    """Return every way html_text breaks Telegram's HTML subset (empty when valid)."""
    validator = TelegramHtmlValidator()
    validator.feed(html_text)
    validator.close()
    errors = list(validator.errors)
    if validator.stack:
        errors.append(f"unclosed {validator.stack}")
    # Independent of html.parser's leniency: every "<" must start a known tag and every
    # "&" a known entity.
    for match in re.finditer("<", html_text):
        if not TAG_RE.match(html_text, match.start()):
            errors.append(f"stray '<' at {match.start()}: {html_text[match.start():][:30]!r}")
    for match in re.finditer("&", html_text):
        if not re.match(r"&(?:lt|gt|amp|quot);", html_text[match.start() :]):
            errors.append(f"stray '&' at {match.start()}")
    return errors


def assert_valid(html_text: str) -> None:
    assert validation_errors(html_text) == [], html_text


def test_validator_rejects_bad_html() -> None:
    assert validation_errors("<b>x</b>") == []
    assert validation_errors("<b>x") != []
    assert validation_errors("<b><i>x</b></i>") != []
    assert validation_errors("<script>x</script>") != []
    assert validation_errors("a < b") != []
    assert validation_errors("&nbsp;") != []
    assert validation_errors('<a href="x"><a href="y">z</a></a>') != []
    assert validation_errors("<code><b>x</b></code>") != []


# --- markdown_to_html: concrete examples ---------------------------------------------


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("**bold** and __also__", "<b>bold</b> and <b>also</b>"),
        ("*italic* and _also_", "<i>italic</i> and <i>also</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("||secret||", "<tg-spoiler>secret</tg-spoiler>"),
        ("use `x < y && z`", "use <code>x &lt; y &amp;&amp; z</code>"),
        ("***both***", "<i><b>both</b></i>"),
        ("a & b < c > d", "a &amp; b &lt; c &gt; d"),
        ("line one\nline two", "line one\nline two"),
    ],
)
def test_inline_formatting(md: str, expected: str) -> None:
    assert markdown_to_html(md) == expected


def test_fenced_code_with_language() -> None:
    md = '```python\nprint("<hi>" & 1)\n```'
    assert markdown_to_html(md) == (
        '<pre><code class="language-python">print("&lt;hi&gt;" &amp; 1)</code></pre>'
    )


def test_fenced_code_without_language_and_indented_code() -> None:
    assert markdown_to_html("```\nraw\n```") == "<pre>raw</pre>"
    assert markdown_to_html("    indented") == "<pre>indented</pre>"


def test_code_language_is_sanitised() -> None:
    html_text = markdown_to_html('```py"><script>\ncode\n```')
    assert_valid(html_text)
    assert "<script" not in html_text
    assert html_text.endswith(">code</code></pre>")


def test_links() -> None:
    assert markdown_to_html("[site](https://example.com/a?b=1&c=2)") == (
        '<a href="https://example.com/a?b=1&amp;c=2">site</a>'
    )
    assert markdown_to_html("<https://example.com>") == (
        '<a href="https://example.com">https://example.com</a>'
    )
    assert markdown_to_html("[**bold** link](http://x.y)") == '<a href="http://x.y"><b>bold</b> link</a>'


def test_link_attribute_quotes_are_escaped() -> None:
    html_text = markdown_to_html('[x](<http://a.b/"onmouseover="alert(1)>)')
    assert_valid(html_text)
    assert 'onmouseover="' not in html_text


@pytest.mark.parametrize(
    "md",
    [
        "[click](javascript:alert(1))",
        "[click](JavaScript:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "[click](vbscript:msgbox)",
        "[click](relative/path.md)",
    ],
)
def test_unsafe_links_become_plain_text(md: str) -> None:
    assert markdown_to_html(md) == "click"


def test_images_become_links() -> None:
    assert markdown_to_html("![a cat](https://example.com/cat.png)") == (
        '<a href="https://example.com/cat.png">a cat</a>'
    )
    assert markdown_to_html("![evil](javascript:alert(1))") == "evil"


def test_code_inside_link_is_plain() -> None:
    assert markdown_to_html("[`cmd`](https://x.y)") == '<a href="https://x.y">cmd</a>'


def test_headings_become_bold_lines() -> None:
    assert markdown_to_html("# Title\n\nBody") == "<b>Title</b>\n\nBody"
    assert markdown_to_html("### **Already** bold") == "<b>Already bold</b>"
    assert markdown_to_html("Setext\n======") == "<b>Setext</b>"


def test_lists() -> None:
    assert markdown_to_html("- one\n- two\n  - nested") == "• one\n• two\n  • nested"
    assert markdown_to_html("1. one\n2. two") == "1. one\n2. two"
    assert markdown_to_html("3. three\n4. four") == "3. three\n4. four"
    assert markdown_to_html("* **bold** item") == "• <b>bold</b> item"


def test_table_becomes_pre_block() -> None:
    md = "| Name | Qty |\n|------|----:|\n| apple | 3 |\n| kiwi <b> | 12 |"
    assert markdown_to_html(md) == (
        "<pre>Name     | Qty\n"
        "---------+----\n"
        "apple    |   3\n"
        "kiwi &lt;b&gt; |  12</pre>"
    )


def test_blockquote_and_nested_blockquote() -> None:
    assert markdown_to_html("> quoted *text*") == "<blockquote>quoted <i>text</i></blockquote>"
    html_text = markdown_to_html("> outer\n> > inner")
    assert html_text == "<blockquote>outer\n\ninner</blockquote>"


def test_horizontal_rule() -> None:
    assert markdown_to_html("above\n\n---\n\nbelow") == "above\n\n———\n\nbelow"


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("<b>raw bold</b>", "&lt;b&gt;raw bold&lt;/b&gt;"),
        ('<a href="https://evil">x</a>', '&lt;a href="https://evil"&gt;x&lt;/a&gt;'),
        ("<div>\nblock html\n</div>", "&lt;div&gt;\nblock html\n&lt;/div&gt;"),
        ("<!-- comment -->", "&lt;!-- comment --&gt;"),
    ],
)
def test_raw_html_is_escaped(md: str, expected: str) -> None:
    assert markdown_to_html(md) == expected


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("**bold", "**bold"),
        ("`code", "`code"),
        ("*a **b* c**", "<i>a b c</i>"),
        ("**bold *mixed", "**bold *mixed"),
        ("||open spoiler", "||open spoiler"),
        ("[dangling](", "[dangling]("),
        ("```\nunclosed fence", "<pre>unclosed fence</pre>"),
    ],
)
def test_unbalanced_markdown(md: str, expected: str) -> None:
    assert markdown_to_html(md) == expected


def test_entities_are_normalised() -> None:
    assert markdown_to_html("&amp; &lt; &copy; &#65;") == "&amp; &lt; © A"


def test_blank_rendering_falls_back_to_source() -> None:
    assert markdown_to_html("[ref]: https://example.com") == "[ref]: https://example.com"
    assert markdown_to_html("") == ""
    assert markdown_to_html("  \n ") == ""


def test_html_to_plain() -> None:
    html_text = markdown_to_html('**a** & <b> [x](http://a.b?c=1&d=2) `<code>` "q"')
    assert html_to_plain(html_text) == 'a & <b> x <code> "q"'
    assert html_to_plain('<a href="x">&lt;&amp;&gt;&quot;</a>') == '<&>"'


# --- markdown_to_html: properties ----------------------------------------------------

MARKDOWN_PIECES = [
    "**", "*", "_", "__", "`", "```", "```py\n", "~~", "||", "[", "]", "](", "(", ")",
    "![", "http://x.y/?a=1&b=2", "javascript:alert(1)", "data:x", "<b>", "</b>", "<script>",
    "<a href=\"x\">", "# ", "## ", "- ", "* ", "1. ", "> ", "| a | b |\n|---|---|\n", "|",
    "---", "\n", "\n\n", "    ", " ", "word", "&", "&amp;", "&#0;", "<", ">", '"', "'", "\\",
    "\t", "é", "😀", "\u202e", "<!--", "-->", "<https://a.b>", "[ref]: http://r\n", "[ref]",
]
markdownish = st.lists(
    st.one_of(st.sampled_from(MARKDOWN_PIECES), st.text(max_size=5)), max_size=60
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), markdownish))
def test_output_is_balanced_subset_html(md: str) -> None:
    assert_valid(markdown_to_html(md))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abcxyzABC,;'<&\"", min_size=1, max_size=8),
            st.sampled_from([" ", "\n", "\n\n"]),
        ),
        max_size=40,
    )
    .map(lambda pairs: "".join(word + sep for word, sep in pairs))
    # `&ac;` is not plain text but a character reference (∾), which Markdown renders as that character.
    .filter(lambda md: not re.search(r"&[A-Za-z][A-Za-z0-9]*;", md))
)
def test_plain_text_round_trip_keeps_words(md: str) -> None:
    assert html_to_plain(markdown_to_html(md)).split() == md.split()


# --- split_for_telegram ---------------------------------------------------------------


def rendered_sizes(chunks: list[str]) -> list[int]:
    return [len(markdown_to_html(chunk)) for chunk in chunks]


def test_short_message_is_one_chunk() -> None:
    assert split_for_telegram("Hello **there**") == ["Hello **there**"]


def test_empty_input_gives_no_chunks() -> None:
    assert split_for_telegram("") == []
    assert split_for_telegram(" \n\n \t\n") == []


def test_limit_too_small_is_rejected() -> None:
    with pytest.raises(ValueError):
        split_for_telegram("text", limit=4)


def make_paragraphs(count: int, length: int) -> list[str]:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    paragraphs = []
    for index in range(count):
        text, step = f"Paragraph {index}.", index
        while len(text) < length:
            step += 7
            text += " " + words[step % len(words)]
        paragraphs.append(text + ".")
    return paragraphs


def test_long_reply_splits_at_paragraph_boundaries() -> None:
    paragraphs = make_paragraphs(20, 500)
    md = "\n\n".join(paragraphs)
    assert len(md) >= 10_000
    chunks = split_for_telegram(md)
    assert len(chunks) >= 3
    assert all(size <= 4096 for size in rendered_sizes(chunks))
    for chunk in chunks:
        assert set(chunk.split("\n\n")) <= set(paragraphs)
    assert "\n\n".join(chunks) == md


def test_long_paragraph_splits_at_lines_then_sentences_then_words() -> None:
    lines = [f"Line {i} has some words in it." for i in range(40)]
    chunks = split_for_telegram("\n".join(lines), limit=200)
    assert all(set(chunk.split("\n")) <= set(lines) for chunk in chunks)

    sentences = [f"Sentence number {i} is here." for i in range(40)]
    chunks = split_for_telegram(" ".join(sentences), limit=200)
    assert all(chunk.endswith(".") for chunk in chunks)
    assert " ".join(chunks) == " ".join(sentences)

    words = " ".join(f"w{i}" for i in range(300))
    chunks = split_for_telegram(words, limit=100)
    assert all(size <= 100 for size in rendered_sizes(chunks))
    assert " ".join(chunks).split() == words.split()


def test_hard_cut_when_no_boundary() -> None:
    md = "x" * 1000
    chunks = split_for_telegram(md, limit=100)
    assert all(0 < size <= 100 for size in rendered_sizes(chunks))
    assert "".join(chunks) == md


def test_code_block_kept_whole_when_it_fits() -> None:
    code = "```python\n" + "\n".join(f"line_{i} = {i}" for i in range(10)) + "\n```"
    md = make_paragraphs(1, 300)[0] + "\n\n" + code + "\n\n" + make_paragraphs(1, 300)[0]
    chunks = split_for_telegram(md, limit=400)
    assert code in chunks


def test_long_code_block_is_closed_and_reopened() -> None:
    body = [f"value_{i} = compute({i}) < limit & flag" for i in range(100)]
    md = "Intro text.\n\n```python\n" + "\n".join(body) + "\n```\n\nOutro text."
    chunks = split_for_telegram(md, limit=500)
    assert len(chunks) > 3
    assert all(size <= 500 for size in rendered_sizes(chunks))
    code_chunks = [chunk for chunk in chunks if "value_" in chunk]
    for chunk in code_chunks:
        assert "```python\n" in chunk
        assert chunk.count("```") == 2
        assert '<code class="language-python">' in markdown_to_html(chunk)
    seen = [line for chunk in code_chunks for line in chunk.split("\n") if "value_" in line]
    assert seen == body
    assert chunks[0] == "Intro text."
    assert chunks[-1].endswith("Outro text.")


def test_long_code_line_is_hard_cut_inside_fence() -> None:
    md = "```\n" + "y" * 600 + "\n```"
    chunks = split_for_telegram(md, limit=150)
    assert all(size <= 150 for size in rendered_sizes(chunks))
    assert "".join(chunk.removeprefix("```\n").removesuffix("\n```") for chunk in chunks) == "y" * 600


def test_long_table_repeats_header() -> None:
    md = "| key | value |\n|-----|-------|\n" + "\n".join(f"| k{i} | v{i} |" for i in range(60))
    chunks = split_for_telegram(md, limit=300)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.startswith("| key | value |\n|-----|-------|\n")
        assert markdown_to_html(chunk).startswith("<pre>key")


def test_long_list_splits_between_items() -> None:
    items = [f"- item {i} with a few words" for i in range(50)]
    chunks = split_for_telegram("\n".join(items), limit=200)
    for chunk in chunks:
        assert set(chunk.split("\n")) <= set(items)


def test_crlf_input() -> None:
    md = "\r\n\r\n".join(make_paragraphs(12, 400))
    chunks = split_for_telegram(md, limit=1000)
    assert all(size <= 1000 for size in rendered_sizes(chunks))
    assert " ".join(chunks).split() == md.split()


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=600), markdownish), st.integers(min_value=16, max_value=400))
def test_split_chunks_fit_and_are_never_blank(md: str, limit: int) -> None:
    chunks = split_for_telegram(md, limit)
    for chunk in chunks:
        assert chunk.strip()
        html_text = markdown_to_html(chunk)
        assert len(html_text) <= limit
        assert_valid(html_text)
    if md.strip():
        assert chunks


prose_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789.,;!?'", min_size=1, max_size=12)
prose = st.lists(
    st.tuples(prose_word, st.sampled_from([" ", " ", " ", "\n", "\n\n"])), min_size=1, max_size=300
).map(lambda pairs: "".join(word + sep for word, sep in pairs))


@settings(max_examples=150, deadline=None)
@given(prose, st.integers(min_value=60, max_value=1500))
def test_split_preserves_words_of_prose(md: str, limit: int) -> None:
    chunks = split_for_telegram(md, limit)
    assert all(size <= limit for size in rendered_sizes(chunks))
    assert Counter("\n\n".join(chunks).split()) == Counter(md.split())


# --- plain prose skips the parser, with the parser's result ---

# Prose and the characters that sit on the edge of Markdown: line starts, spacing, punctuation.
_PROSE = st.lists(
    st.sampled_from(
        ["word", "Wort", "ok", "bench-12", " ", "  ", "   ", "    ", "\n", "\n\n", " \n", "1", "12", ".", ")", "(",
         "-", "+", "#", ">", "=", "!", ":", "?", ",", "'", '"', "é", "😀", "\u00a0", "\t", "%", "$", "@", "^", "{",
         "}", "/", "http://x.org", "a.b"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_PROSE, st.text(max_size=60)))
def test_text_the_fast_path_takes_renders_as_the_parser_renders_it(text: str) -> None:
    if not _MARKUP_RE.search(text):
        assert _plain_paragraphs(text) == _parsed(text)


@pytest.mark.parametrize(
    "text",
    ["ok bench-12", "Sure thing, see you at 5pm.\nBring snacks!", "First.\n\n\nSecond one.", "  two spaces in front",
     "x > y, and 3 + 4 = 7", "a -- b", "see http://example.org/a?b=c for more"],
)
def test_everyday_plain_replies_skip_the_parser(text: str) -> None:
    assert not _MARKUP_RE.search(text)
    assert markdown_to_html(text) == _parsed(text)


@pytest.mark.parametrize(
    "text",
    ["- item", "1. first", "# title", "> quote", "text\n===", "a *b*", "a_b_c", "`code`", "[x](y)", "a | b", "&amp;",
     "<http://x>", "    code", "line  \nbreak", "tab\there", "a\\*b", "~~gone~~", "2) second"],
)
def test_anything_that_may_be_markup_goes_to_the_parser(text: str) -> None:
    assert _MARKUP_RE.search(text)


@pytest.mark.parametrize(
    ("text", "markup"),
    [
        ("1" * 1_000_000, False),
        ("1" * 1_000_000 + ".", True),  # an ordered list's number, found after a megabyte of digits
        (" " * 1_000_000 + "x", True),  # indented code
        (("1" * 1000 + "\n") * 1000, False),
        ("a " * 500_000, False),
    ],
    ids=["digits", "digits-then-dot", "spaces", "digit-lines", "words"],
)
def test_a_megabyte_of_near_markup_is_classified_in_linear_time(text: str, markup: bool) -> None:
    # Backtracking in the markup test would hang here; it reads each character a bounded number of times.
    assert bool(_MARKUP_RE.search(text)) is markup
