"""The `rw` fixture: the real-world fixture folder that build.py assembles (see layout.py).

Tests only read ROOT; nothing here reaches a network.
"""

import os

import pytest

from tests.realworld.layout import root


@pytest.fixture(scope="session")
def rw():
    path = root()
    if not (path / "READY").is_file():
        msg = f"real-world fixtures missing at {path}: run make fixtures"
        # On CI missing data is a broken build, not a reason to pass quietly.
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path
