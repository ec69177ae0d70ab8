"""Write the sysfs trees in this folder (run from anywhere; it rewrites them in place).

The trees are written from facts, not captured: the kernel's sysfs layout (Linux
Documentation/ABI/testing/sysfs-class-infiniband and sysfs-class-net; drivers/infiniband/core/
sysfs.c), the DGX H100 names kept in tests/data/hardware/dgx-h100-ibdev2netdev.txt, the
dual-port mlx4 in tests/data/hardware/mlx4-dualport-ib.txt, and the shapes named by issue 41
(an 8x NDR host with a RoCE LAG `mlx5_bond_0`; port 2 of a dual-port HCA). What the kernel
does and a plain file cannot: an InfiniBand port's `gid_attrs/ndevs/0` answers EINVAL (no
netdev on an IB GID): here it is a folder, which `cat` cannot read either. The class folders
are links into the device tree, as on a real host; `class/net/bonding_masters` is the file the
bonding driver adds there.

    python tests/data/sysfs/make_trees.py
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
IPOIB, ETHERNET = 32, 1
NDR_RATE = "400 Gb/sec (4X NDR)"


@dataclass(frozen=True)
class Port:
    link_layer: str
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = NDR_RATE
    gid_netdev: str | None = None  # RoCE only: the GID table's netdev


@dataclass(frozen=True)
class Netdev:
    name: str
    dev_port: int = 0
    kind: int = ETHERNET
    operstate: str = "up"
    master: str | None = None


@dataclass(frozen=True)
class Function:
    """One PCI function: its RDMA device (if any) and its netdevs."""

    bdf: str
    rdma: str | None
    ports: tuple[Port, ...]
    netdevs: tuple[Netdev, ...]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _netdev(root: Path, folder: Path, netdev: Netdev, pci: Path | None) -> None:
    """A netdev's folder and its `class/net` link (`device` only on a PCI function's)."""
    _write(folder / "dev_port", str(netdev.dev_port))
    _write(folder / "type", str(netdev.kind))
    _write(folder / "operstate", netdev.operstate)
    if pci is not None:
        (folder / "device").symlink_to(Path("../.."))  # net/<if>/device: its PCI function
    if netdev.master:
        (folder / "master").symlink_to(Path("../../../../virtual/net") / netdev.master)
    (root / "class" / "net").mkdir(parents=True, exist_ok=True)
    (root / "class" / "net" / netdev.name).symlink_to(Path("../..") / folder.relative_to(root))


def build(root: Path, functions: list[Function], virtual: tuple[Netdev, ...] = ()) -> None:
    """One host's tree under `root`, laid out as the kernel lays it out."""
    if root.exists():
        shutil.rmtree(root)
    for function in functions:
        pci = root / "devices" / "pci0000:00" / function.bdf
        pci.mkdir(parents=True)
        for netdev in function.netdevs:
            _netdev(root, pci / "net" / netdev.name, netdev, pci)
        if function.rdma is None:
            continue
        device = pci / "infiniband" / function.rdma
        (device / "device").parent.mkdir(parents=True)
        (device / "device").symlink_to(Path("../.."))
        for number, port in enumerate(function.ports, start=1):
            folder = device / "ports" / str(number)
            _write(folder / "state", port.state)
            _write(folder / "phys_state", port.phys_state)
            _write(folder / "link_layer", port.link_layer)
            _write(folder / "rate", port.rate)
            _write(folder / "counters" / "port_xmit_data", "0")
            _write(folder / "counters" / "port_rcv_data", "0")
            ndevs = folder / "gid_attrs" / "ndevs"
            if port.gid_netdev is None:
                (ndevs / "0").mkdir(parents=True)  # EINVAL on an IB port: unreadable
                (ndevs / "0" / ".gitkeep").write_text("")  # git keeps no empty folder
            else:
                _write(ndevs / "0", port.gid_netdev)
        (root / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
        (root / "class" / "infiniband" / function.rdma).symlink_to(
            Path("../..") / device.relative_to(root)
        )
    for netdev in virtual:
        _netdev(root, root / "devices" / "virtual" / "net" / netdev.name, netdev, None)
    if any(n.master for f in functions for n in f.netdevs):
        _write(root / "class" / "net" / "bonding_masters", "bond0")


def ndr8_bond() -> tuple[list[Function], tuple[Netdev, ...]]:
    """Eight single-port ConnectX-7 NDR HCAs (the DGX H100's names and buses; IPoIB up on
    four, down on two, absent on two) and a RoCE LAG over a dual-port Ethernet NIC:
    `mlx5_bond_0` on PF0, its GID table on `bond0`, both PF netdevs enslaved to it."""
    hcas = [
        ("mlx5_0", "0000:18:00.0", "ibp24s0", "up"),
        ("mlx5_3", "0000:40:00.0", "ibp64s0", "up"),
        ("mlx5_4", "0000:4f:00.0", "ibp79s0", "down"),
        ("mlx5_5", "0000:5e:00.0", "ibp94s0", "down"),
        ("mlx5_6", "0000:9a:00.0", "ibp154s0", "up"),
        ("mlx5_7", "0000:ce:00.0", None, ""),
        ("mlx5_8", "0000:c0:00.0", "ibp192s0", "up"),
        ("mlx5_9", "0000:dc:00.0", None, ""),
    ]
    functions = [
        Function(bdf, name, (Port("InfiniBand"),),
                 (Netdev(ipoib, kind=IPOIB, operstate=up),) if ipoib else ())
        for name, bdf, ipoib, up in hcas
    ]  # fmt: skip
    eth = Port("Ethernet", rate="100 Gb/sec (2X HDR)", gid_netdev="bond0")
    functions += [
        Function("0000:29:00.0", "mlx5_bond_0", (eth,), (Netdev("ens1f0np0", master="bond0"),)),
        Function("0000:29:00.1", None, (), (Netdev("ens1f1np1", master="bond0"),)),
    ]
    return functions, (Netdev("bond0"), Netdev("lo", operstate="unknown"))


def dual_port_ib() -> tuple[list[Function], tuple[Netdev, ...]]:
    """tests/data/hardware/mlx4-dualport-ib.txt's HCA: one PCI function, two InfiniBand
    ports, one IPoIB netdev per port told apart by `dev_port` (port 2 DOWN, its IPoIB down)."""
    ports = (Port("InfiniBand", rate="56 Gb/sec (4X FDR)"),
             Port("InfiniBand", "1: DOWN", "3: Disabled", "56 Gb/sec (4X FDR)"))  # fmt: skip
    netdevs = (Netdev("ib0", 0, IPOIB), Netdev("ib1", 1, IPOIB, operstate="down"))
    return [Function("0000:81:00.0", "mlx4_0", ports, netdevs)], (
        Netdev("lo", operstate="unknown"),
    )


def main() -> None:
    """Rewrite every tree."""
    for name, host in (("ndr8-bond", ndr8_bond()), ("dualport-ib", dual_port_ib())):
        build(HERE / name, *host)


if __name__ == "__main__":
    main()
