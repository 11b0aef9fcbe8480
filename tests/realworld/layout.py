"""Where the real-world fixtures live; shared by build.py and conftest.py."""

import os
from pathlib import Path

# Bumped whenever build.py changes what it writes, so a stale ROOT is rebuilt.
BUILD_VERSION = "5"


def root() -> Path:
    """ROOT: $FERTILITY_REALWORLD, else ~/.cache/fertility/realworld."""
    env = os.environ.get("FERTILITY_REALWORLD")
    return Path(env) if env else Path.home() / ".cache" / "fertility" / "realworld"
