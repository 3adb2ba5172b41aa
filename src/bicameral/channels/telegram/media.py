"""How a Telegram file is fetched: getFile for its path, then the download (channels/downloads.py saves it)."""

from __future__ import annotations

from pathlib import Path

from telegram import Bot

from bicameral.channels.downloads import MAX_DOWNLOAD_BYTES, Download, TooLarge
from bicameral.events import AttachmentRef


def telegram_download(bot: Bot) -> Download:
    """Writes a referenced file at a path; the Bot API refuses getFile above its limit, so that is checked first."""

    async def download(ref: AttachmentRef, path: Path) -> None:
        file = await bot.get_file(ref.file_id)
        if (file.file_size or 0) > MAX_DOWNLOAD_BYTES:
            raise TooLarge(ref.name)
        if not file.file_path:
            raise FileNotFoundError("Telegram gave no path for the file")
        await file.download_to_drive(path)

    return download
