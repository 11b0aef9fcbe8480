"""The state `report --tasks` and `tokenize` keep between launches, and what they print
(issue #35): `-q` keeps datatrove's log lines and statistics off stderr, in the launching
process and in the task processes; without --work-dir, `report --tasks` keeps its tasks'
state in a folder of those inputs' own, says where, and removes it once the report is made,
so the next run on another corpus from the same folder does not meet it; a second `tokenize`
into a folder being written is refused, naming --out as the user gave it. Small inputs: the
example corpus and a BPE trained here, two tasks (a pool of task processes)."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("datatrove")

from fertility.cli import main  # noqa: E402
from fertility.errors import OutputError  # noqa: E402
from fertility.files import locked_folder  # noqa: E402
from tests.bpe import byte_level_bpe  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "corpus"


@pytest.fixture()
def cli(capfd):
    """`fertility ARGS` in this process: (exit code, stdout, stderr), read at the descriptors
    so the task processes' writes are caught too."""

    def invoke(*argv):
        with pytest.raises(SystemExit) as exc:
            main([str(a) for a in argv])
            raise SystemExit(0)
        out, err = capfd.readouterr()
        return exc.value.code or 0, out, err

    return invoke


def ours(folder):
    """What fertility left in `folder` (multiprocessing keeps a `pymp-*` folder of its own)."""
    return [name for name in os.listdir(folder) if not name.startswith("pymp-")]


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    """Two corpora, a tokenizer; the current folder tmp_path's, the temporary folder a short
    one of its own: multiprocessing's manager puts a socket in it, whose path may hold at
    most 107 bytes (tmp_path's grew past that once pytest's run counter reached 3 digits
    under xdist, and the task pool failed to start)."""
    corpora = []
    for name, langs in (("one", ("en", "bn")), ("two", ("ja", "th"))):
        folder = tmp_path / name
        folder.mkdir()
        for lang in langs:
            (folder / f"{lang}.txt").write_text((EXAMPLES / f"{lang}.txt").read_text("utf-8"))
        corpora.append(folder)
    lines = [line for c in corpora for p in c.iterdir() for line in p.read_text().splitlines()]
    tok = tmp_path / "tok.json"
    byte_level_bpe(lines, 400, path=tok)
    here, temp = tmp_path / "here", Path(tempfile.mkdtemp(prefix="ft-"))
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    yield corpora, tok, here, temp
    shutil.rmtree(temp)


def test_report_tasks_keeps_its_state_apart_says_where_and_removes_it(cli, setup, monkeypatch):
    (one, two), tok, here, temp = setup
    args = ("-t", tok, "--tasks", 2, "--format", "json", "--workers", 1)  # in this process
    said = []

    def state(err):
        said.extend(line for line in err.splitlines() if line.startswith("report --tasks:"))
        return said[-1].split(" is in ", 1)[1].split(" (removed", 1)[0]

    # A run that fails after its tasks are done keeps their state where it said ...
    import fertility.engine.tasks  # measure() looks merge up there
    from fertility.engine.step import MeasureCorpus

    ran, task = [], MeasureCorpus.run

    def counted(self, *a, **k):
        ran.append(self)
        yield from task(self, *a, **k)

    monkeypatch.setattr(MeasureCorpus, "run", counted)
    merge = fertility.engine.tasks.merge
    monkeypatch.setattr(fertility.engine.tasks, "merge", lambda *a, **k: 1 / 0)
    code, _, err = cli("report", one, *args)
    kept = Path(state(err))
    assert code == 2 and len(ran) == 2 and kept.parent == temp
    assert kept.name.startswith("fertility-tasks-") and (kept / "logs" / "completions").is_dir()
    # ... the same command relaunched resumes from it (no task runs again), then removes it
    monkeypatch.setattr(fertility.engine.tasks, "merge", merge)
    code, out, err = cli("report", one, *args)
    assert code == 0 and json.loads(out)["settings"]["tasks"] == 2 and len(ran) == 2, err
    assert Path(state(err)) == kept and ours(temp) == [] and os.listdir(here) == []
    # another corpus from the same folder (before: `fertility-tasks/` was left here, and this
    # run failed with `--work-dir fertility-tasks: holds a run of other inputs ...`)
    code, out, err = cli("report", two, *args)
    assert code == 0 and Path(state(err)) != kept, err
    assert ours(temp) == [] and os.listdir(here) == []
    assert len(said) == 3  # one line a run
    # -q: nothing on stderr, from this process or the two task processes (before: datatrove's
    # INFO lines and statistics)
    code, _, err = cli("report", one, *args, "-q")
    assert code == 0 and err == ""
    # a tokenizer that does not load: no folder made (before: made, then the error)
    missing = tok.parent / "missing.json"
    code, _, err = cli("report", one, "-t", missing, "--tasks", 2)
    assert code == 2 and err.splitlines() == [f"error: {missing}: no such file or folder"]
    assert os.listdir(here) == [] and ours(temp) == []


def test_tokenize_quiet_and_a_second_run_named_by_out(cli, setup):
    (one, two), tok, here, _ = setup
    out = here / "shards"
    code, text, err = cli(
        "tokenize", one, "-t", tok, "--out", out, "--tasks", 2, "-q", "--workers", 1
    )
    assert code == 0 and err == "" and "tokenized into" in text  # (before: datatrove's lines)
    # another run's inputs in that folder: named as the user named it, --out
    code, _, err = cli("tokenize", two, "-t", tok, "--out", out, "-q")
    assert code == 2 and err.splitlines() == [
        f"error: --out {out}: holds a run of other inputs (corpus, tokenizers, options or "
        "--tasks differ); remove it or choose another folder"
    ]
    # a run still writing the folder (its lock held): the second is refused at once
    fresh = here / "fresh"
    fresh.mkdir()
    with locked_folder(fresh, OutputError, "`fertility tokenize`"):
        code, _, err = cli("tokenize", one, "-t", tok, "--out", fresh, "-q")
    assert code == 2 and err.splitlines() == [
        f"error: {fresh}: another `fertility tokenize` is writing this folder; wait for it to "
        "end or choose another one"
    ]


def test_shards_that_are_not_the_folders_own_are_refused_before_the_gate(cli, setup):
    # index.json edited to point outside its folder (before: opened, read whole or forever,
    # then refused), or a shard damaged (before: refused only after the gate, about 80 s on a
    # real corpus, leaving a half-made run folder): one line naming it, no run folder.
    pytest.importorskip("torch")
    (one, _), tok, here, _ = setup
    shards = here / "shards"
    code, _, err = cli("tokenize", one, "-t", tok, "--out", shards, "-q", "--workers", 1)
    assert code == 0, err
    index_path = shards / "index.json"
    good = index_path.read_text()
    index = json.loads(good)
    (one / "en.txt").rename(one / "en.bin")  # a file outside the shards, not a shard
    for name in ["../../one/en.bin", "/dev/zero"]:
        index["train"][0]["file"] = name
        index_path.write_text(json.dumps(index))
        run = here / "run"
        code, _, err = cli("pretrain", "--shards", shards, "-t", tok, "--out", run, "--force")
        assert code == 2 and err.splitlines() == [
            f"error: {index_path}: the train shard {name!r} is not a file inside {shards}; "
            "the index was edited or damaged: tokenize again"
        ]
        assert not run.exists()
    index_path.write_text(good)
    shard = shards / json.loads(good)["train"][0]["file"]
    shard.write_bytes(shard.read_bytes()[:-3])  # a truncated shard
    code, _, err = cli("pretrain", "--shards", shards, "-t", tok, "--out", here / "run")
    assert code == 2 and len(err.splitlines()) == 1 and str(shard) in err, err
    assert not (here / "run").exists()
