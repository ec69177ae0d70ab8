"""The tiers are the folders: tests/conftest.py marks each test with its folder's tier and
refuses a unit test that asks for real processes, saying where it goes."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

import pytest

from tests.conftest import misplaced, tier_of
from tests.support import paths


@dataclass
class FakeItem:
    """What misplaced() reads of a collected test."""

    fixturenames: list[str] = field(default_factory=list)
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


@pytest.mark.parametrize(
    ("where", "tier"),
    [
        ("unit/test_x.py", "unit"),
        ("integration/test_x.py", "integration"),
        ("system/deeper/test_x.py", "system"),
        ("test_x.py", None),
        ("support/test_x.py", None),
    ],
)
def test_a_test_file_s_tier_is_its_folder(where: str, tier: str | None) -> None:
    assert tier_of(paths.TESTS / where) == tier


def test_a_file_outside_tests_has_no_tier() -> None:
    assert tier_of(paths.REPO / "benchmarks" / "test_x.py") is None


@pytest.mark.parametrize(
    ("fixture", "goes_to"), [("virtual_testbed", "tests/system/"), ("sshd", "tests/integration/")]
)
def test_a_unit_test_asking_for_real_processes_is_told_where_it_goes(
    fixture: str, goes_to: str
) -> None:
    problem = misplaced(FakeItem(fixturenames=["tmp_path", fixture]), "unit")  # type: ignore[arg-type]
    assert problem is not None and fixture in problem and goes_to in problem


def test_a_unit_test_marked_root_goes_to_the_system_tier() -> None:
    problem = misplaced(FakeItem(markers=("root",)), "unit")  # type: ignore[arg-type]
    assert problem is not None and "tests/system/" in problem


def test_higher_tiers_may_ask_for_real_processes() -> None:
    item = FakeItem(fixturenames=["virtual_testbed", "sshd"], markers=("root",))
    assert misplaced(item, "system") is None  # type: ignore[arg-type]
    assert misplaced(item, "integration") is None  # type: ignore[arg-type]


def test_a_pure_unit_test_is_in_place() -> None:
    assert misplaced(FakeItem(fixturenames=["tmp_path", "monkeypatch"]), "unit") is None  # type: ignore[arg-type]


def test_a_test_outside_the_tiers_is_told_the_folders() -> None:
    problem = misplaced(FakeItem(), None)  # type: ignore[arg-type]
    assert problem is not None and "tests/unit|integration|system/" in problem


def test_every_collected_test_carries_its_tier(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("integration") is None


def test_a_unit_test_that_starts_a_process_is_told_to_move() -> None:
    with pytest.raises(AssertionError, match="move it to tests/integration/"):
        subprocess.run(["true"], check=False)
