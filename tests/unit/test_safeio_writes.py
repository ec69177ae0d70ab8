"""The atomic writer (`safeio.atomic_write`, `safeio.replacing`): a link is replaced, never
written through; a refused write is one WriteFailed naming its own file, whatever writer is
around it. The commands that write: tests/integration/test_writers.py."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pytest

from r2bench.errors import WriteFailed
from r2bench.safeio import atomic_write, replacing


def test_a_link_is_replaced_and_its_target_keeps_its_content_and_mode(tmp_path: Path) -> None:
    target, link = tmp_path / "target", tmp_path / "out.sh"
    target.write_text("theirs\n")
    target.chmod(0o600)
    link.symlink_to(target)
    atomic_write(link, "ours\n", mode=0o755)
    assert target.read_text() == "theirs\n" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not link.is_symlink() and link.read_text() == "ours\n"
    assert stat.S_IMODE(link.stat().st_mode) == 0o755


def test_a_refused_inner_write_is_named_once_by_the_writers_around_it(tmp_path: Path) -> None:
    """Before: the outer writer wrapped the inner WriteFailed again ("a.parquet: could not
    write it: a.csv: could not write it: ...")."""
    with (
        pytest.raises(WriteFailed) as caught,
        replacing(tmp_path / "a.parquet"),
        replacing(tmp_path / "a.csv") as inner,
    ):
        inner.write_text("x")
        raise OSError(errno.EFBIG, "File too large")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'a.csv'}: could not write it: File too large (EFBIG)")
    assert message.count("could not write it") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a temporary or half file left"


@pytest.mark.parametrize(
    ("code", "where", "hint"),
    [
        (errno.EROFS, "mkstemp", "read-only"),
        (errno.ENOSPC, "fsync", "the disk is full"),
        (errno.EDQUOT, "replace", "quota"),
        (errno.EFBIG, "replace", "ulimit -f"),
    ],
)
def test_the_machine_refusing_a_write_is_the_environment_named_with_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, where: str, hint: str
) -> None:
    """Wherever the system refuses (making the temporary file, syncing it, renaming it), the
    error is a WriteFailed (exit 2, "the environment") naming the file, never "a bug"."""
    import os
    import tempfile

    from r2bench.errors import ExitCode

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    target = {"mkstemp": (tempfile, "mkstemp"), "fsync": (os, "fsync"), "replace": (os, "replace")}
    monkeypatch.setattr(*target[where], refuse)
    path = tmp_path / "out.md"
    with pytest.raises(WriteFailed) as caught:
        atomic_write(path, "text")
    assert str(caught.value).startswith(f"{path}: could not write it: {os.strerror(code)}")
    assert hint in str(caught.value)
    assert caught.value.exit_code == ExitCode.USAGE
    assert not path.exists() and not list(tmp_path.glob(".*.tmp"))
