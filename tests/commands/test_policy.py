"""The AST policy: every way out the issue lists is refused with its rule and line, a plain command passes."""

from __future__ import annotations

import pytest

from bicameral.commands.policy import check_command, check_tests
from tests.commands.support import SHOUT, SHOUT_TESTS

HEAD = "from bicameral.commands import command\n"
BODY = '\n\n@command(name="x", description="x")\nasync def x() -> str:\n    return {}\n'


def _in_handler(expression: str) -> str:
    return HEAD + BODY.format(expression)


@pytest.mark.parametrize(
    ("source", "rule", "line"),
    [
        ("import subprocess as s\n", "importing subprocess is not allowed", 1),  # an alias is still subprocess
        ("from subprocess import run as go\n", "importing subprocess is not allowed", 1),
        ("import os\n", "importing os is not allowed", 1),
        ("import os.path\n", "importing os.path is not allowed", 1),
        ("from os import environ\n", "importing os is not allowed", 1),  # the bot token from the environment
        ("import socket, ctypes\n", "importing socket is not allowed", 1),
        ("import importlib\n", "importing importlib is not allowed", 1),
        ("import builtins\n", "importing builtins is not allowed", 1),
        ("import pickle\n", "importing pickle is not allowed", 1),
        ("import pathlib\n", "importing pathlib is not allowed", 1),
        ("import asyncio\n", "importing asyncio is not allowed", 1),  # create_subprocess_exec is in there
        ("from bicameral.config import Settings\n", "importing bicameral.config is not allowed", 1),
        ("from . import other\n", "relative imports are not allowed", 1),
        (_in_handler("__builtins__['__import__']('os').system('id')"), "the name __builtins__", 6),  # os via builtins
        (_in_handler("__import__('os')"), "the name __import__", 6),
        (_in_handler("().__class__.__bases__[0].__subclasses__()"), "the attribute .__subclasses__", 6),
        (_in_handler("x.__globals__"), "the attribute .__globals__", 6),
        (_in_handler("open('/etc/passwd', 'w').write('x')"), "using open() is not allowed", 6),  # outside its folder
        (_in_handler("eval('1')"), "using eval() is not allowed", 6),
        (_in_handler("exec('1')"), "using exec() is not allowed", 6),
        (_in_handler("compile('1', 'x', 'eval')"), "using compile() is not allowed", 6),
        (_in_handler("getattr(x, 'y')"), "using getattr() is not allowed", 6),
        (_in_handler("[f for f in map(vars, [x])]"), "using vars() is not allowed", 6),
        (_in_handler("'{0.x}'.format(x)"), "the attribute .format is not allowed", 6),
        (_in_handler("(i for i in []).gi_frame.f_back.f_globals"), "the attribute .gi_frame is not allowed", 6),
        (HEAD + "while True:\n    pass\n", "module level runs code at import (while)", 2),  # a loop at import
        (HEAD + "for _ in iter(int, 1):\n    pass\n", "module level runs code at import (for)", 2),
        (HEAD + "print('loaded')\n", "module level runs code at import (expr)", 2),
        ("def f(:\n", "not valid Python", 1),
        # An allowed module holding another: the environment (the bot token) through typing's sys, random's os.
        (_in_handler("typing.sys.modules['os'].environ").replace(HEAD, HEAD + "import typing\n"), ".sys of typing", 7),
        ("from typing import sys\n", "sys from typing is the module sys", 1),
        ("from dataclasses import inspect\n", "inspect from dataclasses is the module inspect", 1),
        ("import random\nX = random._os\n", "the attribute ._os is private", 2),
        ("from random import _os\n", "importing _os from random is not allowed", 1),
        ("import typing as t\nM = t\n", "the module typing may only be used as typing.name", 2),
        ("from typing import get_type_hints\n", "importing get_type_hints from typing is not allowed", 1),
        ("from math import *\n", "`import *` is not allowed", 1),
    ],
)
def test_each_way_out_is_refused_with_its_rule_and_line(source: str, rule: str, line: int) -> None:
    refusals = check_command(source)
    assert any(rule in r.rule and r.line == line for r in refusals), refusals


def test_a_plain_command_and_its_tests_pass() -> None:
    assert check_command(SHOUT) == []
    fine = "import collections.abc\nimport json\nfrom collections import abc\nA = collections.abc.Mapping\nB = abc.Mapping\n"
    assert check_command(fine + "C = json.decoder.JSONDecodeError\nD = json.loads('1')\n") == []
    assert check_tests(SHOUT_TESTS, "shout") == []
    assert check_tests("import pytest\nimport asyncio\nfrom shout import shout\n\n\ndef test_a():\n    pass\n", "shout") == []


@pytest.mark.parametrize(
    ("tests", "rule"),
    [
        ("import pytest\n\n\ndef test_a():\n    assert True\n", "must import the command module"),  # passes without it
        ("import shout\n\n\ndef test_a():\n    del shout.shout\n", "tests may not delete anything"),
        ("import os\nimport shout\n\n\ndef test_a():\n    os.remove('shout.py')\n", "importing os is not allowed"),
        ("import shutil\nfrom shout import shout\n", "importing shutil is not allowed"),
        ("import other_command\nfrom shout import shout\n", "importing other_command is not allowed"),
    ],
)
def test_tests_that_would_pass_by_deleting_or_skipping_the_command_are_refused(tests: str, rule: str) -> None:
    assert any(rule in r.rule for r in check_tests(tests, "shout")), check_tests(tests, "shout")


def test_a_refusal_reads_as_its_line_and_rule() -> None:
    [refusal] = check_command("import subprocess as s\n")
    assert str(refusal).startswith("line 1: importing subprocess is not allowed")
