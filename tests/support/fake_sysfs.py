"""Fake sysfs trees laid out as the kernel lays them out, filled with values from real hosts.

The layout: `class/infiniband/<dev>/device` links to a PCI function (`devices/pci0000:00/<bdf>`)
whose `net/<ifname>/` holds the netdevs of that function (`dev_port`: the port, from 0;
`type`: 32 for IPoIB, 1 for Ethernet; `operstate`; `device` linking back), and
`class/net/<ifname>` links to that folder. `ports/<n>/` has `state`, `phys_state`,
`link_layer`, the two data counters, and `gid_attrs/ndevs/0` only on Ethernet (RoCE) ports: the
kernel answers EINVAL for an InfiniBand port's GID netdev, so the file is left out.

The hosts below are built from real outputs kept in tests/data/hardware/ (README.md there
names each source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

IPOIB, ETHERNET = 32, 1
PORT_STATES = {"ACTIVE": ("4: ACTIVE", "5: LinkUp"), "DOWN": ("1: DOWN", "3: Disabled")}


@dataclass(frozen=True)
class Netdev:
    """One kernel interface of a PCI function."""

    name: str
    dev_port: int = 0
    kind: int = ETHERNET
    operstate: str = "up"


@dataclass(frozen=True)
class Port:
    """One port of an RDMA device."""

    link_layer: str  # InfiniBand | Ethernet
    state: str = "ACTIVE"
    gid_netdev: str | None = None  # gid_attrs/ndevs/0 (RoCE only)
    xmit_words: str = "0"
    rcv_words: str = "0"


@dataclass(frozen=True)
class Device:
    """An RDMA device, its ports (1..n) and the netdevs of its PCI function."""

    name: str
    bdf: str
    ports: tuple[Port, ...]
    netdevs: tuple[Netdev, ...] = field(default_factory=tuple)


def build(root: Path, devices: list[Device], others: tuple[Netdev, ...] = ()) -> Path:
    """Write the tree under `root` (the stand-in for /sys) and return it. `others` are
    netdevs of no RDMA device (a bond master, an onboard NIC)."""
    for device in devices:
        pci = root / "devices" / "pci0000:00" / device.bdf
        pci.mkdir(parents=True, exist_ok=True)
        ib = root / "class" / "infiniband" / device.name
        ib.mkdir(parents=True)
        (ib / "device").symlink_to(pci)
        for number, port in enumerate(device.ports, start=1):
            folder = ib / "ports" / str(number)
            (folder / "counters").mkdir(parents=True)
            state, phys = PORT_STATES[port.state]
            (folder / "state").write_text(state + "\n")
            (folder / "phys_state").write_text(phys + "\n")
            (folder / "link_layer").write_text(port.link_layer + "\n")
            (folder / "counters" / "port_xmit_data").write_text(port.xmit_words + "\n")
            (folder / "counters" / "port_rcv_data").write_text(port.rcv_words + "\n")
            if port.gid_netdev is not None:
                (folder / "gid_attrs" / "ndevs").mkdir(parents=True)
                (folder / "gid_attrs" / "ndevs" / "0").write_text(port.gid_netdev + "\n")
        for netdev in device.netdevs:
            _netdev(root, netdev, pci / "net", pci)
    for netdev in others:
        _netdev(root, netdev, root / "devices" / "virtual" / "net", None)
    return root


def _netdev(root: Path, netdev: Netdev, parent: Path, pci: Path | None) -> None:
    folder = parent / netdev.name
    folder.mkdir(parents=True)
    (folder / "dev_port").write_text(f"{netdev.dev_port}\n")
    (folder / "type").write_text(f"{netdev.kind}\n")
    (folder / "operstate").write_text(netdev.operstate + "\n")
    if pci is not None:
        (folder / "device").symlink_to(pci)
    link = root / "class" / "net" / netdev.name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(folder)


def ib(name: str, bdf: str, ipoib: str | None, state: str = "ACTIVE", up: str = "up") -> Device:
    """A single-port InfiniBand HCA (a ConnectX-7 function), its IPoIB netdev if any."""
    netdevs = (Netdev(ipoib, kind=IPOIB, operstate=up),) if ipoib else ()
    return Device(name, bdf, (Port("InfiniBand", state),), netdevs)


def roce(name: str, bdf: str, netdev: str, state: str = "ACTIVE", up: str = "up") -> Device:
    """A single-port Ethernet (RoCE) function."""
    return Device(
        name, bdf, (Port("Ethernet", state, gid_netdev=netdev),), (Netdev(netdev, operstate=up),)
    )


def dgx_h100(ipoib: bool = True) -> list[Device]:
    """tests/data/hardware/dgx-h100-ibdev2netdev.txt: eight IB HCAs and three Ethernet ports,
    interleaved in device order (mlx5_1, mlx5_2, mlx5_7 are Ethernet), IPoIB named ibp<bus>s0
    after the PCI bus; `ipoib=False`: the same host with IPoIB not configured."""
    hcas = [
        ("mlx5_0", "0000:18:00.0", "ibp24s0"),
        ("mlx5_3", "0000:40:00.0", "ibp64s0"),
        ("mlx5_4", "0000:4f:00.0", "ibp79s0"),
        ("mlx5_5", "0000:5e:00.0", "ibp94s0"),
        ("mlx5_6", "0000:9a:00.0", "ibp154s0"),
        ("mlx5_8", "0000:c0:00.0", "ibp192s0"),
        ("mlx5_9", "0000:ce:00.0", "ibp206s0"),
        ("mlx5_10", "0000:dc:00.0", "ibp220s0"),
    ]
    devices = [ib(name, bdf, netdev if ipoib else None) for name, bdf, netdev in hcas]
    devices += [
        roce("mlx5_1", "0000:29:00.0", "enp41s0f0np0", state="DOWN", up="down"),
        roce("mlx5_2", "0000:29:00.1", "enp41s0f1np1", state="DOWN", up="down"),
        roce("mlx5_7", "0000:aa:00.0", "enp170s0np0"),
    ]
    return sorted(devices, key=lambda d: d.name)


def mlx4_dual_port() -> list[Device]:
    """tests/data/hardware/mlx4-dualport-ib.txt: one PCI function, two IB ports, one IPoIB
    netdev per port told apart only by dev_port (port 2 down)."""
    return [
        Device(
            "mlx4_0",
            "0000:81:00.0",
            (Port("InfiniBand"), Port("InfiniBand", "DOWN")),
            (Netdev("ib0", 0, IPOIB), Netdev("ib1", 1, IPOIB, operstate="down")),
        )
    ]


def bonded_roce() -> tuple[list[Device], tuple[Netdev, ...]]:
    """A RoCE LAG: `mlx5_bond_0 port 1 ==> bond0`, the GID table on the bond master, the
    function's own netdev a bond slave."""
    device = Device(
        "mlx5_bond_0",
        "0000:3b:00.0",
        (Port("Ethernet", gid_netdev="bond0"),),
        (Netdev("eth01", 0),),
    )
    return [device], (Netdev("bond0"),)
