"""How a Matrix file is fetched: the mxc:// content downloaded through the client (channels/downloads.py saves it)."""

from __future__ import annotations

from pathlib import Path

from nio import AsyncClient, DiskDownloadResponse

from bicameral.channels.downloads import Download
from bicameral.events import AttachmentRef


def matrix_download(client: AsyncClient) -> Download:
    """Writes a referenced mxc:// file at a path, or raises with the homeserver's answer."""

    async def download(ref: AttachmentRef, path: Path) -> None:
        answer = await client.download(mxc=ref.file_id, save_to=path)
        if not isinstance(answer, DiskDownloadResponse):
            raise OSError(getattr(answer, "message", type(answer).__name__))

    return download
