"""`fertility tokenize` (fertility.engine.tokenize) on real text with a real rank file: the
shards hold what the tokenizer's own library (tiktoken) gives for every document; N tasks
give the counts of one process and the same documents; a run killed mid-way and relaunched
writes the same files as one never killed; `pretrain --shards` gates on the counts of the
same pass (the verdict `fertility gate` gives on the corpus) and refuses shards of another
tokenizer."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("datatrove")
tiktoken = pytest.importorskip("tiktoken")

from tiktoken.load import load_tiktoken_bpe  # noqa: E402

from fertility.engine.tokenize import shards_report  # noqa: E402
from fertility.tokenizers import load_tokenizer_arg  # noqa: E402
from fertility.tokenizers.patterns import FAMILIES  # noqa: E402
from fertility.trainer.data import TokenData, read_index  # noqa: E402
from tests.realworld.conftest import rw  # noqa: E402, F401 (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld
LANGS = (("bn", 300), ("en", 300), ("hi", 200), ("zh", 200))  # four scripts, several batches
FILES = ("index.json", "train-docs.bin", "heldout.jsonl")


def cli(*args: object, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fertility", *map(str, args)], capture_output=True, text=True, **kw
    )


@pytest.fixture(scope="module")
def setup(rw, tmp_path_factory):  # noqa: F811 (rw: the fixture)
    root = tmp_path_factory.mktemp("tokenize")
    corpus = root / "corpus"
    corpus.mkdir()
    for lang, n in LANGS:
        lines = (rw / "text" / f"{lang}.txt").read_text("utf-8").splitlines()[:n]
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rank = rw / "tokenizers" / "cl100k_base.tiktoken"
    spec = f"{rank}#cl100k_base"
    # 2,000 tokens a shard: several shards per task, so shard boundaries are exercised
    common = ["-t", spec, "--shard-tokens", "2000", "--batch-docs", "64", "-q"]
    one = root / "one"
    done = cli("tokenize", corpus, "--out", one, *common)
    assert done.returncode == 0, done.stderr
    return corpus, spec, rank, common, one, done.stdout


def test_shards_hold_the_librarys_ids_for_every_document(setup):
    corpus, spec, rank, _, one, stdout = setup
    enc = tiktoken.Encoding(
        "cl100k",
        pat_str=FAMILIES["cl100k"],
        special_tokens={},
        mergeable_ranks=load_tiktoken_bpe(str(rank)),
    )
    index = read_index(one)
    sep = index["separator"]
    assert sep == index["vocab_size"] - 1 == len(load_tiktoken_bpe(str(rank)))  # reserved id
    held = [json.loads(line) for line in (one / "heldout.jsonl").open(encoding="utf-8")]
    held_at = {(Path(h["source"]).name, h["line"]): h["text"] for h in held}
    train_lines: dict[str, list[str]] = {}  # language -> its training lines, read here
    for path in sorted(corpus.iterdir()):
        for n, text in enumerate(path.read_text("utf-8").splitlines(), 1):
            if (path.name, n) in held_at:
                assert held_at[path.name, n] == text  # (source, line) names the line
            elif text:
                train_lines.setdefault(path.stem, []).append(text)
    n_lines = sum(map(len, train_lines.values())) + len(held)
    assert 0 < len(held) < n_lines / 20  # the default 1% (a hash of file and line picks them)
    expected = Counter(t for texts in train_lines.values() for t in texts)
    train = TokenData.from_dir(one, "train", fingerprint=index["fingerprint"], vocab_size=sep + 1)
    assert len(train.tokens) > 2  # several shards
    got = Counter()
    for shard, start, n, _, chars, nbytes in train.docs:
        ids = np.asarray(train.tokens[shard][start : start + n])
        assert ids[-1] == sep and sep not in ids[:-1]
        text = enc.decode(ids[:-1].tolist())
        assert enc.encode_ordinary(text) == ids[:-1].tolist()  # the library's ids for it
        assert (len(text), len(text.encode("utf-8"))) == (chars, nbytes)
        got[text] += 1
    assert got == expected  # every training document once, and nothing else
    # per-language totals: the library's tokens of each language's training lines
    for lang in index["languages"]:
        texts = train_lines[lang["lang"]]
        assert lang["docs"] == len(texts)
        assert lang["tokens"] == sum(len(enc.encode_ordinary(t)) + 1 for t in texts)
    assert "gate, on this pass's counts: verdict:" in stdout


@pytest.fixture(scope="module")
def three(setup, tmp_path_factory):
    corpus, _, _, common, _, _ = setup
    out = tmp_path_factory.mktemp("three") / "out"
    done = cli("tokenize", corpus, "--out", out, "--tasks", "3", *common)
    assert done.returncode == 0, done.stderr
    return out


def test_tasks_give_the_counts_of_one_process(setup, three):
    corpus, spec, _, common, one, _ = setup
    tok = load_tokenizer_arg(spec)
    a, b = shards_report(one, tok), shards_report(three, tok)
    pd.testing.assert_frame_equal(a.frame, b.frame)  # every count and interval
    ia, ib = read_index(one), read_index(three)
    assert ia["languages"] == ib["languages"]
    for split in ("train", "heldout"):
        assert sum(s["tokens"] for s in ia[split]) == sum(s["tokens"] for s in ib[split])
    sort = lambda d: sorted(np.concatenate(d.tokens).tolist())  # noqa: E731
    kw = dict(fingerprint=ia["fingerprint"], vocab_size=ia["vocab_size"])
    assert sort(TokenData.from_dir(one, "train", **kw)) == sort(
        TokenData.from_dir(three, "train", **kw)
    )


def test_a_task_run_in_this_process_keeps_the_loaded_tokenizer(setup, tmp_path, monkeypatch):
    """A task run in the caller's process (one task: fertility.engine.tasks._in_process;
    more with one worker: datatrove's executor deep-copies the step first) measures with the
    tokenizer loaded by the caller, not a second load and fingerprint of its file (a quarter
    of a second of a 25 MB run), and writes the files the command does."""
    from fertility.engine import step
    from fertility.engine.tokenize import tokenize

    corpus, spec, _, _, one, _ = setup

    def reload(keys):
        raise AssertionError(f"the task loaded {keys} again")

    monkeypatch.setattr(step, "load_keys", reload)
    out = tmp_path / "out"
    tokenize([str(corpus)], load_tokenizer_arg(spec), str(out), shard_tokens=2000, batch_size=64)
    _same_files(one, out)


def _same_files(a: Path, b: Path) -> None:
    names = sorted(str(p.relative_to(a)) for p in (a / "parts").rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(b)) for p in (b / "parts").rglob("*") if p.is_file())
    for name in [*names, *FILES]:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_killed_run_relaunched_writes_what_an_unkilled_one_does(setup, three, tmp_path):
    corpus, _, _, common, _, _ = setup
    args = ["tokenize", corpus, *common, "--tasks", "3"]
    # SIGKILL the whole process group once the tasks have begun writing their parts
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fertility", *map(str, args), "--out", str(killed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not list((killed / "parts").glob("*/*.bin")) and time.monotonic() < deadline:
        assert proc.poll() is None, "finished before it could be killed"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "index.json").exists()
    again = cli(*args, "--out", killed)
    assert again.returncode == 0, again.stderr
    _same_files(three, killed)

    # A task that died half-way (its part without part.json, its completion marker gone) is
    # the only one run again: the others' files are not rewritten.
    (killed / "index.json").unlink()
    (killed / "logs" / "completions" / "00002").unlink()
    (killed / "parts" / "00002" / "part.json").unlink()
    (killed / "parts" / "00002" / "train-00000.bin").write_bytes(b"half")
    before = {p: p.stat().st_mtime_ns for p in (killed / "parts" / "00001").iterdir()}
    assert cli(*args, "--out", killed).returncode == 0
    assert before == {p: p.stat().st_mtime_ns for p in (killed / "parts" / "00001").iterdir()}
    _same_files(three, killed)


def test_one_task_runs_here_and_a_relaunch_after_it_does_not_run_it_again(setup, tmp_path):
    """The default, one task on the local executor, runs in the command's own process
    without datatrove's executor (fertility.engine.tasks._in_process): no `logs/`, and
    neither datatrove.io nor the Hub client it imports (a third of a second of a 25 MB run).
    Its counts mark it done: a run killed after the task but before index.json finishes
    without writing the part again; one killed half-way through the task runs it again."""
    corpus, _, _, common, one, _ = setup
    out = tmp_path / "out"
    args = [sys.executable, "-X", "importtime", "-m", "fertility", "tokenize", corpus, *common]
    done = subprocess.run([*map(str, args), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "datatrove.pipeline.base" in imported  # (the import lines are there)
    assert not {"datatrove.io", "datatrove.executor", "huggingface_hub"} & imported
    assert not (out / "logs").exists()
    _same_files(one, out)

    (out / "index.json").unlink()  # killed after the task
    part = out / "parts" / "00000"
    before = {p: p.stat().st_mtime_ns for p in part.iterdir()}
    assert cli("tokenize", corpus, *common, "--out", out).returncode == 0
    assert before == {p: p.stat().st_mtime_ns for p in part.iterdir()}
    _same_files(one, out)

    (out / "index.json").unlink()  # killed half-way: no counts, no part.json, half a shard
    for name in ("counts/00000.json", "counts/00000.npz", "parts/00000/part.json"):
        (out / name).unlink()
    (part / "train-00000.bin").write_bytes(b"half")
    assert cli("tokenize", corpus, *common, "--out", out).returncode == 0
    _same_files(one, out)


def test_a_folder_of_other_inputs_is_refused(setup, tmp_path):
    corpus, spec, _, common, one, _ = setup
    other = cli("tokenize", corpus, "--out", one, *common, "--tasks", "2")
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "other inputs" in other.stderr.strip().splitlines()[-1]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    refused = cli("tokenize", corpus, "--out", mine, *common)
    assert refused.returncode == 2 and str(mine) in refused.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    # the Python API claims the folder too: a user's parts/00000 is never emptied
    from fertility.engine.tokenize import tokenize
    from fertility.errors import OutputError

    (mine / "parts" / "00000").mkdir(parents=True)
    (mine / "parts" / "00000" / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(OutputError, match=str(mine)):
        tokenize([str(corpus)], spec, str(mine))
    assert (mine / "parts" / "00000" / "keep.txt").read_text(encoding="utf-8") == "mine"
    # and the step alone, in a pipeline of the user's that never claimed the folder: a part
    # folder the manifest does not list is refused, not emptied
    from fertility.engine.tokenize import TokenizeCorpus

    step = TokenizeCorpus(str(mine), [str(corpus)], spec)
    with pytest.raises(OutputError, match="not written by fertility tokenize"):
        list(step.run())
    assert (mine / "parts" / "00000" / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_the_counts_give_the_verdict_gate_gives_on_the_corpus(setup):
    corpus, spec, _, _, one, _ = setup
    from fertility.gate import evaluate
    from fertility.policy import load_policy

    tok = load_tokenizer_arg(spec)
    ours = evaluate(shards_report(one, tok), load_policy(None), label=tok.label).to_dict()
    gate = cli("gate", corpus, "-t", spec, "--format", "json", "-q")
    theirs = json.loads(gate.stdout)
    assert gate.returncode == theirs["exit_code"] == ours["exit_code"]
    assert ours["checks"] == theirs["checks"]  # every value, interval and verdict
    assert ours["findings"] == theirs["findings"]


def test_pretrain_trains_on_the_shards_and_refuses_another_tokenizers(setup, rw, run, tmp_path):  # noqa: F811
    """In-process (the `run` fixture: torch imported once per worker), on shards of an
    8,000-token BPE, with a 4 x 32-token batch: the arbiter's float64 check costs a few
    seconds on it, ten times less than at the tiny preset's own batch."""
    pytest.importorskip("torch")
    from fertility.engine.tokenize import tokenize
    from fertility.trainer.rundir import RunDir

    corpus, cl100k, _, _, one, _ = setup
    spec = str(rw / "tokenizers" / "bpe-o200k" / "tokenizer.json")
    shards = tmp_path / "shards"
    assert tokenize([str(corpus)], spec, str(shards)) is not None
    config = tmp_path / "fast.toml"
    config.write_text('preset = "tiny"\nseq_len = 32\nmicro_batch = 4\nwarmup_steps = 1\n')
    run_dir = tmp_path / "run"
    args = ["pretrain", "--out", run_dir, "--steps", "2", "--device", "cpu", "--config", config]
    code, out, err = run(*args, "--shards", shards, "-t", spec, "--force", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["steps"] == 2
    record = json.loads((run_dir / "run.json").read_text("utf-8"))
    assert record["data"]["shards"] == str(shards) and record["corpus_paths"] is None
    assert record["gate"]["checks"]  # the verdict of the shards' counts, kept with the run
    assert not (run_dir / "data").exists()  # nothing tokenized here
    assert RunDir(run_dir).heldout == shards / "heldout.jsonl"  # what `fertility eval` scores
    # shards of another tokenizer (cl100k's): refused before anything is written
    code, _, err = run(*args[:1], "--out", tmp_path / "other", "--shards", one, "-t", spec)
    assert code == 2 and "made by tokenizer" in err and str(one) in err
    assert not (tmp_path / "other").exists()
    code, _, err = run(
        "pretrain", corpus, "--out", tmp_path / "both", "--shards", shards, "-t", spec
    )
    assert code == 2 and "not both" in err


def test_no_counts_writes_the_same_shards_and_pretrain_wants_force(setup, run, tmp_path):
    """--no-counts: the same part files as the counted run (the same batches, the same
    writer), no counts in the index, no verdict; `pretrain --shards` on them refuses before
    it writes anything unless --force."""
    corpus, spec, _, common, one, _ = setup
    bare = tmp_path / "bare"
    code, out, err = run("tokenize", corpus, "--out", bare, *common, "--no-counts")
    assert code == 0, err
    assert "no gate" in out and "verdict" not in out
    index = read_index(bare)
    assert index["counts"] is None
    for name in ["parts/00000/train-00000.bin", "parts/00000/heldout.jsonl", *FILES[1:]]:
        assert (bare / name).read_bytes() == (one / name).read_bytes(), name
    pytest.importorskip("torch")
    code, _, err = run("pretrain", "--shards", bare, "-t", spec, "--out", tmp_path / "run")
    assert code == 2 and "--no-counts" in err and "--force" in err
    assert not (tmp_path / "run").exists()


def test_the_json_and_the_index_follow_their_schemas(setup, run, tmp_path):
    """`tokenize --format json` (fertility.tokenize/1) and the index.json it writes
    (fertility.shards/1), against fertility/schemas/, with the gate inside its own; and the
    same with --no-counts (no gate, no counts)."""
    from tests.test_schemas import check

    corpus, _, _, common, one, _ = setup
    check(read_index(one))
    for extra in ([], ["--no-counts"]):
        out = tmp_path / f"json{len(extra)}"
        code, stdout, err = run(
            "tokenize", corpus, "--out", out, *common, "--format", "json", *extra
        )
        assert code == 0, err
        doc = json.loads(stdout)
        check(doc)
        check(doc["index"])
        assert doc["index"] == read_index(out)
        if extra:
            assert doc["gate"] is None and doc["index"]["counts"] is None
        else:
            check(doc["gate"])
