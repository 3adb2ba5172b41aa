"""Pairing codes: random, stored as hashes, used once, short-lived; wrong guesses limited per sender."""

from __future__ import annotations

import dataclasses
import json
import re

from bicameral.events import Inbound, Sender
from bicameral.gate.access import AccessPolicy
from bicameral.gate.pairing import (
    CODE_VALID_SECONDS,
    MAX_MISSES,
    MISS_WINDOW_SECONDS,
    WELCOME,
    WRONG_CODE,
    Pairing,
    code_attempt,
)
from bicameral.store.pairing import PairingStore
from bicameral.store.sql import SqlDatabase

OWNER = 42
STRANGER = 7


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _dm(text: str, sender: int = STRANGER, **changes) -> Inbound:
    inbound = Inbound(
        channel="telegram", chat=f"telegram:{sender}", message_id="1", sender=Sender(str(sender), "Sam"), text=text, ts=0
    )
    return dataclasses.replace(inbound, **changes)


def _pairing(tmp_path, clock: Clock, db: SqlDatabase) -> tuple[Pairing, SqlDatabase, AccessPolicy]:
    access = AccessPolicy(tmp_path / "access.json", OWNER)
    return Pairing(PairingStore(db), access, owner_id=OWNER, clock=clock), db, access


def test_codes_are_eight_of_the_alphabet_and_only_their_hash_is_stored(tmp_path, database):
    pairing, db, _ = _pairing(tmp_path, Clock(), database)
    codes = {pairing.issue("telegram:42").code for _ in range(20)}
    assert len(codes) == 20
    assert all(re.fullmatch(r"[A-Z2-9]{8}", code) for code in codes)
    stored = json.dumps([tuple(row) for row in db.query("SELECT * FROM pairing_codes")])
    assert not any(code in stored for code in codes)


def test_a_code_lets_one_stranger_in_once(tmp_path, database):
    clock = Clock()
    pairing, _, access = _pairing(tmp_path, clock, database)
    code = pairing.issue("telegram:42").code
    told = pairing.redeem(_dm(f"  {code.lower()} "))
    assert told is not None
    assert [t.text for t in told if t.chat == "telegram:7"] == [WELCOME]
    owner_note = next(t.text for t in told if t.chat == "telegram:42")
    assert "Sam" in owner_note and "id 7" in owner_note and "owner_only" in owner_note
    assert access.config.policy == "allowlist" and access.config.allowed_users == [7]
    again = pairing.redeem(_dm(code, sender=8))
    assert again is not None and [t.text for t in again] == [WRONG_CODE]
    assert access.config.allowed_users == [7]


def test_start_with_the_code_works_and_an_expired_code_does_not(tmp_path, database):
    clock = Clock()
    pairing, _, access = _pairing(tmp_path, clock, database)
    first, second = pairing.issue("telegram:42").code, pairing.issue("telegram:42").code
    assert [t.text for t in pairing.redeem(_dm(f"/start {first}")) or () if t.chat == "telegram:7"] == [WELCOME]
    clock.now += CODE_VALID_SECONDS + 1
    assert [t.text for t in pairing.redeem(_dm(second, sender=8)) or ()] == [WRONG_CODE]
    assert access.config.allowed_users == [7]


def test_what_is_not_a_try_is_left_to_the_usual_refusal():
    assert code_attempt(_dm("ABCD2345")) == "ABCD2345"
    assert code_attempt(_dm("/start ABCD2345")) == "ABCD2345"
    assert code_attempt(_dm("/start@bicameral_bot xyz")) == "xyz"
    for text in ("hello there", "ABCD234", "ABCD23450", "ABCD 2345", "/start", "ABCD1345", "/help ABCD2345"):
        assert code_attempt(_dm(text)) is None, text
    group = _dm("ABCD2345", chat="telegram:-100", chat_type="supergroup")
    assert code_attempt(group) is None
    assert code_attempt(_dm("ABCD2345", flags=("caption",))) is None
    assert code_attempt(_dm("ABCD2345", kind="synthetic")) is None


def test_wrong_guesses_are_limited_per_sender_and_the_window_passes(tmp_path, database):
    clock = Clock()
    pairing, _, access = _pairing(tmp_path, clock, database)
    code = pairing.issue("telegram:42").code
    for _ in range(MAX_MISSES):
        assert [t.text for t in pairing.redeem(_dm("WRONG234")) or ()] == [WRONG_CODE]
    assert pairing.redeem(_dm(code)) == ()  # out of tries: not even checked, nothing said
    assert access.config.allowed_users == []
    assert [t.text for t in pairing.redeem(_dm(code, sender=8)) or () if t.chat == "telegram:8"] == [WELCOME]
    clock.now += MISS_WINDOW_SECONDS + 1
    another = pairing.issue("telegram:42").code
    assert [t.text for t in pairing.redeem(_dm(another)) or () if t.chat == "telegram:7"] == [WELCOME]
