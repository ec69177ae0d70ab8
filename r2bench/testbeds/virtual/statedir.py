"""The state directory of a virtual testbed and its manifest (what `up` created, for `down`).

The manifest is rewritten (atomically) before each object is created, so a crash in the middle
of `up` leaves a record that `down` can clean from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from r2bench.errors import EnvironmentFailure
from r2bench.safeio import atomic_write

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class StatePaths:
    """Every file a virtual testbed keeps under its state directory."""

    root: Path

    @property
    def manifest(self) -> Path:
        """The manifest JSON."""
        return self.root / "manifest.json"

    @property
    def testbed_yaml(self) -> Path:
        """The testbed file `up` writes."""
        return self.root / "testbed.yaml"

    @property
    def ssh_dir(self) -> Path:
        """Keys and authorized_keys."""
        return self.root / "ssh"

    @property
    def sshd_dir(self) -> Path:
        """sshd configs, pid files and logs."""
        return self.root / "sshd"

    @property
    def client_key(self) -> Path:
        """The private key the controller and the nodes log in with."""
        return self.ssh_dir / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        """AuthorizedKeysFile of every node's sshd."""
        return self.ssh_dir / "authorized_keys"

    @property
    def ssh_config(self) -> Path:
        """Client config with one Host block per node."""
        return self.root / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        """Host keys of the nodes, by name and address."""
        return self.root / "known_hosts"

    @property
    def work_dir(self) -> Path:
        """Work directory shared by the nodes (they share the host's filesystem)."""
        return self.root / "work"

    def host_key(self, hostname: str) -> Path:
        """Private host key of node `hostname`."""
        return self.ssh_dir / f"{hostname}_host_ed25519_key"

    def sshd_config(self, hostname: str) -> Path:
        """sshd_config of node `hostname`."""
        return self.sshd_dir / f"{hostname}.conf"

    def sshd_pid(self, hostname: str) -> Path:
        """PidFile of node `hostname`'s sshd."""
        return self.sshd_dir / f"{hostname}.pid"

    def sshd_log(self, hostname: str) -> Path:
        """Log file of node `hostname`'s sshd."""
        return self.sshd_dir / f"{hostname}.log"


@dataclass
class Manifest:
    """What exists (or may exist) because of `up`: namespaces, root links, sshds, paths."""

    name: str
    state_dir: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    version: int = MANIFEST_VERSION

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Entries of one kind, in creation order."""
        return [entry for entry in self.entries if entry["kind"] == kind]

    def record(self, kind: str, **fields: Any) -> None:
        """Add an entry and write the manifest to disk before the object is made."""
        entry = {"kind": kind, **fields}
        if entry not in self.entries:
            self.entries.append(entry)
        self.save()

    def save(self) -> None:
        """Write atomically (temporary file + rename)."""
        path = StatePaths(Path(self.state_dir)).manifest
        atomic_write(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> Manifest | None:
        """The manifest in `state_dir`, or None when there is none."""
        path = StatePaths(state_dir).manifest
        if not path.is_file():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise EnvironmentFailure(
                f"{path}: not a testbed state manifest ({exc}): remove the testbed's r2b-* "
                "namespaces with `ip netns delete` and this folder by hand"
            ) from exc
