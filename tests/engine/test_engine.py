"""Measuring split into datatrove tasks gives exactly the report of one process
(fertility.engine): on local processes, on a local Ray instance, and as the Slurm job script
it would submit. Real text (the real-world fixtures' first lines of three languages) and
real tokenizer files of four kinds: HF, SentencePiece, a tiktoken rank file with its
pattern, Tekken. The expected report is analyze()'s in one process, which
tests/measure/test_parallel.py and the real-world tests check against the libraries."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("datatrove")

from datatrove.io import get_datafolder  # noqa: E402

from fertility.engine import codec, measure  # noqa: E402
from fertility.engine.step import tokenizer_keys  # noqa: E402
from fertility.errors import FertilityError, OutputError  # noqa: E402
from fertility.measure import analyze  # noqa: E402
from tests.realworld.conftest import rw  # noqa: E402, F401 (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld
KW = dict(detail_docs=15, keep_docs=100, batch_size=32, seed=0)


@pytest.fixture(scope="module")
def setup(rw, tmp_path_factory):  # noqa: F811 (rw: the fixture)
    corpus = tmp_path_factory.mktemp("engine") / "corpus"
    corpus.mkdir()
    for lang, n in (("en", 60), ("hi", 40), ("zh", 60)):  # three scripts, ~9 batches
        lines = (rw / "text" / f"{lang}.txt").read_text("utf-8").splitlines()[:n]
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = rw / "tokenizers"
    specs = [
        f"hf={t / 'bpe-gpt2/tokenizer.json'}",
        f"sp={t / 'mistral/tokenizer.model.v1'}",
        f"r50k={t / 'r50k_base.tiktoken'}#r50k_base",
        f"tekken={t / 'tekken/tekken_240911.json'}",
    ]
    one = analyze([corpus], specs, pretokenizers=["gpt2"], workers=1, **KW)
    return corpus, specs, one


def same(one, other) -> None:
    pd.testing.assert_frame_equal(one.frame, other.frame)  # intervals included
    pd.testing.assert_frame_equal(one.docs, other.docs)
    a, b = one.to_dict(), other.to_dict()
    a.pop("settings"), b.pop("settings")  # the number of tasks and the executor
    assert a == b
    assert (one.samples, one.roundtrip) == (other.samples, other.roundtrip)
    assert one.running_langs == other.running_langs and one.running_langs


def test_local_tasks_give_the_report_of_one_process(setup, tmp_path):
    corpus, specs, one = setup
    keys = tokenizer_keys(specs, ["gpt2"])
    work = tmp_path / "work"
    two = measure([corpus], keys, work_dir=str(work), tasks=3, workers=2, **KW)  # processes
    assert two.settings["tasks"] == 3 and one.settings["workers"] == 1
    same(one, two)

    # A relaunch runs only the tasks without a completion marker: task 1's counts are
    # removed with its marker, and tasks 0 and 2 keep the files they wrote.
    done = {n: (work / "counts" / f"{n:05d}.json").stat().st_mtime_ns for n in (0, 2)}
    for name in ("counts/00001.json", "counts/00001.npz", "logs/completions/00001"):
        (work / name).unlink()
    again = measure([corpus], keys, work_dir=str(work), tasks=3, workers=1, **KW)  # in-process
    assert {n: (work / "counts" / f"{n:05d}.json").stat().st_mtime_ns for n in (0, 2)} == done
    same(one, again)

    # other inputs in the same folder are refused, not merged
    with pytest.raises(OutputError, match="--work-dir .* other inputs"):
        measure([corpus], keys, work_dir=str(work), tasks=2, **KW)


def test_one_local_task_runs_here_and_gives_the_report_of_one_process(setup, tmp_path):
    """One task on the local executor is called in this process without datatrove's executor
    (fertility.engine.tasks._in_process: no manager process, no logs): the report of one
    process, and a relaunch after its counts merges them without measuring again."""
    corpus, specs, one = setup
    keys = tokenizer_keys(specs, ["gpt2"])
    work = tmp_path / "work"
    got = measure([corpus], keys, work_dir=str(work), tasks=1, **KW)
    same(one, got)
    assert sorted(os.listdir(work)) == ["counts", "fertility-run.json"]
    done = {p.name: p.stat().st_mtime_ns for p in (work / "counts").iterdir()}
    same(one, measure([corpus], keys, work_dir=str(work), tasks=1, **KW))
    assert {p.name: p.stat().st_mtime_ns for p in (work / "counts").iterdir()} == done


def test_counts_saved_before_rows_were_packed_still_merge(setup, tmp_path):
    """Task counts keep the per-document rows packed into a few columns
    (fertility.engine.codec.pack_rows); those of a run before, a list of rows per batch,
    merge into the same report, and rows that do not add up are refused with the file's name."""
    corpus, specs, one = setup
    keys = tokenizer_keys(specs, ["gpt2"])
    work = tmp_path / "work"
    measure([corpus], keys, work_dir=str(work), tasks=2, workers=1, **KW)
    folder = get_datafolder(str(work))  # the counts read and written through datatrove's
    for name in ("counts/00000", "counts/00001"):
        part = codec.load(folder, name)
        assert isinstance(part["doc_rows"], dict)  # packed
        part["doc_rows"] = codec.unpack_rows(part["doc_rows"], name)  # as a run before saved them
        codec.save(folder, name, part)
    again = measure([corpus], keys, work_dir=str(work), tasks=2, workers=1, **KW)  # merges
    same(one, again)

    part = codec.load(folder, "counts/00001")
    part["doc_rows"] = codec.pack_rows(part["doc_rows"])
    part["doc_rows"]["sizes"][0] += 1
    codec.save(folder, "counts/00001", part)
    with pytest.raises(FertilityError, match=f"^{work}/counts/00001: unreadable task counts"):
        measure([corpus], keys, work_dir=str(work), tasks=2, workers=1, **KW)


def test_ray_executor_on_a_local_instance(setup, tmp_path):
    """report's measuring and tokenize's shards on a local Ray instance (one start of Ray for
    both): the report of one process, and the shard files of the local executor."""
    ray = pytest.importorskip("ray")
    from fertility.engine.tokenize import tokenize

    corpus, specs, one = setup
    kw = dict(tasks=2, batch_size=32, shard_tokens=3000)
    tokenize([corpus], specs[0], str(tmp_path / "local"), workers=1, **kw)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = measure(
            [corpus],
            tokenizer_keys(specs, ["gpt2"]),
            work_dir=str(tmp_path / "work"),
            tasks=2,
            executor="ray",
            ray={"mem_per_cpu_gb": 0.5},  # this machine's Ray offers little object memory
            **KW,
        )
        on_ray = tmp_path / "ray"
        tokenize([corpus], specs[0], str(on_ray), executor="ray", ray={"mem_per_cpu_gb": 0.5}, **kw)
    finally:
        ray.shutdown()
    same(one, got)
    local = tmp_path / "local"
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    shards = [
        f for f in files if f.parts[0] == "parts" or f.name in ("index.json", "train-docs.bin")
    ]
    assert len([f for f in shards if f.suffix == ".bin"]) > 3  # parts of both tasks, several shards
    for name in shards:
        assert (local / name).read_bytes() == (on_ray / name).read_bytes(), name


def test_slurm_job_script(setup, tmp_path, monkeypatch):
    """Slurm cannot run here: a stand-in `sbatch` keeps the script it is handed, and the
    script must run our pickled pipeline as a 2-task array in the given partition."""
    corpus, specs, _ = setup
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    sbatch = bin_ / "sbatch"
    sbatch.write_text(
        f'#!/bin/sh\nfor a; do f="$a"; done\ncat "$f" >> {tmp_path}/submitted\necho Submitted batch job 42\n'
    )
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    work = tmp_path / "work"
    got = measure(
        [corpus],
        tokenizer_keys(specs[:1]),
        work_dir=str(work),
        tasks=2,
        executor="slurm",
        slurm={
            "partition": "cpu",
            "time": "01:00:00",
            "env_command": "source /opt/venv/bin/activate",
        },
        **KW,
    )
    assert got is None  # submitted, not finished: the same call merges later
    script = (work / "logs" / "launch_script.slurm").read_text()
    for line in (
        "#SBATCH --partition=cpu",
        "#SBATCH --time=01:00:00",
        "#SBATCH --array=0-1",
        "source /opt/venv/bin/activate",
        f"launch_pickled_pipeline {work / 'logs' / 'executor.pik'}",
    ):
        assert line in script, line
    assert json.loads((work / "logs" / "ranks_to_run.json").read_text()) == [0, 1]
    # the job and the stats merge after it were both handed to sbatch
    assert (tmp_path / "submitted").read_text().count("#!/bin/bash") == 2


def test_cli_tasks(setup, tmp_path):
    corpus, specs, one = setup
    args = [sys.executable, "-m", "fertility", "report", str(corpus), "--format", "json"]
    args += [f"-t{s}" for s in specs[:1]] + ["--pretokenizers", "gpt2", "--detail", "15"]
    plain = subprocess.run(args, capture_output=True, text=True, check=True)
    tasks = subprocess.run(
        args + ["--tasks", "2", "--work-dir", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        check=True,
    )
    a, b = json.loads(plain.stdout), json.loads(tasks.stdout)
    assert b["settings"]["tasks"] == 2
    a.pop("settings"), b.pop("settings")
    assert a == b
    bad = subprocess.run(
        args + ["--tasks", "2", "--executor", "slurm"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--slurm-partition" in bad.stderr


def test_the_work_folder_is_an_output_folder(run, tmp_path):
    """--work-dir follows the output policy: a folder of the user's is refused before any task
    runs, and nothing in it is touched."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus"
    code, _, err = run("report", corpus, "--tasks", "2", "--work-dir", mine, "--no-diagnose")
    assert code == 2 and "Traceback" not in err and str(mine) in err, err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
