"""Re-create the trees in this folder from the public archives they come from (README.md here
names each archive, its repository and commit).

    python tests/data/sysfs/captured/extract.py ARCHIVE [--out DIR] [--check]

ARCHIVE is one of the archives the README names (a `.tar.bz2` made by hwloc-gather-topology,
or a `.ttar` text archive), fetched from its repository; the trees taken from it are written
under DIR (default: this folder), each in a folder of its own named as below. `--check` writes
nothing and compares instead: it exits 1 and lists every difference between what the archive
gives and what is stored here.

Only what `r2bench/testbeds/discover.py`'s SCRIPT and `r2bench/sweep/preflight.py`'s
node_check_script read is taken, byte for byte, in the archive's own layout (symbolic links
stay links, with their targets as the archive has them, dangling or not):
- `class/infiniband/<dev>` (a link or a folder) and, in the device's folder, each
  `ports/<n>/{state,phys_state,link_layer,rate}` and `ports/<n>/gid_attrs/{ndevs,types}/0`, and
  the `device` link;
- `class/net/<if>` (a link or a folder) and, in the interface's folder, `type`, `operstate`,
  `dev_port`, `dev_id`, `address`, `carrier`, `bonding/slaves` and the links `device` and
  `master`; `class/net/bonding_masters`;
- the folders of the PCI functions that a `device` link names, with their `net/<if>` folders
  (as above) and their `class` file (the PCI class code; it keeps a function's folder in git,
  which keeps no empty folder).
Nothing is changed or added.
"""

from __future__ import annotations

import argparse
import filecmp
import posixpath
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

PORT_FILES = ("state", "phys_state", "link_layer", "rate", "gid_attrs/ndevs/0", "gid_attrs/types/0")
NETDEV_FILES = ("type", "operstate", "dev_port", "dev_id", "address", "carrier", "bonding/slaves")
NETDEV_LINKS = ("device", "master")


@dataclass(frozen=True)
class Tree:
    """One tree of this folder: the archive it is taken from and where `sys` is inside it."""

    name: str
    archive: str  # the archive's file name
    root: str  # the folder inside the archive that stands for /sys


TREES = (
    Tree("hwloc-mic-mlx4-fdr", "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2", "32em64t-2n8c+1mic/sys"),
    Tree("hwloc-r910-qib-qdr", "40intel64-2g2n4c+pcilocality.tar.bz2", "40intel64-2g2n4c+pci/sys"),
    Tree("procfs-fixture", "fixtures.ttar", "fixtures/sys"),
    Tree("node-exporter-fixture", "sys.ttar", "sys"),
)


@dataclass(frozen=True)
class Entry:
    """A file (`data`), a folder (neither) or a symbolic link (`target`)."""

    data: bytes | None = None
    target: str | None = None


Archive = dict[str, Entry]
"""Every entry of an archive, by its path (no leading or trailing slash)."""


def read_tar(path: Path) -> Archive:
    entries: Archive = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            name = member.name.strip("/")
            if member.issym():
                entries[name] = Entry(target=member.linkname)
            elif member.isdir():
                entries[name] = Entry()
            elif member.isfile():
                handle = tar.extractfile(member)
                entries[name] = Entry(data=handle.read() if handle else b"")
    return entries


def read_ttar(path: Path) -> Archive:
    """A ttar text archive: `Directory: P`, or `Path: P` then `SymlinkTo: T` or `Lines: N` and
    N lines (`NULLBYTE` stands for a zero byte; a last line ending in `EOF` has no newline)."""
    entries: Archive = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("Directory: "):
            entries[line[len("Directory: ") :].strip("/")] = Entry()
        elif line.startswith("Path: "):
            name = line[len("Path: ") :].strip("/")
            head = lines[i]
            i += 1
            if head.startswith("SymlinkTo: "):
                entries[name] = Entry(target=head[len("SymlinkTo: ") :])
                continue
            if not head.startswith("Lines: "):
                raise ValueError(f"{path}: {name}: expected Lines:, got {head!r}")
            count = int(head[len("Lines: ") :])
            body = lines[i : i + count]
            i += count
            text = "".join(f"{b}\n" for b in body)
            if text.endswith("EOF\n"):
                text = text[: -len("EOF\n")]
            entries[name] = Entry(data=text.replace("NULLBYTE", "\0").encode("utf-8"))
    return entries


def read_archive(path: Path) -> Archive:
    return read_ttar(path) if path.name.endswith(".ttar") else read_tar(path)


class Selection:
    """What one tree keeps of an archive, found by walking it as the scripts do."""

    def __init__(self, archive: Archive, root: str) -> None:
        self.archive = archive
        self.root = root
        self.kept: dict[str, Entry] = {}  # path below root -> entry
        self.functions: set[str] = set()

    def resolve(self, path: str, depth: int = 0) -> str | None:
        """`path` (below root) with every link followed; None where one dangles."""
        parts = path.split("/")
        done = ""
        for index, part in enumerate(parts):
            current = posixpath.join(done, part) if done else part
            entry = self.archive.get(f"{self.root}/{current}")
            if entry is None:
                return None
            if entry.target is not None:
                if depth > 40:
                    return None
                target = posixpath.normpath(posixpath.join(done, entry.target.rstrip("/")))
                rest = "/".join(parts[index + 1 :])
                return self.resolve(posixpath.join(target, rest) if rest else target, depth + 1)
            done = current
        return done

    def keep(self, path: str) -> Entry | None:
        entry = self.archive.get(f"{self.root}/{path}")
        if entry is not None:
            self.kept[path] = entry
        return entry

    def children(self, folder: str) -> list[str]:
        prefix = f"{self.root}/{folder}/"
        return sorted(
            name[len(prefix) :]
            for name in self.archive
            if name.startswith(prefix) and "/" not in name[len(prefix) :]
        )

    def netdev(self, folder: str) -> None:
        """An interface's folder: its files, its links and the PCI function `device` names."""
        for name in NETDEV_FILES:
            self.keep(f"{folder}/{name}")
        for name in NETDEV_LINKS:
            if self.keep(f"{folder}/{name}") is not None and name == "device":
                function = self.resolve(f"{folder}/device")
                if function is not None:
                    self.function(function)

    def function(self, folder: str) -> None:
        """A PCI function: its class code and its interfaces."""
        if folder in self.functions:
            return
        self.functions.add(folder)
        self.keep(f"{folder}/class")
        for name in self.children(f"{folder}/net"):
            self.netdev(f"{folder}/net/{name}")

    def select(self) -> dict[str, Entry]:
        for name in self.children("class/infiniband"):
            self.keep(f"class/infiniband/{name}")
            device = self.resolve(f"class/infiniband/{name}")
            if device is None:
                continue
            for port in self.children(f"{device}/ports"):
                for file in PORT_FILES:
                    self.keep(f"{device}/ports/{port}/{file}")
            if self.keep(f"{device}/device") is not None:
                function = self.resolve(f"{device}/device")
                if function is not None:
                    self.function(function)
        for name in self.children("class/net"):
            self.keep(f"class/net/{name}")
            folder = self.resolve(f"class/net/{name}")
            if folder is not None and self.archive[f"{self.root}/{folder}"].data is None:
                self.netdev(folder)
        return self.kept


def write(kept: dict[str, Entry], out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path, entry in sorted(kept.items()):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.target is not None:
            target.symlink_to(entry.target)
        elif entry.data is not None:
            target.write_bytes(entry.data)
        else:
            target.mkdir(exist_ok=True)


def differences(made: Path, stored: Path) -> list[str]:
    """Each path that differs between two trees (kind, link target or bytes)."""

    def listing(root: Path) -> dict[str, Path]:
        found = {}
        for path in root.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                continue  # folders are implied by what they hold
            found[str(path.relative_to(root))] = path
        return found

    left, right = listing(made), listing(stored)
    diffs = [f"only in the archive: {p}" for p in sorted(left.keys() - right.keys())]
    diffs += [f"only stored: {p}" for p in sorted(right.keys() - left.keys())]
    for name in sorted(left.keys() & right.keys()):
        a, b = left[name], right[name]
        if a.is_symlink() or b.is_symlink():
            same = a.is_symlink() and b.is_symlink() and a.readlink() == b.readlink()
        else:
            same = filecmp.cmp(a, b, shallow=False)
        if not same:
            diffs.append(f"differs: {name}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--check", action="store_true", help="compare with the stored trees")
    args = parser.parse_args(argv)
    trees = [t for t in TREES if t.archive == args.archive.name]
    if not trees:
        names = ", ".join(t.archive for t in TREES)
        parser.error(f"{args.archive.name}: not an archive of this folder (one of: {names})")
    archive = read_archive(args.archive)
    status = 0
    for tree in trees:
        kept = Selection(archive, tree.root).select()
        if not args.check:
            write(kept, args.out / tree.name)
            print(f"{tree.name}: {len(kept)} entries")
            continue
        with tempfile.TemporaryDirectory() as scratch:
            write(kept, Path(scratch) / tree.name)
            diffs = differences(Path(scratch) / tree.name, args.out / tree.name)
        for line in diffs:
            print(f"{tree.name}: {line}")
        status |= 1 if diffs else 0
        print(f"{tree.name}: {'differs' if diffs else 'same as stored'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
