"""Project defaults read from `fertility.toml` or `[tool.fertility]` in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

from fertility.errors import FertilityError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def load_project_config(cwd: str | Path | None = None) -> tuple[dict, str | None]:
    """The `[tool.fertility]`-style table and the file it came from ({} and None if none)."""
    base = Path(cwd or ".")
    own = base / "fertility.toml"
    if own.is_file():
        return _read(own), str(own)
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        table = _read(pyproject).get("tool", {}).get("fertility")
        if table is not None:
            return table, str(pyproject)
    return {}, None


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FertilityError(f"{path}: cannot read TOML: {exc}") from None


def configured_tokenizers(cwd: str | Path | None = None) -> list[str]:
    table, source = load_project_config(cwd)
    specs = table.get("tokenizers", [])
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise FertilityError(f"{source}: `tokenizers` must be a list of \"[LABEL=]SPEC\" strings")
    return specs
