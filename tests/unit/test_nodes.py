"""The node layer: LocalNode and SshNode (against a real sshd on 127.0.0.1), and NodePool.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_nodes.py (those with real processes).
"""

from __future__ import annotations

from r2bench.nodes import LocalNode
from r2bench.nodes.base import command_text, parse_stamp, shell_argv


def test_command_text_quotes_each_argv_element() -> None:
    assert command_text(["echo", "a b", "$HOME", "it's"]) == "echo 'a b' '$HOME' 'it'\"'\"'s'"
    assert command_text("echo $HOME") == "echo $HOME"


def test_shell_argv_adds_cwd_env_and_sudo() -> None:
    argv = shell_argv(["ls"], sudo=True, env={"A": "1 2"}, cwd="/tmp/x y")
    assert argv == ["sudo", "-n", "env", "A=1 2", "bash", "-c", "cd '/tmp/x y' && ls"]


def test_parse_stamp_falls_back_to_receipt_time() -> None:
    assert parse_stamp("1700000000.25 hello world", 5.0) == (1700000000.25, "hello world")
    assert parse_stamp("1700000000,25 x", 5.0) == (1700000000.25, "x")
    assert parse_stamp("no stamp", 5.0) == (5.0, "no stamp")


def test_root_uses_sudo_only_when_needed() -> None:
    class Fake(LocalNode):
        @property
        def is_root(self) -> bool:
            return False

    assert Fake("n")._argv("id", root=True, env=None, cwd=None)[:2] == ["sudo", "-n"]
    assert Fake("n", sudo=False)._argv("id", root=True, env=None, cwd=None)[0] == "bash"
    assert LocalNode("n")._argv("id", root=False, env=None, cwd=None)[0] == "bash"
