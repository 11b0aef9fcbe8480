"""`fertility fix --out DIR`: one run at a time writes DIR, and what a killed run left there
(its temporary `.NAME.fertility-partial-PID` files) is removed by the next run, which ends consistent."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from tokenizers import Tokenizer

from tests.fix.test_fix import write_corpus


def _partials(folder):
    return sorted(p.name for p in folder.rglob(".*.fertility-partial-*"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Big enough that a run trains and measures for seconds (time to catch it midway)."""
    return write_corpus(tmp_path_factory.mktemp("fixout") / "corpus", lines=20_000, words=400)


def _start_fix(corpus, out):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fertility.cli",
            "fix",
            str(corpus),
            "--vocab-size",
            "3000",
            "--out",
            str(out),
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=out.parent,
    )


def test_second_run_is_refused_and_a_killed_runs_leftovers_are_removed(run, corpus, tmp_path):
    out = tmp_path / "out"
    first = _start_fix(corpus, out)
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and _partials(out)) and time.monotonic() < deadline:
            assert first.poll() is None, "the first run ended before it wrote anything"
            time.sleep(0.05)
        assert _partials(out), "the first run never started writing"

        code, _, err = run("fix", corpus, "--vocab-size", "300", "--out", out, "-q")
        assert code == 2 and err.strip().splitlines() == [
            f"error: {out}: another `fertility fix` is writing this folder; wait for it to "
            "end or choose another one"
        ]
        assert first.poll() is None  # the refused run did not disturb the running one

        first.send_signal(signal.SIGKILL)  # no chance to clean up
        first.wait(timeout=10)
        left = _partials(out)
        assert left and all(name.endswith(f"-{first.pid}") for name in left)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(timeout=10)

    code, out_text, err = run("fix", corpus, "--vocab-size", "300", "--out", out, "-q")
    assert code in (0, 1), err  # 1: the gate said no; the folder is complete either way
    assert _partials(out) == []
    report = json.loads((out / "fix-report.json").read_text())
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert tok.get_vocab_size() == report["tokenizer"]["vocab_size"] <= 300
    held = {p.name for p in (out / "heldout").iterdir()}
    assert held == {"bn.jsonl", "en.jsonl"}
    assert os.path.getsize(out / "report.html") > 0


def test_folder_of_a_run_killed_between_tokenizer_and_report_is_refused(run, corpus, tmp_path):
    out = tmp_path / "out"
    proc = _start_fix(corpus, out)
    try:
        deadline = time.monotonic() + 60
        while not (out / "tokenizer.json").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, "the run ended before its tokenizer appeared"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # while it measures, before fix-report.json
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert (out / "tokenizer.json").exists() and not (out / "fix-report.json").exists()
    code, _, err = run("report", corpus, "-t", out, "-q")
    assert code == 2 and err.strip().splitlines() == [
        f"error: {out}: an unfinished `fertility fix` run (still writing, or killed) left "
        "this folder; its files may not belong together: run `fertility fix` again"
    ]

    code, _, err = run("fix", corpus, "--vocab-size", "300", "--out", out, "-q")
    assert code in (0, 1), err
    code, text, err = run("report", corpus, "-t", out, "--format", "json", "-q")
    assert code == 0, err
    measured = json.loads(text)["tokenizers"][0]
    report = json.loads((out / "fix-report.json").read_text())
    assert measured["fingerprint"] == report["tokenizer"]["fingerprint"]


@contextlib.contextmanager
def read_only(folder):
    """`folder` made unwritable: mode 0555, or for root (whom modes do not stop) immutable
    (`chattr +i`, which binds root too)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("running as root on a file system without chattr +i: cannot stop a write")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def _files(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_read_only_output_folder_is_refused_before_training(run, tmp_path):
    # (before: a rerun into its own folder, made read-only, trained on the whole corpus and
    # then died with `unexpected Exception: Permission denied (os error 13)`)
    corpus = write_corpus(tmp_path / "corpus", lines=60)
    out = tmp_path / "out"
    code, _, err = run("fix", corpus, "--vocab-size", "300", "--out", out, "-q")
    assert code in (0, 1), err
    before = _files(out)
    for folder in (out, out / "heldout"):  # the folder, or the subfolder it writes
        with read_only(folder):
            code, _, err = run("fix", corpus, "--vocab-size", "300", "--out", out, "-q")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith(f"error: {folder}: cannot write into this output folder (")
        assert _files(out) == before
