"""Recipe patches: the recipe model, conditions on node facts, the cache key, and setup applying
them on a local testbed (a patch that does not apply is a build failure naming patch and node).

This module holds those with real processes; the same subject's other tests:
tests/unit/test_setup_patches.py (its pure tests).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from r2bench.setup import cache
from tests.integration.test_setup import Local

# ---- setup on a local testbed ----------------------------------------------------------------
RECIPE = """
name: tinylib
kind: library
source: {{path: {src}}}
patches:
{patches}
build:
  steps: ["sh build.sh"]
home: build
lib_dir: build/lib
"""
BUILD = """mkdir -p build/lib build/include
cp greeting.txt build/lib/greeting.txt
echo '#define NCCL_VERSION_CODE 22304' > build/include/nccl.h
"""


def _diff(old: str, new: str, name: str = "greeting.txt") -> str:
    return (
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-{old}\n+{new}\n"
    )


class Patched(Local):
    """The local testbed of test_setup, its library recipe listing patches."""

    def __init__(self, root: Path, patch_lines: str) -> None:
        root.mkdir(exist_ok=True)
        super().__init__(root)
        (root / "plugin" / "patches").mkdir()
        (root / "lib" / "build.sh").write_text(BUILD)
        (root / "lib" / "greeting.txt").write_text("hello\n")
        (root / "plugin" / "tinylib.yaml").write_text(
            RECIPE.format(src=root / "lib", patches=patch_lines)
        )
        self.built = root / "work" / "src" / "tinylib-local"

    def patch(self, name: str, text: str) -> None:
        (self.root / "plugin" / "patches" / name).write_text(text)

    def built_stamp(self) -> dict[str, object]:
        return json.loads((self.built / cache.STAMP_NAME).read_text())


def test_setup_applies_patches_in_order_and_records_them(tmp_path: Path) -> None:
    lab = Patched(
        tmp_path,
        "  - {file: one.patch}\n  - {file: two.patch}\n"
        "  - {file: never.patch, when: {cuda: '>=999'}}\n",
    )
    lab.patch("one.patch", "A note before the diff is fine.\n\n" + _diff("hello", "hello patched"))
    lab.patch("two.patch", _diff("hello patched", "hello twice"))
    code, out = lab.setup()
    assert code == 0, out
    assert (lab.built / "build" / "lib" / "greeting.txt").read_text() == "hello twice\n"
    stamp = lab.built_stamp()
    assert [p["file"] for p in stamp["patches"]] == ["one.patch", "two.patch"]
    assert all(p["why"] == "always" for p in stamp["patches"])
    assert [k.split(":")[0] for k in stamp["fields"]["patches"]] == ["one.patch", "two.patch"]
    log = (tmp_path / "logs" / "local0" / "tinylib.log").read_text()
    assert "patch never.patch not applied: CUDA" in log and "patch one.patch (sha256" in log
    # Nothing changed: up to date. A changed patch: rebuilt from a fresh copy.
    code, out = lab.setup()
    assert code == 0 and "tinylib up to date" in out, out
    lab.patch("two.patch", _diff("hello patched", "hello again"))
    code, out = lab.setup()
    assert code == 0 and "tinylib built in" in out, out
    assert (lab.built / "build" / "lib" / "greeting.txt").read_text() == "hello again\n"


def test_patch_that_does_not_apply_names_patch_and_node(tmp_path: Path) -> None:
    lab = Patched(tmp_path, "  - {file: stale.patch}\n")
    lab.patch("stale.patch", _diff("goodbye", "farewell"))
    code, out = lab.setup()
    assert code == 1
    assert "local0: tinylib FAILED" in out
    assert "patch stale.patch does not apply to tinylib (source tree:" in out
    assert "on node local0" in out
    assert "greeting.txt" in (tmp_path / "logs" / "local0" / "tinylib.log").read_text()
    assert not (lab.built / cache.STAMP_NAME).exists()
    assert (lab.built / "greeting.txt").read_text() == "hello\n"  # left untouched


def test_missing_patch_fails_the_step_not_the_command(tmp_path: Path) -> None:
    lab = Patched(tmp_path, "  - {file: gone.patch}\n")
    code, out = lab.setup()
    assert code == 1 and "tinylib FAILED" in out and "gone.patch, not found" in out


def test_git_checkout_is_restored_before_patching_again(tmp_path: Path) -> None:
    """A git source left patched by an earlier build is restored, then patched afresh."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "greeting.txt").write_text("hello\n")
    (upstream / "build.sh").write_text(BUILD)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(upstream)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    lab = Patched(tmp_path / "lab", "  - {file: p.patch}\n")
    recipe = lab.root / "plugin" / "tinylib.yaml"
    recipe.write_text(
        recipe.read_text().replace(
            f"source: {{path: {lab.root / 'lib'}}}", f"source: {{git: {upstream}, ref: main}}"
        )
    )
    lab.patch("p.patch", _diff("hello", "hello patched"))
    lab.built = lab.root / "work" / "src" / "tinylib-main"
    code, out = lab.setup()
    assert code == 0, out
    (upstream / "other.txt").write_text("new upstream commit\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "two"], check=True)
    code, out = lab.setup()
    assert code == 0 and "tinylib built in" in out, out
    assert (lab.built / "build" / "lib" / "greeting.txt").read_text() == "hello patched\n"
    assert (lab.built / "other.txt").exists()
