"""The offline triage's rules: a few English requests recognised without a model.

`triage(text)` names what a message asks for, or None. Precision comes before recall: a message that
merely mentions remembering ("I remember when …", "remind me what a monad is") must not trigger, so each
rule asks for a request's whole shape, anchored at the start of the message, and a doubtful message is
left to the model. The phrasings these rules are measured on are in bench/data/offline_intents.jsonl
(`python -m bench --only offline`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from bicameral.offline.when import REPEATING, TAIL_TIME, TIME


@dataclass(frozen=True)
class Remember:
    """"remember that …", "note: …": keep `fact`, in the person's words."""

    fact: str


@dataclass(frozen=True)
class Remind:
    """"remind me tomorrow at 9 to …": `what` at the time `when` names (None: no time was said)."""

    what: str
    when: str | None
    repeating: bool = False  # "every day …": offline reminders are one-off


@dataclass(frozen=True)
class Fetch:
    """A page and a request to read it ("what does example.com say", "summarise https://…")."""

    url: str


@dataclass(frozen=True)
class Recall:
    """A question about what was noted; `query` "" means everything.

    `sure`: the message asks about memory outright ("what did I tell you about …", "do you remember …"), so
    "nothing noted" is the answer; otherwise ("what is my …") it may be a question for the model, which gets
    it when no note answers it.
    """

    query: str
    sure: bool = True


Intent = Remember | Remind | Fetch | Recall

_I = re.IGNORECASE
# What may come before a request: a greeting, "please", "can you", "I want you to".
_PREFIX = (
    r"(?:(?:hey|hi|hello|ok|okay|so|oh|and|also|btw)\b[,!]?\s+)?"
    r"(?:(?:please|pls|plz|kindly)\s+)?"
    r"(?P<ask>(?:can|could|would|will)\s+you\s+(?:please\s+|pls\s+)?)?"
    r"(?:i\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\s+)?"
)
_END = r"[\s.!?]*$"

# --- remember ---
_NOTE_THAT = (
    r"(?:remember|note|note\s+down|make\s+a\s+note|take\s+a\s+note|keep\s+a\s+note|write\s+down|jot\s+down"
    r"|keep\s+in\s+mind|bear\s+in\s+mind|don'?t\s+forget|do\s+not\s+forget)"
)
_NOTE_COLON = (
    r"(?:remember|note|note\s+down|make\s+a\s+note|take\s+a\s+note|keep\s+a\s+note|note\s+to\s+self|save|store"
    r"|memori[sz]e|write\s+down|jot\s+down)(?:\s+(?:this|that|the\s+following))?"
)
_FIRST_PERSON = r"(?:my|i|i'm|i've|i'd|i\s+am|our|we|we're|we've|mine)\b"
# A bare "remember my …" is a fact to keep only when it says something: "remember my locker code?" is a question.
_SAYS = re.compile(
    r"\b(?:is|are|was|were|am|'m|'re|'ve|have|has|had|like|likes|love|loves|hate|hates|prefer|prefers|live|lives"
    r"|work|works|use|uses|need|needs|want|wants|eat|eats|drink|drinks|don't|doesn't|can't|never|always|moved"
    r"|born|own|owns|drive|drives|take|takes|go|goes|called|named)\b",
    _I,
)
_REMEMBER = [
    re.compile(rf"^{_PREFIX}{_NOTE_THAT}\s+that\s+(?P<fact>.+)$", _I),
    re.compile(rf"^{_PREFIX}{_NOTE_COLON}\s*:\s*(?P<fact>.+)$", _I),
    re.compile(rf"^{_PREFIX}(?:remember|note|keep\s+in\s+mind)\s*,?\s+(?P<fact>{_FIRST_PERSON}.+)$", _I),
    re.compile(rf"^{_PREFIX}remember\s+(?P<fact>[^:?]{{3,80}}:\s*\S.*)$", _I),
    re.compile(r"^for\s+(?:future\s+)?reference\s*[,:]\s*(?P<fact>.+)$", _I),
]
# "remember that time we …" is nostalgia, not a note.
_NOT_A_FACT = re.compile(r"^(?:time|times|day|days|night|one|guy|girl|place|song|movie|film|moment|summer|winter)\b", _I)

# --- remind ---
_REMIND = re.compile(
    rf"^{_PREFIX}(?:remind\s+(?:me|us)|set\s+(?:me\s+)?(?:a|an)\s+(?:reminder|alarm)|(?:create|add)\s+a\s+reminder)"
    r"\b\s*(?P<rest>.*)$",
    _I,
)
# "remind me what a monad is", "remind me of …", "remind me again, …": a question, not a reminder.
_REMIND_QUESTION = re.compile(r"^(?:again\b\s*,?\s*)?(?:what|who|whom|whose|why|how|which|where|when|of|if|whether)\b", _I)
# The time patterns are large (40 ms to compile): made with the first reminder, not at start.
_REMIND_LEAD = rf"^(?P<time>{TIME})\s*(?:,\s*)?(?:(?:to|that|about)\s+|:\s*)(?P<what>.+)$"
_REMIND_BODY = re.compile(r"^(?:(?:to|that|about)\s+|:\s*)(?P<what>.+)$", _I)
_REMIND_REPEATING = re.compile(r"\b(?:to|that|about)\s+(?P<what>.+)$", _I)
_REMIND_TAIL = rf"^(?P<what>.+?)\s*,?\s+(?P<time>{TAIL_TIME})$"

# --- fetch ---
_TLDS = (
    "com|net|org|io|dev|app|co|uk|de|fr|nl|eu|edu|gov|info|ai|me|tv|news|blog|xyz|ca|au|ch|se|es|it|jp|us|in|fm"
    "|gg|be|at|dk|fi|no|pl|pt|cz|ie|nz|page|site|tech|online|wiki|ly|to|cc|br|mx|kr|ru|ua|za|gr|hu|ro|sk|si|lt"
)
_URL = re.compile(
    r"(?<![@\w.-])(?:https?://[^\s<>\"'`]+"
    rf"|(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{_TLDS})(?![\w-])(?:/[^\s<>\"'`]*)?)",
    _I,
)
_URL_TRAILING = ".,;:!?)]}'\""
_READ_IT = [
    re.compile(r"\b(?:summari[sz]e|summary|sum\s+up|tl;?\s*dr|gist|digest)\b", _I),
    re.compile(r"\bwhat\b.{0,40}?\bsays?\b", _I),
    re.compile(r"\bwhat(?:'s|\s+is)\b(?:\s+(?:this|that|the)(?:\s+(?:link|page|site|article))?)?\s*(?:<url>\s*)?about\b", _I),
    re.compile(r"\bwhat(?:'s|\s+is)\s+on\s+(?:the\s+front\s+page\s+of\s+)?<url>", _I),
    re.compile(
        r"\b(?:read|open|fetch|check\s+out|look\s+at)\s+(?:(?:this|that|the)(?:\s+(?:link|page|site))?\s*:?\s*)?<url>", _I
    ),
]

# --- recall ---
_TELL = r"(?:tell|told|say|said|mention|mentioned|give|gave)"
_RECALL_SURE = [
    re.compile(rf"^{_PREFIX}what\s+(?:did|have)\s+i\s+ask(?:ed)?\s+you\s+to\s+(?:remember|note|keep)\b.*$", _I),
    re.compile(rf"^{_PREFIX}what\s+(?:did|have)\s+i\s+{_TELL}\s+(?:to\s+)?(?:you\s+)?(?:about\s+)?(?P<q>.*)$", _I),
    re.compile(rf"^{_PREFIX}did\s+i\s+{_TELL}\s+(?:to\s+)?(?:you\s+)?(?:anything\s+)?about\s+(?P<q>.+)$", _I),
    re.compile(rf"^{_PREFIX}do\s+you\s+(?:still\s+)?(?:remember|recall)\s+(?P<q>.+)$", _I),
    re.compile(
        rf"^{_PREFIX}what\s+do\s+you\s+(?:remember|recall|have\s+noted|have\s+on\s+file)(?:\s+about\s+(?P<q>.+?))?{_END}", _I
    ),
    re.compile(
        rf"^{_PREFIX}(?:what\s+do\s+you\s+know|tell\s+me\s+what\s+you\s+know)\s+about"
        r"\s+(?P<q>(?:me|myself|us)\b.*|(?:my|our)\s+.+)$",
        _I,
    ),
    re.compile(rf"^{_PREFIX}remind\s+me\s+what\s+(?P<q>(?:my|our|i|i've|we|we've)\b.+)$", _I),
    re.compile(rf"^{_PREFIX}(?:show|list|read|give)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:my|your|the)\s+notes{_END}", _I),
    re.compile(rf"^{_PREFIX}what(?:'s|\s+is|\s+are)\s+in\s+(?:my|your)\s+notes{_END}|^what\s+are\s+my\s+notes{_END}", _I),
    re.compile(rf"^{_PREFIX}what\s+have\s+you\s+noted(?:\s+about\s+(?P<q>.+?))?{_END}", _I),
    re.compile(rf"^{_PREFIX}what\s+(?:was|were|is|are|'s)\s+(?P<q>(?:the|my|our)\s+.+?)\s+again{_END}", _I),
]
_RECALL_MAYBE = [
    re.compile(
        rf"^{_PREFIX}(?:what|who|when|where|which)\s*(?:'s|'re|\s+is|\s+are|\s+was|\s+were)\s+(?P<q>(?:my|our)\s+.+)$", _I
    ),
    re.compile(rf"^{_PREFIX}what(?:'s|\s+is|\s+was)\s+the\s+(?P<q>\w+\s+of\s+(?:my|our)\s+.+)$", _I),
    re.compile(rf"^{_PREFIX}where\s+did\s+(?:i|we)\s+(?:(?:put|leave|hide|store)\s+(?P<q>.+)|(?P<verb>park)\b.*)$", _I),
]
# "do you remember things I tell you?" asks what the assistant can do; "the 90s" is nobody's note.
_NOT_A_QUERY = re.compile(
    r"^(?:things|anything|everything|stuff|conversations?|chats?|me|us|when|how|our\s+(?:conversation|chat|talk)s?"
    r"|the\s+(?:'?\d0s|\d{4}s|old\s+days)|what\s+i\s+(?:say|tell|said|told)(?:\s+you)?$)\b",
    _I,
)
# "what is my purpose in life?" is for the model, not the notes.
_NOT_NOTED = re.compile(
    r"^(?:my|our)\s+(?:purpose|meaning|horoscope|fortune|destiny|future|problem|ip|reminders|schedules?)\b", _I
)
_QUERY_LEAD = re.compile(rf"^(?:(?:what\s+)?(?:i|we)\s+{_TELL}\s+(?:to\s+)?(?:you\s+)?about\s+|about\s+)", _I)
_QUERY_TAIL = re.compile(r"(?:\s+(?:again|was|is|were|are|called|now)|\s*,?\s*(?:do\s+you\s+)?remember)+$", _I)
_EVERYTHING = re.compile(r"^(?:me|myself|us|you|to\s+remember|to\s+note|)$", _I)


def triage(text: str, bot_name: str = "") -> Intent | None:
    """What `text` asks for, or None for everything the rules do not recognise (the model's)."""
    text = _clean(text, bot_name)
    if not text or "\n" in text:
        return None
    return _recall_reminder(text) or _remind(text) or _remember(text) or _fetch(text) or _recall(text)


def _clean(text: str, bot_name: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2018", "'").strip()
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"^@\w+[,:]?\s+", "", text)  # "@the_bot remember …" in a group
    if bot_name:
        text = re.sub(rf"^{re.escape(bot_name)}\s*[,:]\s*", "", text, flags=_I)
    return text


def _trimmed(part: str) -> str:
    part = re.sub(r"\s*(?:,\s*)?(?:please|pls|thanks|thank\s+you|thx)?[\s.!?]*$", "", part, flags=_I)
    return part.strip().strip("\"'").strip()


def _remember(text: str) -> Remember | None:
    for pattern in _REMEMBER:
        found = pattern.match(text)
        if found is None:
            continue
        raw = found.group("fact").strip()
        asks = found.groupdict().get("ask") is not None
        if raw.endswith("?") and not asks:
            return None  # "remember that time we went to Paris?"
        fact = _trimmed(raw)
        if not fact or _NOT_A_FACT.match(fact):
            return None
        if pattern is _REMEMBER[0] and len(fact.split()) < 2:
            return None  # "note that down"
        if pattern is _REMEMBER[2] and (len(fact.split()) < 3 or not _SAYS.search(fact)):
            return None
        return Remember(fact)
    return None


def _remind(text: str) -> Remind | None:
    found = _REMIND.match(text)
    if found is None:
        return None
    rest = found.group("rest").strip()
    if not rest or _REMIND_QUESTION.match(rest):
        return None
    if REPEATING.search(rest):  # "every morning at 7 to …": said to be out of reach, not half done
        body = _REMIND_REPEATING.search(rest)
        return Remind(_trimmed(body.group("what")), None, repeating=True) if body else None
    lead = _compiled(_REMIND_LEAD).match(rest)
    if lead is not None:
        when, what = lead.group("time"), lead.group("what")
    else:
        body = _REMIND_BODY.match(rest)
        if body is None:
            return None
        when, what = None, body.group("what")
    what = _trimmed(what)
    tail = _compiled(_REMIND_TAIL).match(what)
    if tail is not None:
        what = _trimmed(tail.group("what"))
        when = f"{when} {tail.group('time')}" if when else tail.group("time")
    if not what:
        return None
    return Remind(what, when.strip() if when else None)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _I)


def _fetch(text: str) -> Fetch | None:
    found = _URL.search(text)
    if found is None:
        return None
    url = found.group(0).rstrip(_URL_TRAILING)
    marked = text[: found.start()] + "<url>" + text[found.start() + len(url) :]
    if not any(cue.search(marked) for cue in _READ_IT):
        return None
    return Fetch(url)


def _recall_reminder(text: str) -> Recall | None:
    """"remind me what my passport number ends in": a question about a note, asked with "remind"."""
    return _recall(text, patterns=[_RECALL_SURE[6]]) if re.match(rf"^{_PREFIX}remind\s+me\s+what\b", text, _I) else None


def _recall(text: str, patterns: list[re.Pattern[str]] | None = None) -> Recall | None:
    for sure, group in ((True, patterns or _RECALL_SURE), (False, [] if patterns else _RECALL_MAYBE)):
        for pattern in group:
            found = pattern.match(text)
            if found is None:
                continue
            raw = found.groupdict().get("q") or found.groupdict().get("verb") or ""
            if pattern is _RECALL_SURE[3] and _NOT_A_QUERY.match(_trimmed(raw)):
                return None  # "do you remember things I tell you?"
            query = _query(raw)
            if not sure and (not query or _NOT_NOTED.match(query)):
                return None
            return Recall(query, sure)
    return None


def _query(raw: str) -> str:
    """The words to look up ("" for everything)."""
    query = _trimmed(raw)
    query = _QUERY_LEAD.sub("", query)
    query = _QUERY_TAIL.sub("", query).strip()
    return "" if _EVERYTHING.match(query) else query
