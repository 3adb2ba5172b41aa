"""`/dashboard`: a one-time login link for the owner, in a private chat only; `/dashboard logout-all` ends every session."""

from __future__ import annotations

from collections.abc import Callable

from bicameral.console.desk import Asked, OwnerCommand, Secret
from bicameral.dashboard.auth import LINK_SECONDS, Logins


def dashboard_command(logins: Logins, base_url: str, end_streams: Callable[[], None]) -> OwnerCommand:
    async def dashboard(asked: Asked) -> str | Secret:
        word = asked.argument.strip().lower()
        if word == "logout-all":
            ended = logins.end_all()
            end_streams()
            return f"Ended {ended} dashboard session{'s' if ended != 1 else ''}; unused login links no longer work."
        if word:
            return "Usage: /dashboard (a login link) or /dashboard logout-all"
        if not asked.inbound.is_private:
            return "Ask for the dashboard link in our private chat: here others could open it first."
        token = logins.new_link_token()
        minutes = int(LINK_SECONDS // 60)
        # A Secret: the link is sent once and never logged or stored.
        return Secret(f"Your dashboard login link (works once, for {minutes} minutes):\n{base_url}/login/{token}")

    return OwnerCommand("dashboard", "/dashboard [logout-all]", "a login link to the web dashboard", dashboard)
