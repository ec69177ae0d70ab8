"""Where the tests find the repository and the files they read: one place for every tier."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
"""tests/: the tiers (unit/, integration/, system/), support/ and the inputs below."""
REPO = TESTS.parent
"""The checkout: experiments/, injectors/, scripts/, results/examples/."""
DATA = TESTS / "data"
"""Real captures and hand-written inputs, each folder with a README saying where they are from."""
CORPUS = TESTS / "corpus"
"""Malformed configuration files, each rejected with a located error."""
FAKES = Path(__file__).resolve().parent / "fakes"
"""Stand-ins for tools the development machines lack (ibportstate, ovs-ofctl)."""
