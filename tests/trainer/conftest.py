"""Shared by the trainer tests."""

import pytest
import torch

from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)


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
