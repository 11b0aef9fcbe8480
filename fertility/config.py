"""Project defaults read from `fertility.toml` or `[tool.fertility]` in pyproject.toml."""

from __future__ import annotations

import os
from pathlib import Path

from fertility.errors import FertilityError, one_line

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def load_project_config(cwd: str | Path | None = None) -> tuple[dict, str | None]:
    """The `[tool.fertility]`-style table and the file it came from ({} and None if none)."""
    base = Path(cwd or ".")
    own = base / "fertility.toml"
    if own.is_file():
        return read_toml(own), str(own)
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        table = read_toml(pyproject).get("tool", {}).get("fertility")
        if table is not None:
            return table, str(pyproject)
    return {}, None


def read_toml(
    path: str | os.PathLike[str],
    error: type[FertilityError] = FertilityError,
    what: str = "file",
) -> dict:
    """A TOML file as a dict; a missing, unreadable or malformed file is `error`, one line
    naming the file (the policy, the training config and fertility.toml all read this way)."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid TOML ({one_line(exc)})") from None


def configured_tokenizers(cwd: str | Path | None = None) -> list[str]:
    table, source = load_project_config(cwd)
    specs = table.get("tokenizers", [])
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise FertilityError(f'{source}: `tokenizers` must be a list of "[LABEL=]SPEC" strings')
    return specs
