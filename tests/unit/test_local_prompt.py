"""What the small local model is shown: plain words, not the envelopes and tool rules meant for large models."""

from __future__ import annotations

from bicameral.models.base import Message, TextBlock
from bicameral.models.local import to_chat

SYSTEM = "You are Ada, a personal assistant. Match the user's language.\n\nHow messages reach you:\n- `<msg>` envelopes..."


def test_envelopes_become_the_words_inside_them() -> None:
    user = '<msg id="u1" from="you" time="2026-01-01 10:00 UTC"><quote id="7" from="you">fish &amp; chips?</quote>\nSay hi</msg>'
    chat = to_chat(SYSTEM, [Message.user(user)])
    assert chat[-1] == {"role": "user", "content": '(replying to: "fish & chips?")\nSay hi'}


def test_only_the_opening_of_the_system_prompt_is_kept_with_a_nudge_to_be_brief() -> None:
    system = to_chat(SYSTEM, [Message.user("hi")])[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are Ada, a personal assistant. Match the user's language.")
    assert "<msg>" not in system["content"] and "brief" in system["content"]


def test_memory_notes_become_notes_about_the_user_in_the_system_prompt() -> None:
    note = (
        "<memory> what you remember that may matter here (use it without being asked; ids for recall/forget):\n"
        "- [m1a2b3c4] (private) my dog is called Rex\n- [m5d6e7f8] (private) I'm vegan.\n</memory>"
    )
    chat = to_chat(SYSTEM, [Message(role="user", content=[TextBlock(text=note), TextBlock(text="<msg id=\"u1\">hi</msg>")])])
    assert chat[0]["content"].endswith("Notes about the user: my dog is called Rex; I'm vegan.")
    # The user's turn is their words alone: no ids to echo, no names to greet.
    assert chat[1:] == [{"role": "user", "content": "hi"}]
