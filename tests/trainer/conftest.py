"""Shared by the trainer tests."""

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    # Tiny matmuls: a second thread only adds contention (and CI machines are shared).
    # Session-scoped, so module-scoped fixtures (a trained base model, a reference run) run
    # with one thread too: a function-scoped autouse fixture is set up after them, and on a
    # busy 2-core machine two threads made the --init-from fixture take 27 s instead of 2.5 s.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def rw():
    """The real-world fixture folder (tests/realworld/conftest.py's `rw`, which pytest gives
    only to tests under tests/realworld): skipped when absent, a failure on CI."""
    import os

    from tests.realworld.layout import root

    path = root()
    if not (path / "READY").is_file():
        msg = f"real-world fixtures missing at {path}: run make fixtures"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path
