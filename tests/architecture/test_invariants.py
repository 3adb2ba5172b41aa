"""Safety rules read from the code: who may write files or start processes, and that paths and URLs pass the one checker."""

from __future__ import annotations

import ast
from pathlib import Path

import bicameral

SRC = Path(bicameral.__file__).parent

# The only modules that write files, each for one reason. Anything else that needs to write goes through one of these.
MAY_WRITE_FILES = {
    "sandbox/": "the sandbox: a chat's workspace (the file tools write through sandbox/beneath.py) and the received files",
    "store/db.py": "the SQLite database file",
    "store/reserve.py": "the disk reserve beside the database, allocated in advance for a full disk",
    "store/query.py": "the owner's read-only SQL (a mode=ro connection is still a database open)",
    "store/memory_files.py": "atomic writes of the memory and instruction Markdown files",
    "store/learnings.py": "the append-only learnings file",
    "observe/logs.py": "the rotated JSON log",
    "mcp/plugin_tools.py": "the external MCP servers' tool lists, kept so a server starts on first use",
    "gate/access.py": "access.json, changed by the owner's /allow and /deny",
    "channels/telegram/media.py": "attachments of admitted messages, at the path channels/downloads.py chose",
    "channels/matrix/session.py": "the Matrix login (token and device id) kept for the next start, mode 0600",
    "claude_code/capture.py": "the wire capture of CLI sessions",
    "claude_code/process.py": "the claude CLI's private MCP config",
    "channels/terminal.py": "its own duplicate of stdout, out of reach of a library that silences fd 1",
    "backup/": "backups of the data dir and their restore, its instance id, the lock a running assistant holds",
    "commands/trial.py": "a temporary copy of the commands folder, the workspace a command's tests run in",
    "commands/workshop.py": "the owner's command files in <data>/commands, written only after their checks passed",
    "commands/process.py": "a copy of one command file in a temporary folder, the only file its bubblewrap shows it",
}
# The only modules that start processes: bubblewrap for `run`, and the Claude Code CLI.
MAY_START_PROCESSES = {
    "sandbox/runner.py": "bubblewrap, for the run tool",
    "claude_code/process.py": "the claude CLI",
    "web/extract.py": "our own extraction worker, under limits, for web_fetch's HTML and PDF",
    "media/whisper_local.py": "our own offline transcription worker, killed past its time limit or when idle",
    "commands/process.py": "a command's own child process (no environment, CPU and memory limits), killed past its time",
    "commands/history.py": "git, in the commands folder's own repository",
    "backup/pg_dump.py": "pg_dump and pg_restore, for a backup of a PostgreSQL database and its restore",
}

_WRITE_MODE_CHARS = set("wax+")
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}
_WRITING_METHODS = {"write_text", "write_bytes", "download_to_drive"}
_WRITING_FUNCTIONS = {
    "tempfile.mkstemp", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move", "sqlite3.connect",
    "logging.FileHandler", "logging.handlers.RotatingFileHandler", "logging.handlers.TimedRotatingFileHandler",
}
_PROCESS_MODULES = {"subprocess", "pty"}
_PROCESS_FUNCTIONS = ("asyncio.create_subprocess_", "os.system", "os.popen", "os.exec", "os.spawn", "os.posix_spawn",
                      "os.fork", "pty.spawn", "pty.fork")


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _allowed(rel: str, allowlist: dict[str, str]) -> bool:
    return any(rel == key or (key.endswith("/") and rel.startswith(key)) for key in allowlist)


def _mode(call: ast.Call, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "mode":
            return keyword.value
    if len(call.args) > position:
        return call.args[position]
    return None


def _writes_by_mode(mode: ast.expr | None, *, missing_means_read: bool = True) -> bool:
    if mode is None:
        return not missing_means_read
    if isinstance(mode, ast.Constant):
        return isinstance(mode.value, str) and bool(set(mode.value) & _WRITE_MODE_CHARS)
    return True  # a mode computed at run time could be anything: count it


def file_writes(source: str) -> list[str]:
    """Each place the module writes a file, as `line: what`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        dotted = ast.unparse(func)
        if isinstance(func, ast.Name) and func.id == "open":
            if _writes_by_mode(_mode(node, 1)):
                found.append(f"{node.lineno}: open(..., {ast.unparse(_mode(node, 1) or ast.Constant('r'))})")
        elif dotted == "os.open":
            flags = node.args[1] if len(node.args) > 1 else None
            names = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)} if flags is not None else set()
            names |= {n.id for n in ast.walk(flags) if isinstance(n, ast.Name)} if flags is not None else set()
            names.discard("os")
            # Only named read flags (os.O_RDONLY | os.O_NOFOLLOW ...) make a read; a variable could hold anything.
            if flags is None or names & _WRITE_FLAGS or not names or any(not n.startswith("O_") for n in names):
                found.append(f"{node.lineno}: os.open with write flags")
        elif isinstance(func, ast.Attribute) and func.attr == "open":
            # Path.open(mode): a mode keyword, or a string first argument; `Stores.open(path)` and the like take no mode.
            keyword = next((k.value for k in node.keywords if k.arg == "mode"), None)
            first = node.args[0] if node.args and isinstance(node.args[0], ast.Constant) else None
            mode = keyword or first
            if mode is not None and _writes_by_mode(mode):
                found.append(f"{node.lineno}: {dotted}({ast.unparse(mode)})")
        elif isinstance(func, ast.Attribute) and func.attr in _WRITING_METHODS:
            found.append(f"{node.lineno}: .{func.attr}()")
        elif dotted in _WRITING_FUNCTIONS or dotted.endswith("FileHandler"):
            found.append(f"{node.lineno}: {dotted}()")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def process_starts(source: str) -> list[str]:
    """Each place the module can start a process (a call or a reference, e.g. a default argument), as `line: what`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in _PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if node.module.split(".")[0] in _PROCESS_MODULES or dotted.startswith(_PROCESS_FUNCTIONS):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute):
            dotted = ast.unparse(node)
            if dotted.startswith(_PROCESS_FUNCTIONS) or dotted.split(".")[0] in _PROCESS_MODULES:
                found.append(f"{node.lineno}: {dotted}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def _offenders(scan, allowlist: dict[str, str]) -> list[str]:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = _rel(path)
        if _allowed(rel, allowlist):
            continue
        offenders += [f"{rel}:{hit}" for hit in scan(path.read_text(encoding="utf-8"))]
    return offenders


def test_only_the_listed_modules_write_files():
    assert _offenders(file_writes, MAY_WRITE_FILES) == [], (
        "a module outside the list writes files: go through the store, the sandbox or the file tools, "
        "or add it to MAY_WRITE_FILES with the reason"
    )


def test_only_the_sandbox_and_the_claude_code_process_start_processes():
    assert _offenders(process_starts, MAY_START_PROCESSES) == [], (
        "a module outside the list starts processes: run commands through the sandbox"
    )


def test_every_listed_module_exists_and_still_needs_its_place():
    """A stale entry would quietly widen the list: each one must exist and still do what it is listed for."""
    for allowlist, scan in ((MAY_WRITE_FILES, file_writes), (MAY_START_PROCESSES, process_starts)):
        for key in allowlist:
            paths = sorted((SRC / key).rglob("*.py")) if key.endswith("/") else [SRC / key]
            assert paths and all(p.exists() for p in paths), f"{key} is listed but does not exist"
            assert any(scan(p.read_text(encoding="utf-8")) for p in paths), f"{key} is listed but no longer needs it"


def test_the_scanners_see_every_spelling():
    """The rules are only as good as the scans: each forbidden spelling is caught, harmless look-alikes are not."""
    writes = [
        "open(p, 'w')", "open(p, mode='a')", "open(p, 'x')", "open(p, 'r+')", "open(p, m)", "p.open('w')",
        "p.open(mode='ab')", "p.write_text('x')", "p.write_bytes(b'')", "os.open(p, os.O_WRONLY | os.O_CREAT)",
        "os.open(p, flags)", "shutil.copyfile(a, b)", "tempfile.mkstemp()", "sqlite3.connect(p)",
        "logging.handlers.TimedRotatingFileHandler(p)", "f.download_to_drive(p)",
    ]
    for line in writes:
        assert file_writes(line), f"not caught: {line}"
    for line in ["open(p)", "open(p, 'rb')", "p.open()", "p.open('rb')", "os.open(p, os.O_RDONLY)", "p.read_text()",
                 "Stores.open(path)", "text.replace('a', 'b')"]:
        assert not file_writes(line), f"wrongly caught: {line}"
    starts = [
        "import subprocess", "subprocess.run(['x'])", "from subprocess import Popen", "asyncio.create_subprocess_exec('x')",
        "asyncio.create_subprocess_shell('x')", "spawn = asyncio.create_subprocess_exec", "os.system('x')",
        "os.execv('x', [])", "os.spawnl(0, 'x')", "os.posix_spawn('x', [], {})", "import pty", "pty.spawn('x')",
        "from os import execvp", "from asyncio import create_subprocess_exec", "os.popen('x')", "os.fork()",
    ]
    for line in starts:
        assert process_starts(line), f"not caught: {line}"
    for line in ["os.getpid()", "asyncio.create_task(x)", "os.environ.get('x')"]:
        assert not process_starts(line), f"wrongly caught: {line}"


# --- every path and URL a tool takes passes the one checker ------------------------------------------------------

PATH_FIELDS = {"path", "file", "filename", "directory", "dir", "folder"}
URL_FIELDS = {"url", "uri", "link", "href"}
HOSTILE_PATHS = ["../etc/passwd", "/etc/passwd", "a/../../../../etc/passwd", "..", "~/.ssh/id_rsa"]
HOSTILE_URLS = ["http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/", "http://localhost/"]


def _fields(tool, names: set[str]) -> list[str]:
    return [
        field for field in tool.args_model.model_fields
        if field in names or any(field.endswith(f"_{name}") for name in names)
    ]


def _all_tools():
    from bicameral.tools.registry import discover_tools
    from bicameral.tools.shell import RunCommand

    # `run` joins the registry only where bubblewrap works; it is checked here whatever this machine has.
    return [*discover_tools(), RunCommand()]


def _calls(tree: ast.AST, name: str) -> bool:
    return any(
        isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name for node in ast.walk(tree)
    )


def _imports_from(tree: ast.AST, module: str, name: str) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and node.module == module and any(a.name == name for a in node.names)
        for node in ast.walk(tree)
    )


def _module_tree(tool) -> ast.AST:
    import inspect

    return ast.parse(inspect.getsource(inspect.getmodule(type(tool))))


def test_the_tools_that_take_paths_and_urls_are_found():
    """If the field names drift, the checks below would quietly check nothing: the known ones must be found."""
    tools = _all_tools()
    known = {"read_file", "write_file", "edit_file", "list_files", "search_files"}
    assert {t.name for t in tools if _fields(t, PATH_FIELDS)} >= known
    assert {t.name for t in tools if _fields(t, URL_FIELDS)} >= {"web_fetch"}


def test_every_tool_that_takes_a_path_calls_the_one_path_checker():
    for tool in _all_tools():
        if _fields(tool, PATH_FIELDS):
            tree = _module_tree(tool)
            assert _imports_from(tree, "bicameral.sandbox.paths", "resolve_inside"), f"{tool.name}: no sandbox.paths checker"
            assert _calls(tree, "resolve_inside"), f"{tool.name} imports the path checker but never calls it"


def test_every_tool_that_takes_a_url_fetches_through_the_checked_fetcher():
    for tool in _all_tools():
        if _fields(tool, URL_FIELDS):
            tree = _module_tree(tool)
            assert _imports_from(tree, "bicameral.web.fetch", "WebFetcher"), f"{tool.name}: not through web/fetch.py"
            # `check`: the browser's navigation is checked by the fetcher, then every request by its proxy (web/proxy.py).
            assert _calls(tree, "fetch") or _calls(tree, "check"), f"{tool.name} never fetches through the WebFetcher"
    # And the fetcher asks web/address.py about every address it would connect to.
    fetch = ast.parse((SRC / "web" / "fetch.py").read_text(encoding="utf-8"))
    assert _imports_from(fetch, "bicameral.web.address", "AddressPolicy")
    assert _calls(fetch, "refusal") and _calls(fetch, "literal_address") and _calls(fetch, "port_refusal")


def _args(tool, field: str, value: str) -> dict[str, object]:
    """The hostile value in `field`, and a plain string in every other required field."""
    args: dict[str, object] = {field: value}
    for name, info in tool.args_model.model_fields.items():
        if name != field and info.is_required():
            args[name] = "x"
    return args


async def test_hostile_paths_and_urls_are_refused_by_every_tool_that_takes_them(tmp_path):
    from bicameral.events import ActionResult, Authority, Role
    from bicameral.tools.base import ToolContext
    from bicameral.tools.registry import ToolRegistry

    async def perform(action):
        return ActionResult(ok=True)

    tools = _all_tools()
    registry = ToolRegistry(tools, timeout=30)
    owner = Authority(Role.OWNER)
    ctx = ToolContext(chat="telegram:1", turn_id="t", data_dir=tmp_path / "data", perform=perform, authority=owner)
    checked = 0
    for tool in tools:
        for field in _fields(tool, PATH_FIELDS):
            for hostile in HOSTILE_PATHS:
                result = await registry.execute(tool.name, _args(tool, field, hostile), ctx)
                assert result.is_error, f"{tool.name}({field}={hostile!r}) was not refused: {result.content[:200]}"
                assert "root:" not in result.content
                checked += 1
        for field in _fields(tool, URL_FIELDS):
            for hostile in HOSTILE_URLS:
                result = await registry.execute(tool.name, _args(tool, field, hostile), ctx)
                assert result.is_error and "refused" in result.content, f"{tool.name}({field}={hostile!r}): {result.content}"
                checked += 1
    assert checked >= 6 * len(HOSTILE_PATHS)
    assert [p for p in tmp_path.rglob("*") if p.name in {"passwd", "id_rsa"}] == []
