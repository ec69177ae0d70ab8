"""The node layer: LocalNode and SshNode (against a real sshd on 127.0.0.1), and NodePool.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_nodes.py (its pure tests).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from r2bench.config.testbed import SshOptions, Testbed
from r2bench.nodes import LocalNode, Node, NodeError, NodePool, SshNode, StreamLine
from tests.support.helpers_sshd import SshServer, needs_sshd, sshd, sshd_available  # noqa: F401


def ssh_options(server: SshServer, **overrides: object) -> SshOptions:
    """Options that reach the test server with host-key checking on."""
    values = {**server.ssh_settings(), "config_file": None, **overrides}
    return SshOptions.model_validate(values)


@pytest.fixture(params=["local", "ssh"])
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    """The same tests run against both implementations."""
    if request.param == "local":
        yield LocalNode("here")
        return
    if not sshd_available():
        pytest.skip("needs OpenSSH sshd (and root)")
    server = request.getfixturevalue("sshd")
    with SshNode("here", "127.0.0.1", ssh_options(server)) as ssh_node:
        yield ssh_node


def test_run_captures_output_exit_code_and_times(node: Node) -> None:
    result = node.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.node == "here" and not result.ok and not result.timed_out
    assert 0 <= result.duration < 10 and result.started <= result.ended


def test_run_quotes_argv_and_honors_env_and_cwd(node: Node, tmp_path: Path) -> None:
    result = node.run(["printf", "%s|", "a b", "$X"], env={"X": "x y"}, cwd=str(tmp_path))
    assert result.stdout == "a b|$X|"
    line = node.run('echo "$X"; pwd', env={"X": "x y"}, cwd=str(tmp_path))
    assert line.stdout == f"x y\n{tmp_path}\n"


def test_check_raises_node_error_naming_node_and_command(node: Node) -> None:
    with pytest.raises(NodeError) as caught:
        node.run("echo boom >&2; exit 7")
    assert "here" in str(caught.value) and "exit 7" in str(caught.value)
    assert "boom" in str(caught.value)
    assert caught.value.result is not None and caught.value.result.exit_code == 7


def test_timeout_fires(node: Node) -> None:
    started = time.monotonic()
    result = node.run("echo begun; sleep 30", timeout=1.0, check=False)
    assert result.timed_out and result.exit_code is None and result.stdout == "begun\n"
    assert time.monotonic() - started < 5
    with pytest.raises(NodeError, match="timed out"):
        node.run(["sleep", "30"], timeout=0.5)


def test_stream_delivers_lines_as_they_arrive_with_node_time(node: Node) -> None:
    lines: list[tuple[StreamLine, float]] = []
    script = "echo one; echo warn >&2; sleep 0.6; printf 'two'"
    before = time.time()
    result = node.stream(script, lambda line: lines.append((line, time.time())), timeout=10)
    assert result.ok
    texts = [(line.stream, line.text) for line, _ in lines]
    assert sorted(texts) == [("stderr", "warn"), ("stdout", "one"), ("stdout", "two")]
    first = next(item for item in lines if item[0].text == "one")
    last = next(item for item in lines if item[0].text == "two")
    assert last[1] - first[1] > 0.4, "the first line arrived only at the end"
    assert before - 1 < first[0].time < last[0].time < time.time() + 1
    assert last[0].time - first[0].time > 0.5


def test_stream_timeout(node: Node) -> None:
    lines: list[StreamLine] = []
    result = node.stream("echo a; sleep 30", lines.append, timeout=1.0, check=False)
    assert result.timed_out and [line.text for line in lines] == ["a"]


def test_put_and_get_round_trip(node: Node, tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 100)
    remote = tmp_path / "remote.bin"
    node.put(source, str(remote))
    assert node.run(["wc", "-c", str(remote)]).stdout.split()[0] == "25600"
    back = tmp_path / "back.bin"
    node.get(str(remote), back)
    assert back.read_bytes() == source.read_bytes()
    with pytest.raises(NodeError, match="here"):
        node.get(str(tmp_path / "missing"), tmp_path / "x")


@needs_sshd
def test_ssh_reuses_one_connection(sshd: SshServer) -> None:  # noqa: F811
    with SshNode("a", "127.0.0.1", ssh_options(sshd)) as ssh_node:
        ssh_node.run("true")
        transport = ssh_node._connect().transport
        for _ in range(5):
            ssh_node.run("true")
        assert ssh_node._connect().transport is transport and ssh_node.reconnects == 0


@needs_sshd
def test_ssh_rejects_a_wrong_host_key(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    wrong = tmp_path / "known_hosts"
    other = SshServer(tmp_path / "other").prepare()  # keys only: a different host key
    wrong.write_text(other.known_hosts.read_text().replace(str(other.port), str(sshd.port)))
    node = SshNode("wrongkey", "127.0.0.1", ssh_options(sshd, known_hosts=str(wrong)))
    with pytest.raises(NodeError, match=r"wrongkey: host key verification failed"):
        node.run("true")


@needs_sshd
def test_ssh_rejects_an_unknown_host(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    node = SshNode("unknown", "127.0.0.1", ssh_options(sshd, known_hosts=str(empty)))
    with pytest.raises(NodeError, match="not in known_hosts"):
        node.run("true")


@needs_sshd
def test_ssh_auto_adds_only_when_checking_is_off(
    sshd: SshServer,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    options = ssh_options(sshd, known_hosts=str(empty), strict_host_key_checking=False)
    with SshNode("loose", "127.0.0.1", options) as node:
        assert node.run("echo ok").stdout == "ok\n"
    assert "host key checking is off" in caplog.text
    assert empty.read_text() == "", "the known_hosts file must not be modified"


@needs_sshd
def test_ssh_honors_config_file(sshd: SshServer) -> None:  # noqa: F811
    options = ssh_options(sshd, key=None, config_file=str(sshd.client_config))
    with SshNode("cfg", "127.0.0.1", options) as node:
        assert node.run("echo via-config").stdout == "via-config\n"


@needs_sshd
def test_ssh_jump_host(sshd: SshServer) -> None:  # noqa: F811
    jump = f"{sshd.user}@127.0.0.1:{sshd.port}"
    options = ssh_options(sshd, jump_host=jump)
    with SshNode("jumped", "127.0.0.1", options) as node:
        assert node.run("echo hop").stdout == "hop\n"
        assert node._connect().gateway is not None


@needs_sshd
def test_ssh_reconnects_once_after_server_restart(tmp_path: Path) -> None:
    server = SshServer(tmp_path / "srv").prepare().start()
    node = SshNode("flaky", "127.0.0.1", ssh_options(server))
    try:
        assert node.run("echo before").stdout == "before\n"
        server.stop()
        server.start()
        assert node.run("echo after").stdout == "after\n"
        assert node.reconnects == 1
        server.stop()
        with pytest.raises(NodeError, match=r"flaky: ssh to 127\.0\.0\.1 failed \(retried once\)"):
            node.run("echo gone")
        assert node.reconnects >= 2
    finally:
        node.close()
        server.stop()


@needs_sshd
def test_ssh_connection_refused_names_the_node(tmp_path: Path) -> None:
    server = SshServer(tmp_path / "never").prepare()  # never started
    node = SshNode("down", "127.0.0.1", ssh_options(server))
    with pytest.raises(NodeError, match=r"^down: ssh to 127\.0\.0\.1 failed"):
        node.run("true")


def test_pool_runs_in_parallel_on_a_local_testbed() -> None:
    nodes = [{"name": f"n{i}", "address": "127.0.0.1"} for i in range(4)]
    testbed = Testbed.model_validate({"name": "tb", "kind": "local", "nodes": nodes})
    with NodePool.from_testbed(testbed) as pool:
        assert all(isinstance(node, LocalNode) for node in pool)
        started = time.monotonic()
        results = pool.run_all("sleep 0.5; echo done")
        assert time.monotonic() - started < 1.5
    assert sorted(results) == ["n0", "n1", "n2", "n3"]
    assert all(not isinstance(r, NodeError) and r.stdout == "done\n" for r in results.values())


def test_pool_returns_errors_per_node() -> None:
    pool = NodePool({"a": LocalNode("a"), "b": LocalNode("b")})
    results = pool.map(lambda node: node.run("exit 1" if node.name == "b" else "true"))
    assert not isinstance(results["a"], NodeError)
    assert isinstance(results["b"], NodeError) and results["b"].node == "b"


@needs_sshd
def test_pool_builds_ssh_nodes(sshd: SshServer) -> None:  # noqa: F811
    ssh = ssh_options(sshd).model_dump()
    nodes = [{"name": n, "address": "127.0.0.1", "ssh": ssh} for n in ("x", "y")]
    testbed = Testbed.model_validate({"name": "tb", "kind": "ssh", "nodes": nodes})
    with NodePool.from_testbed(testbed) as pool:
        results = pool.run_all(["echo", "hi"])
    assert {name: r.stdout for name, r in results.items() if not isinstance(r, NodeError)} == {
        "x": "hi\n",
        "y": "hi\n",
    }


@needs_sshd
def test_many_instant_commands_never_drop_the_connection(sshd: SshServer) -> None:  # noqa: F811
    """A command that ends before the client's end-of-input reaches the server must not make
    the client send that EOF after its own close: sshd then drops the whole connection ("ieof
    packet referred to nonexistent channel"), and with it every session on it."""
    with SshNode("a", "127.0.0.1", ssh_options(sshd)) as ssh_node:
        session = ssh_node.open_session(["cat"], lambda line: None)
        with ThreadPoolExecutor(max_workers=4) as workers:
            codes = list(workers.map(lambda _: ssh_node.run("true").exit_code, range(400)))
        assert codes == [0] * 400 and ssh_node.reconnects == 0
        assert session.alive, "the long-lived session on the same connection survived"
        session.close()
