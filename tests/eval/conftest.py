"""Shared by the eval tests."""

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    # Tiny models, ours and lm-eval's: a second thread only contends, and on a busy 2-core
    # machine the default count made lm-eval's forward passes 100x slower. Session-scoped, so
    # the module-scoped fixtures (the trained runs every test here scores) run with it too.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
