"""The `files` capability: a command the owner granted it reads, writes and lists the asking chat's workspace through the
file tools' checks (asked of the assistant over the same relay as `fetch`); traversal, absolute paths and symlinks out
are refused with the file tools' sentences, another chat's workspace is out of reach, and ungranted code is refused."""

from __future__ import annotations

from pathlib import Path

from bicameral.commands import CommandContext
from bicameral.commands.registry import Commands, CommandsConfig
from bicameral.sandbox.workspace import workspace_for
from bicameral.tools.command_files import workspace_files
from bicameral.tools.files import MAX_WRITE_BYTES
from tests.commands.support import needs_bwrap
from tests.conftest import OWNER
from tests.fakes.model_server import Reply, Request, ToolCall
from tests.support.access import write_access
from tests.support.chat import eventually

MEMBER = 2002
NOTE = '''from bicameral.commands import command


@command(name="note", description="Keep a note", params=[("text", str, "the note, or read/list/big", True)],
         capabilities=["files"])
async def note(text: str, context=None) -> str:
    try:
        if text.startswith("read "):
            return await context.files.read(text[5:])
        if text.startswith("list"):
            return ", ".join(await context.files.list(text[5:] or ".")) or "nothing"
        if text.startswith("save "):
            await context.files.write(text[5:], "saved")
            return "saved"
        if text == "big":
            await context.files.write("big.txt", "x" * (BIG + 1))
        await context.files.write("notes/today.txt", text)
        return "kept: " + await context.files.read("notes/today.txt")
    except ValueError as refused:
        return f"refused: {refused}"
'''.replace("BIG", str(MAX_WRITE_BYTES))
NOTE_TESTS = '''from bicameral.commands import CommandContext
from note import note


class Kept:
    def __init__(self):
        self.text = {}

    async def read(self, path):
        return self.text[path]

    async def write(self, path, text):
        self.text[path] = text

    async def list(self, path="."):
        return sorted(self.text)


async def test_note():
    context = CommandContext("1", "a", "c", "telegram", True, files=Kept())
    assert await note("hi", context=context) == "kept: hi"
'''
UNGRANTED = NOTE.replace('\n         capabilities=["files"]', "")


def _context(chat: str) -> CommandContext:
    return CommandContext(sender_id="7", sender_name="Ann", chat=chat, channel="telegram", is_owner=False)


def _written(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "note.py").write_text(NOTE)
    (folder / "blind.py").write_text(UNGRANTED.replace("note", "blind"))
    return folder


async def _loaded(folder: Path, data: Path) -> Commands:
    commands = Commands(CommandsConfig(_written(folder)), files=workspace_files(data))
    await commands.reload()
    assert sorted(commands.current.commands) == ["blind", "note"]
    return commands


async def test_a_granted_command_writes_reads_and_lists_its_chats_workspace(tmp_path: Path) -> None:
    data = tmp_path / "data"
    commands = await _loaded(tmp_path / "commands", data)
    a, b = _context("telegram:1"), _context("telegram:2")
    assert await commands.run_typed("note", "hello there", a) == "kept: hello there"
    assert (workspace_for(data, "telegram:1") / "notes" / "today.txt").read_text() == "hello there"
    assert await commands.run_typed("note", "list", a) == "notes/, notes/today.txt"
    assert await commands.run_typed("note", "read notes/today.txt", a) == "hello there"
    assert await commands.run_typed("note", "read notes/today.txt", b) == (
        "refused: no file 'notes/today.txt' in the workspace"
    ), "another chat's workspace is out of reach"
    assert await commands.run_typed("note", "read ../telegram_1/notes/today.txt", b) == (
        "refused: '../telegram_1/notes/today.txt' goes up with '..'; stay inside the workspace"
    )
    assert await commands.run_typed("note", "big", a) == (
        f"refused: content is {MAX_WRITE_BYTES + 1} bytes; the limit is {MAX_WRITE_BYTES}"
    )
    assert not (workspace_for(data, "telegram:1") / "big.txt").exists()
    assert await commands.run_typed("blind", "hello", a) == (
        "I couldn't finish /blind: the command failed (the owner can find why in the log)."
    ), "not granted: no files in its context"


async def test_traversal_absolute_paths_and_symlinks_out_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    commands = await _loaded(tmp_path / "commands", data)
    secret = tmp_path / "secret.txt"
    secret.write_text("the bot token")
    workspace = workspace_for(data, "telegram:1")
    (workspace / "out.txt").symlink_to(secret)
    (workspace / "away").symlink_to(tmp_path)
    a = _context("telegram:1")
    refusals = {
        "../secret.txt": "'../secret.txt' goes up with '..'; stay inside the workspace",
        str(secret): f"{str(secret)!r} is absolute; give a path relative to the workspace",
        "out.txt": "'out.txt' points outside the workspace (through a symlink)",
        "away/secret.txt": "'away/secret.txt' points outside the workspace (through a symlink)",
    }
    for path, sentence in refusals.items():
        assert await commands.run_typed("note", f"read {path}", a) == f"refused: {sentence}", path
    assert await commands.run_typed("note", "list away", a) == "refused: 'away' points outside the workspace (through a symlink)"
    assert await commands.run_typed("note", "list", a) == "nothing", "symlinks are skipped, never followed"
    assert await commands.run_typed("note", "save away/planted.txt", a) == (
        "refused: 'away/planted.txt' points outside the workspace (through a symlink)"
    )
    assert await commands.run_typed("note", "save out.txt", a) == (
        "refused: 'out.txt' points outside the workspace (through a symlink)"
    )
    assert not (tmp_path / "planted.txt").exists()
    assert secret.read_text() == "the bot token"


def _acting(req: Request) -> Reply:
    """Makes /note as the owner words it: first without the grant (refused), then with it."""
    if results := req.tool_results():
        return Reply(text="Result: " + results[0]["content"])
    said = req.last_user_text()
    arguments = {"name": "note", "description": "Keep a note", "code": NOTE, "tests": NOTE_TESTS, "request": said}
    if "add note without" in said:
        return Reply(tool_calls=[ToolCall("create_command", arguments)])
    if "add note with" in said:
        return Reply(tool_calls=[ToolCall("create_command", {**arguments, "capabilities": ["files"]})])
    return Reply(text="ok")


async def _says(telegram, user: int, text: str, count: int) -> str:
    telegram.user_sends(user, text)
    return (await telegram.await_sent(user, count, timeout=60))[count - 1]["text"]


@needs_bwrap
async def test_granted_files_end_to_end_and_refused_without_the_grant(telegram, models, start_bot, make_settings):
    write_access(make_settings(), policy="open")
    models.responder(_acting)
    app = await start_bot()
    refused = await _says(telegram, OWNER, "add note without a grant", 1)
    assert "/note was not saved: the code asks for files, which the owner has not granted this command" in refused
    assert not (app.settings.data_dir / "commands" / "note.py").exists()
    made = await _says(telegram, OWNER, "add note with files granted", 2)
    assert made.startswith("Result: /note passed its tests in the sandbox"), made
    await eventually(lambda: app.commands.current.get("note"), "note loaded after the reply went out")
    assert await _says(telegram, OWNER, "/note from the owner", 3) == "kept: from the owner"
    written = list((app.settings.data_dir / "workspaces").glob("*/notes/today.txt"))
    assert [p.read_text() for p in written] == ["from the owner"] and str(OWNER) in written[0].parent.parent.name
    assert await _says(telegram, MEMBER, "/note read notes/today.txt", 1) == (
        "refused: no file 'notes/today.txt' in the workspace"
    ), "the member's chat has its own workspace"
    assert await _says(telegram, OWNER, "/note read notes/today.txt", 4) == "from the owner"
