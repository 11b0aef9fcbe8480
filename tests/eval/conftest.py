"""Shared by the eval tests: one torch thread, as the trainer tests (tiny models, ours and
lm-eval's: on a busy 2-core machine a second thread made lm-eval's forward passes 100x
slower), session-scoped so the module-scoped trained runs use it too."""

from tests.trainer.conftest import one_thread  # noqa: F401  (an autouse fixture)
