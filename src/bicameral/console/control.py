"""/pause, /resume and /kill: stop answering everyone but the owner, start again, or stop the process."""

from __future__ import annotations

from collections.abc import Callable

from bicameral.console.desk import Asked, Console, OwnerCommand

# EX_TEMPFAIL from sysexits.h: "try again". A supervisor restarts on it (systemd's Restart=on-failure, Docker's
# on-failure policy), unlike 0, which reads as "meant to stop".
KILL_EXIT_STATUS = 75


def control_commands(console: Console, stop: Callable[[int], None]) -> list[OwnerCommand]:
    """The commands that act on the console and the process."""

    async def pause(asked: Asked) -> str:
        if console.paused:
            return "I'm already paused. /resume to answer everyone again."
        await console.pause()
        return (
            "Paused: I answer only you now. Everyone else's messages are kept and answered when you /resume; "
            "reminders still fire."
        )

    async def resume(asked: Asked) -> str:
        if not console.paused:
            return "I'm not paused."
        waiting = await console.resume()
        return f"Resumed. {waiting} message(s) that waited are being answered now." if waiting else "Resumed."

    async def kill(asked: Asked) -> str:
        console.after_reply(lambda: stop(KILL_EXIT_STATUS))
        return f"Stopping cleanly (exit status {KILL_EXIT_STATUS}: a supervisor starts me again)."

    return [
        OwnerCommand("pause", "/pause", "answer only you; everyone else waits until /resume", pause),
        OwnerCommand("resume", "/resume", "answer everyone again, starting with what waited", resume),
        OwnerCommand("kill", "/kill", f"stop the process cleanly (exit status {KILL_EXIT_STATUS})", kill),
    ]
