"""`r2bench cloudlab testbed`: manifests written from CloudLab's schema -> testbed files."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.cloudlab.manifest import ManifestError, manifest_testbed
from r2bench.config.load import load_testbed
from r2bench.config.testbed import NicKind

DATA = Path(__file__).parent / "data" / "cloudlab"
ROOT = Path(__file__).resolve().parent.parent
GOOD = ["two-nodes-one-lan.xml", "two-nodes-four-rails.xml", "one-node-no-lan.xml"]
BAD = {
    "truncated.xml": "not well-formed XML at line 25, column 3: no element found (truncated?)",
    "malformed.xml": "not well-formed XML at line 6, column 7: mismatched tag",
    "request.xml": 'type="request", not type="manifest"',
    "no-login.xml": "node node1 has no <services><login>",
    "empty.xml": "the manifest is empty",
    "not-rspec.xml": "the root element is <html>, not <rspec>",
    "bad-port.xml": "node node0: login port 'ssh' is not a port number",
}
NO_FAULT = """\
name: smoke
libraries: {r2ccl: {recipe: r2ccl, ref: f45cbcb}}
sizes: {begin: 8, end: 1M, factor: 4}
"""


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_two_nodes_one_lan() -> None:
    testbed = manifest_testbed((DATA / "two-nodes-one-lan.xml").read_text())
    assert testbed.name == "r2b-exp"
    assert [n.name for n in testbed.nodes] == ["node0", "node1"]
    node0 = testbed.nodes[0]
    assert node0.address == "d7525-10s10301.wisc.cloudlab.us"
    assert (node0.ssh.user, node0.ssh.port) == ("alice", 22)
    control, rail0 = node0.nics
    assert control.management and control.address == "128.105.145.10"
    assert control.kind is NicKind.ETH
    assert (rail0.name, rail0.netdev, rail0.address) == ("rail0", "eth2", "10.10.0.1")
    assert not rail0.management
    assert node0.data_nics == [rail0]


def test_user_choice() -> None:
    text = (DATA / "two-nodes-one-lan.xml").read_text()
    assert manifest_testbed(text, user="bob").nodes[1].ssh.user == "bob"
    with pytest.raises(ManifestError, match=r"no login for user 'eve' \(it has: alice, bob\)"):
        manifest_testbed(text, user="eve")


def test_four_rails_and_port() -> None:
    four = manifest_testbed((DATA / "two-nodes-four-rails.xml").read_text(), name="paper")
    assert four.name == "paper"
    for i, node in enumerate(four.nodes):
        assert [n.name for n in node.data_nics] == ["rail0", "rail1", "rail2", "rail3"]
        assert [n.address for n in node.data_nics] == [f"10.{10 + k}.0.{i + 1}" for k in range(4)]
    one = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    assert one.nodes[0].ssh.port == 2222 and one.nodes[0].data_nics == []


@pytest.mark.parametrize("name", GOOD)
def test_written_file_loads_and_plans(name: str, tmp_path: Path) -> None:
    out = tmp_path / "testbed.yaml"
    code, _, err = run("cloudlab", "testbed", str(DATA / name), "-o", str(out))
    assert code == 0, err
    assert out.read_text().startswith("# Made by `r2bench cloudlab testbed`")
    assert len(load_testbed(out).nodes) >= 1
    experiment = tmp_path / "smoke.yaml"
    experiment.write_text(NO_FAULT)
    code, _, err = run("plan", str(experiment), "-t", str(out))
    assert code == 0, err


def test_stdin_to_stdout() -> None:
    code, out, _ = run("cloudlab", "testbed", "-", stdin=(DATA / GOOD[1]).read_text())
    assert code == 0
    assert "name: r2b-exp" in out and "rail3" in out


@pytest.mark.parametrize(("name", "message"), sorted(BAD.items()))
def test_bad_manifest_is_one_line_and_exit_2(name: str, message: str, tmp_path: Path) -> None:
    out = tmp_path / "testbed.yaml"
    code, stdout, err = run("cloudlab", "testbed", str(DATA / name), "-o", str(out))
    assert code == 2
    assert stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{DATA / name}: ") and message in lines[0]
    assert not out.exists()


def test_missing_file_exit_2(tmp_path: Path) -> None:
    code, _, err = run("cloudlab", "testbed", str(tmp_path / "nope.xml"))
    assert code == 2 and "cannot read the manifest: No such file or directory" in err


def test_every_truncation_fails_cleanly() -> None:
    text = (DATA / "two-nodes-one-lan.xml").read_text()
    for cut in range(0, len(text) - 10, 37):
        with pytest.raises(ManifestError):
            manifest_testbed(text[:cut])
