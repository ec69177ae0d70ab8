"""Cache keys and build stamps (pure).

A component is rebuilt on a node only when its key changes. The key covers everything that
changes the binary: the recipe, the exact source (a git commit, or a content hash of a tree
copied from the controller), the fully rendered build commands (paths, NVCC_GENCODE, -j), the
CUDA and MPI versions on the node, for a benchmark the NCCL version it is compiled against, and
the recipe patches applied (file and content hash; a key without patches is unchanged by them).
After a successful build the node keeps a stamp file (`STAMP_NAME`) in the component's folder.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, ValidationError

STAMP_NAME = ".r2bench-build.json"
KEY_LENGTH = 16
"""Hex digits of the key digest shown to users and stored in stamps."""


@dataclass(frozen=True)
class BuildKey:
    """Everything that decides whether an existing build can be reused."""

    recipe: str
    source: str
    commands: tuple[str, ...]
    cuda: str
    mpi: str
    nccl: str = ""
    patches: tuple[str, ...] = ()

    def fields(self) -> dict[str, object]:
        """The key as a JSON-ready mapping (stored in the stamp for humans)."""
        data = asdict(self)
        data["commands"] = list(self.commands)
        if self.patches:
            data["patches"] = list(self.patches)
        else:
            del data["patches"]  # keys made before patches existed stay valid
        return data

    def digest(self) -> str:
        """A short stable hash of every field."""
        text = json.dumps(self.fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


class Stamp(BaseModel):
    """What a node records after a successful build, next to the build."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    fields: dict[str, object]
    recipe: str
    ref: str | None = None
    node: str
    directory: str
    lib_dir: str | None = None
    nccl_home: str | None = None
    nccl_version: int | None = None
    built_at: str
    build_s: float
    patches: list[dict[str, str]] = []


def make_stamp(key: BuildKey, **values: object) -> Stamp:
    """A stamp for `key`, timed now (UTC); `values` fill the other fields."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return Stamp.model_validate(
        {"key": key.digest(), "fields": key.fields(), "built_at": now, **values}
    )


def stamp_text(stamp: Stamp) -> str:
    """The stamp file's content."""
    return stamp.model_dump_json(indent=2) + "\n"


def read_stamp(text: str) -> Stamp | None:
    """The stamp in `text`, or None when it is missing, truncated or not a stamp."""
    if not text.strip():
        return None
    try:
        return Stamp.model_validate_json(text)
    except ValidationError:
        return None


def is_current(stamp: Stamp | None, key: BuildKey) -> bool:
    """Whether the build recorded by `stamp` was made with exactly `key`."""
    return stamp is not None and stamp.key == key.digest()
