"""The real-world fixture folder (tests/realworld) for the extend tests."""

from tests.realworld.conftest import rw  # noqa: F401
