"""The schedules, schedule_fires and user_timezones tables: what is due when, and each fire until delivered.

A `followup` is the front's own question for a user who went quiet mid-thought: a schedule so it survives a
restart, but not the user's, so it is never listed, looked up by number or counted against a limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bicameral.events import Authority, Role
from bicameral.store.sql import IntegrityError, Row, SqlDatabase

Kind = Literal["text", "task", "followup"]
State = Literal["active", "paused", "done"]

_WAITING_FOLLOWUP = "SELECT 1 FROM schedules WHERE chat = ? AND kind = 'followup' AND state = 'active' LIMIT 1"


@dataclass(frozen=True)
class SchedulePolicy:
    """The settings the schedule tools apply (set by the app from Settings; tools never see Settings)."""

    default_tz: str = "UTC"
    per_user: int = 50
    min_interval_seconds: float = 300.0


class ScheduleLimitError(Exception):
    """The person already has as many live schedules as the limit allows."""


@dataclass(frozen=True)
class Schedule:
    id: int
    chat: str
    creator: str
    private: bool
    kind: Kind
    body: str
    cron: str | None
    tz: str
    state: State
    next_due: float | None
    last_fired: float | None
    protected: str | None
    created_at: float = 0.0
    # Everyone who wrote any of its text, at the least role among them: a fire runs with no more rights.
    authority: Authority | None = None
    skill: str | None = None  # a task that runs this skill's instructions (migration 018)

    @property
    def recurring(self) -> bool:
        return self.cron is not None

    @property
    def written_by(self) -> Authority:
        """Whose words it holds; one stored before that was kept is its creator's alone, claiming no role."""
        return self.authority or Authority.of(Role.MEMBER, (self.creator,))


@dataclass(frozen=True)
class Fire:
    id: int
    schedule_id: int
    chat: str
    creator: str
    private: bool
    kind: Kind
    body: str
    due_at: float
    fired_at: float
    set_at: float | None = None  # when the schedule was set (None for fires recorded before it was kept)
    authority: Authority | None = None  # the schedule's when it fired (None: recorded before it was kept)
    skill: str | None = None  # the skill it runs, as the schedule had it when it fired

    @property
    def late_by(self) -> float:
        return self.fired_at - self.due_at

    @property
    def written_by(self) -> Authority:
        """Whose words it holds, as for `Schedule.written_by`."""
        return self.authority or Authority.of(Role.MEMBER, (self.creator,))


class ScheduleStore:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._listeners: list[Callable[[], None]] = []
        self.policy = SchedulePolicy()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every change to what is due (the scheduler re-arms its one timer)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    # --- schedules ---

    def create(
        self,
        *,
        chat: str,
        creator: str,
        kind: Kind,
        body: str,
        tz: str,
        next_due: float,
        now: float,
        cron: str | None = None,
        private: bool = True,
        limit: int | None = None,
        protected: str | None = None,
        authority: Authority | None = None,
        skill: str | None = None,
    ) -> Schedule:
        """Add a schedule; over `limit` live ones for the creator raises ScheduleLimitError (checked in the same write)."""
        with self._db.tx(serial=f"schedules of {creator}" if limit is not None else None) as conn:
            if limit is not None:
                live = conn.execute(
                    """SELECT COUNT(*) FROM schedules WHERE creator = ? AND state != 'done' AND protected IS NULL
                       AND kind != 'followup'""",
                    (creator,),
                ).fetchone()[0]
                if live >= limit:
                    raise ScheduleLimitError(f"{creator} has {live} schedules (limit {limit})")
            cursor = conn.execute(
                """INSERT INTO schedules (chat, creator, private, kind, body, cron, tz, next_due, protected, created_at,
                                         authority, skill)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                (chat, creator, int(private), kind, body, cron, tz, next_due, protected, now,
                 authority.dumps() if authority else None, skill),
            )
            schedule_id = int(cursor.fetchone()[0])
        self._changed()
        found = self.get(schedule_id)
        assert found is not None
        return found

    def create_reminders(self, rows: list[tuple[str, str, float]], *, tz: str, now: float) -> None:
        """Many one-shot text reminders, (chat, text, due) each, in one write (imports and load tests)."""
        with self._db.tx() as conn:
            conn.executemany(
                """INSERT INTO schedules (chat, creator, kind, body, tz, next_due, created_at)
                   VALUES (?, ?, 'text', ?, ?, ?, ?)""",
                [(chat, chat, text, tz, due, now) for chat, text, due in rows],
            )
        self._changed()

    def get(self, schedule_id: int) -> Schedule | None:
        """The user's schedule with this number (a follow-up is not one)."""
        row = self._db.query_one("SELECT * FROM schedules WHERE id = ? AND kind != 'followup'", (schedule_id,))
        return _schedule(row) if row else None

    def by_key(self, protected: str) -> Schedule | None:
        row = self._db.query_one("SELECT * FROM schedules WHERE protected = ?", (protected,))
        return _schedule(row) if row else None

    def live(self, chat: str | None = None, limit: int = 200) -> list[Schedule]:
        """Active and paused schedules, soonest first; of one chat, or of all when `chat` is None."""
        where = "state != 'done' AND kind != 'followup'" + (" AND chat = ?" if chat is not None else "")
        rows = self._db.query(
            f"SELECT * FROM schedules WHERE {where} ORDER BY next_due IS NULL, next_due, id LIMIT ?",
            (chat, limit) if chat is not None else (limit,),
        )
        return [_schedule(r) for r in rows]

    def update(
        self,
        schedule_id: int,
        *,
        state: State | None = None,
        next_due: float | None = None,
        body: str | None = None,
        cron: str | None = None,
        clear_cron: bool = False,
        authority: Authority | None = None,
    ) -> None:
        """Change what is given; finishing clears the due time (a paused one keeps it for resuming)."""
        sets: list[str] = []
        params: list[object] = []
        if state is not None:
            sets.append("state = ?")
            params.append(state)
        if state == "done":
            sets.append("next_due = NULL")
        elif next_due is not None:
            sets.append("next_due = ?")
            params.append(next_due)
        if body is not None:
            sets.append("body = ?")
            params.append(body)
        if cron is not None or clear_cron:
            sets.append("cron = ?")
            params.append(cron)
        if authority is not None:
            sets.append("authority = ?")
            params.append(authority.dumps())
        if not sets:
            return
        with self._db.tx() as conn:
            conn.execute(f"UPDATE schedules SET {', '.join(sets)} WHERE id = ?", (*params, schedule_id))
        self._changed()

    def next_due_at(self) -> float | None:
        row = self._db.query_one("SELECT MIN(next_due) FROM schedules WHERE state = 'active'")
        return row[0] if row else None

    def due(self, now: float, limit: int = 500) -> list[Schedule]:
        rows = self._db.query(
            "SELECT * FROM schedules WHERE state = 'active' AND next_due <= ? ORDER BY next_due, id LIMIT ?", (now, limit)
        )
        return [_schedule(r) for r in rows]

    def due_by(self, until: float) -> dict[str, tuple[int, float]]:
        """Per kind ("text": reminders, "task"), how many active schedules are due by `until` and the first time."""
        rows = self._db.query(
            """SELECT kind, COUNT(*), MIN(next_due) FROM schedules
               WHERE state = 'active' AND next_due <= ? AND kind != 'followup' GROUP BY kind""",
            (until,),
        )
        return {row[0]: (int(row[1]), float(row[2])) for row in rows}

    def keep_protected(
        self, key: str, *, chat: str, creator: str, body: str, tz: str, cron: str, next_due: float, now: float,
        skill: str | None = None,
    ) -> Schedule:
        """The protected schedule `key`, created or brought back to life with this body, rule and skill."""
        existing = self.by_key(key)
        if existing is None:
            try:
                return self.create(
                    chat=chat, creator=creator, kind="task", body=body, tz=tz, next_due=next_due, now=now, cron=cron,
                    protected=key, skill=skill,
                )
            except IntegrityError:  # another worker starting at the same moment seeded it first: keep theirs
                existing = self.by_key(key)
                if existing is None:
                    raise
        with self._db.tx() as conn:
            unchanged = existing.state == "active" and existing.cron == cron and existing.tz == tz and existing.chat == chat
            # Unchanged, the row's own next_due stays as it is now, not as read above: a worker that fired it since
            # has moved it on, and writing back the old time would fire it again.
            conn.execute(
                f"""UPDATE schedules SET chat = ?, creator = ?, body = ?, tz = ?, cron = ?, state = 'active',
                   {"" if unchanged else "next_due = ?, "}skill = ? WHERE id = ?""",
                (chat, creator, body, tz, cron, *(() if unchanged else (next_due,)), skill, existing.id),
            )
        self._changed()
        kept = self.get(existing.id)
        assert kept is not None
        return kept

    def retire_protected(self, key: str) -> bool:
        """Finish the protected schedule `key` (its feature was turned off); True if one was live."""
        with self._db.tx() as conn:
            done = conn.execute(
                "UPDATE schedules SET state = 'done', next_due = NULL WHERE protected = ? AND state != 'done'", (key,)
            ).rowcount
        if done:
            self._changed()
        return bool(done)

    # --- follow-ups ---

    def set_followup(self, chat: str, question: str, *, due: float, now: float) -> None:
        """Ask `question` in `chat` at `due` unless the user speaks first; replaces the chat's earlier one."""
        with self._db.tx() as conn:
            # Earlier ones go: a fire already recorded keeps its own copy of what was asked.
            conn.execute("DELETE FROM schedules WHERE chat = ? AND kind = 'followup'", (chat,))
            conn.execute(
                """INSERT INTO schedules (chat, creator, kind, body, tz, next_due, created_at)
                   VALUES (?, ?, 'followup', ?, 'UTC', ?, ?)""",
                (chat, chat, question, due, now),
            )
        self._changed()

    def followup(self, chat: str) -> Schedule | None:
        """The chat's follow-up question still waiting to be asked."""
        row = self._db.query_one(
            "SELECT * FROM schedules WHERE chat = ? AND kind = 'followup' AND state = 'active'", (chat,)
        )
        return _schedule(row) if row else None

    def drop_followup(self, chat: str) -> bool:
        """The user spoke (or stopped us): the waiting question is not asked; True if one was waiting."""
        # Every turn asks and nearly every one finds none: a read settles that without a write transaction.
        if self._db.query_one(_WAITING_FOLLOWUP, (chat,)) is None:
            return False
        with self._db.tx() as conn:
            dropped = conn.execute(
                """UPDATE schedules SET state = 'done', next_due = NULL
                   WHERE chat = ? AND kind = 'followup' AND state = 'active'""",
                (chat,),
            ).rowcount
        if dropped:
            self._changed()
        return bool(dropped)

    # --- fires ---

    def fire(self, schedule: Schedule, *, now: float, next_due: float | None) -> Fire | None:
        """Record the fire and move the schedule on (to `next_due`, or done) in one write.

        None if the schedule changed since it was read (edited, paused, fired by someone else)."""
        with self._db.tx() as conn:
            moved = conn.execute(
                """UPDATE schedules SET last_fired = ?, next_due = ?, state = ?
                   WHERE id = ? AND state = 'active' AND next_due = ?""",
                (now, next_due, "active" if next_due is not None else "done", schedule.id, schedule.next_due),
            ).rowcount
            if not moved:
                return None
            assert schedule.next_due is not None
            cursor = conn.execute(
                """INSERT INTO schedule_fires (schedule_id, chat, creator, private, kind, body, due_at, fired_at, set_at,
                                              authority, skill)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                (schedule.id, schedule.chat, schedule.creator, int(schedule.private), schedule.kind, schedule.body,
                 schedule.next_due, now, schedule.created_at, schedule.authority.dumps() if schedule.authority else None,
                 schedule.skill),
            )
            fire_id = int(cursor.fetchone()[0])
        return Fire(fire_id, schedule.id, schedule.chat, schedule.creator, schedule.private, schedule.kind,
                    schedule.body, schedule.next_due, now, schedule.created_at, schedule.authority, schedule.skill)

    def pending_fires(self) -> list[Fire]:
        rows = self._db.query("SELECT * FROM schedule_fires WHERE status = 'pending' ORDER BY id")
        return [_fire(r) for r in rows]

    def fire_lags(self) -> list[float]:
        """For every fire: seconds from its due time to when it was recorded (the scheduler's own lateness)."""
        return [row[0] for row in self._db.query("SELECT fired_at - due_at FROM schedule_fires ORDER BY id")]

    def delivered(self, fire_id: int, now: float) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "UPDATE schedule_fires SET status = 'delivered', delivered_at = ? WHERE id = ?", (now, fire_id)
            )

    # --- time zones ---

    def timezone_of(self, user: str) -> str | None:
        row = self._db.query_one("SELECT tz FROM user_timezones WHERE user = ?", (user,))
        return row["tz"] if row else None

    def set_timezone(self, user: str, tz: str) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO user_timezones (user, tz) VALUES (?, ?) ON CONFLICT(user) DO UPDATE SET tz = excluded.tz",
                (user, tz),
            )


def _schedule(row: Row) -> Schedule:
    return Schedule(
        id=row["id"], chat=row["chat"], creator=row["creator"], private=bool(row["private"]), kind=row["kind"],
        body=row["body"], cron=row["cron"], tz=row["tz"], state=row["state"], next_due=row["next_due"],
        last_fired=row["last_fired"], protected=row["protected"], created_at=row["created_at"],
        authority=Authority.loads(row["authority"]), skill=row["skill"],
    )


def _fire(row: Row) -> Fire:
    return Fire(
        id=row["id"], schedule_id=row["schedule_id"], chat=row["chat"], creator=row["creator"],
        private=bool(row["private"]), kind=row["kind"], body=row["body"], due_at=row["due_at"], fired_at=row["fired_at"],
        set_at=row["set_at"], authority=Authority.loads(row["authority"]), skill=row["skill"],
    )
