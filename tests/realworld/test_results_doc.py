"""docs/RESULTS.md is what `make results` (tests/realworld/results.py) builds from the fixtures.

The whole table measures twelve tokenizers on 9.8 MB of text: over a minute on the 2-core
machines the suite is sized for, too long to run inside it. So `make test` builds it before
pytest into ROOT/results/RESULTS.<KEY>.md, KEY a hash of everything the table is a function of
(results.key: the package, the generator, the fixtures' files, the installed packages), again
only when KEY changes; here the committed file must be that build, byte for byte. The test
computes KEY itself, so a build made before the sources changed is not taken for a fresh one;
with none for the current KEY it fails, it does not skip.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

pytestmark = pytest.mark.realworld

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "RESULTS.md"


@pytest.fixture(scope="module")
def gen():
    from tests.realworld import results

    return results


def committed(gen) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return text.split(gen.BEGIN + "\n", 1)[1].split(gen.END, 1)[0].splitlines()


def label(line: str) -> str | None:
    cells = [c.strip() for c in line.strip("|").split("|")]
    return cells[0] if line.startswith("| ") else None


def test_every_tokenizer_file_of_the_fixtures_has_its_rows(rw, gen):
    files = {p.relative_to(rw / "tokenizers").as_posix() for p in (rw / "tokenizers").rglob("*")}
    files = {f for f in files if (rw / "tokenizers" / f).is_file()}
    assert {spec.split("#")[0] for spec in gen.TOKENIZERS.values()} == files
    rows = [label(x) for x in committed(gen) if label(x) in gen.TOKENIZERS]
    # one summary row and one per-script row for each, in the generator's order
    assert rows == list(gen.TOKENIZERS) * 2


def test_the_committed_table_is_a_fresh_build(rw, gen):
    path = gen.fresh_path(rw, gen.key(rw))
    if not path.is_file():
        pytest.fail(
            f"no fresh build of docs/RESULTS.md for the sources as they are ({path}): "
            "`make test` makes it before pytest, `make results` too"
        )
    if DOC.read_bytes() != path.read_bytes():
        got, want = (p.read_text(encoding="utf-8").splitlines() for p in (DOC, path))
        diff = difflib.unified_diff(got, want, "docs/RESULTS.md", str(path), lineterm="")
        pytest.fail(
            "docs/RESULTS.md is not the fresh build: run `make results` and commit "
            "docs/RESULTS.md\n" + "\n".join(list(diff)[:40]),
            pytrace=False,
        )


def test_the_key_changes_with_every_input_and_only_with_them(tmp_path, gen, monkeypatch):
    # a small repository and fixture root: KEY must follow each file the table depends on,
    # by content and name, and ignore byte code and the folders the build never imports
    repo, rw = tmp_path / "repo", tmp_path / "rw"
    keyed = ["fertility/__init__.py", "tests/realworld/results.py", "tests/realworld/layout.py"]
    for path in [*keyed, "fertility/measure/x.py", "trainer/loop.py", "docs/RESULTS.md"]:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(path)
    for path in ["SOURCES.json", "text/bn.txt", "tokenizers/a/tokenizer.json", "results/R.md"]:
        (rw / path).parent.mkdir(parents=True, exist_ok=True)
        (rw / path).write_text(path)
    monkeypatch.setattr(gen, "REPO", repo)
    keys = [gen.key(rw)]

    def changed(path: Path, text: str | None = None, rename: Path | None = None) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        if rename:
            path.rename(rename)
        else:
            path.write_text(text or "")
        keys.append(gen.key(rw))
        return keys[-1] != keys[-2]

    assert changed(repo / "fertility/measure/x.py", "y = 2")
    assert changed(repo / "fertility/default_policy.toml", "[floors]")  # a new file
    assert changed(repo / "tests/realworld/results.py", "changed")
    assert changed(repo / "tests/realworld/layout.py", "changed")
    assert changed(rw / "text/bn.txt", "বাংলা")
    assert changed(rw / "text/bn.txt", rename=rw / "text/hi.txt")
    assert changed(rw / "tokenizers/a/tokenizer.json", "{}")
    assert changed(rw / "SOURCES.json", "[]")
    assert not changed(repo / "fertility/measure/__pycache__/x.cpython-311.pyc", "byte code")
    assert not changed(repo / "trainer/loop.py", "not imported by the build")
    assert not changed(repo / "docs/RESULTS.md", "the output")
    assert not changed(rw / "results/R.md", "a fresh build")
