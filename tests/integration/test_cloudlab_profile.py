"""cloudlab/profile.py prints a request RSpec with the nodes, hardware type and LANs asked for."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support import paths

pytest.importorskip("geni.rspec.pg", reason="geni-lib is not installed")

ROOT = paths.REPO
PROFILE = ROOT / "cloudlab" / "profile.py"
SETUP = ROOT / "cloudlab" / "node-setup.sh"
NS = {"r": "http://www.geni.net/resources/rspec/3"}


def request(*args: str) -> ET.Element:
    done = subprocess.run(
        [sys.executable, str(PROFILE), *args],  # as a user runs it
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    root = ET.fromstring(done.stdout)
    assert root.get("type") == "request"
    return root


def test_default_is_two_nodes_on_one_lan() -> None:
    root = request()
    nodes = root.findall("r:node", NS)
    assert [n.get("client_id") for n in nodes] == ["node0", "node1"]
    for node in nodes:
        assert node.find("r:hardware_type", NS).get("name") == "d7525"  # type: ignore[union-attr]
        image = node.find("r:sliver_type/r:disk_image", NS)
        assert image is not None and "UBUNTU22-64-STD" in image.get("name", "")
    links = root.findall("r:link", NS)
    assert [link.get("client_id") for link in links] == ["rail0"]
    members = [ref.get("client_id") for ref in links[0].findall("r:interface_ref", NS)]
    assert members == ["node0:rail0", "node1:rail0"]


def test_parameters_shape_the_request() -> None:
    root = request("--nodeCount", "3", "--hwType", "c240g5", "--lanCount", "4",
                   "--linkSpeed", "25000000")  # fmt: skip
    nodes = root.findall("r:node", NS)
    assert len(nodes) == 3
    assert {n.find("r:hardware_type", NS).get("name") for n in nodes} == {"c240g5"}  # type: ignore[union-attr]
    links = root.findall("r:link", NS)
    assert [link.get("client_id") for link in links] == [f"rail{k}" for k in range(4)]
    for k, link in enumerate(links):
        assert len(link.findall("r:interface_ref", NS)) == 3
        capacities = {p.get("capacity") for p in link.findall("r:property", NS)}
        assert capacities == {"25000000"}
        for i, node in enumerate(nodes):
            iface = node.find(f"r:interface[@client_id='node{i}:rail{k}']", NS)
            assert iface is not None
            ip = iface.find("r:ip", NS)
            assert ip is not None and ip.get("address") == f"10.{10 + k}.0.{i + 1}"


def test_every_node_runs_the_setup_script() -> None:
    root = request("--lanCount", "0")
    assert root.findall("r:link", NS) == []
    for node in root.findall("r:node", NS):
        execute = node.find("r:services/r:execute", NS)
        assert execute is not None
        body = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", execute.get("command", ""))
        assert body is not None
        assert base64.b64decode(body.group(1)) == SETUP.read_bytes()


def test_setup_script_is_valid_bash_and_installs_what_r2bench_drives() -> None:
    subprocess.run(["bash", "-n", str(SETUP)], check=True)
    text = SETUP.read_text()
    for package in ("build-essential", "openmpi-bin", "infiniband-diags", "rdma-core",
                    "iproute2", "nftables"):  # fmt: skip
        assert package in text
    assert "geni-get key" in text and "authorized_keys" in text


@pytest.mark.slow
def test_the_documented_install_works_in_a_fresh_venv(tmp_path: Path) -> None:
    """cloudlab/README.md's step 0 as written, in a new virtual environment (needs PyPI), then
    the profile. Before: `pip install -e '.[report]' geni-lib` left out six, which geni-lib
    imports without declaring it, and profile.py died of ModuleNotFoundError."""
    readme = (ROOT / "cloudlab" / "README.md").read_text()
    block = re.search(r"```bash\n(  cd r2bench && python3 -m venv .*?)```", readme, re.DOTALL)
    assert block, "step 0's code block"
    steps = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    steps[0] = steps[0].replace("cd r2bench && ", "").replace(".venv", str(tmp_path / "venv"))
    script = " && ".join([f"cd {ROOT}", *steps, "python3 cloudlab/profile.py"])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=1800, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "<rspec" in proc.stdout
