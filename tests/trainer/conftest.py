"""Shared by the trainer tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    # Tiny matmuls: a second thread only adds contention (and CI machines are shared).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
