"""hf:// corpus paths without a network: offline or with no hub answering, one line naming
the path and exit 2, at once (fertility.corpus.remote). Nothing here reaches a network."""

from __future__ import annotations

import time

import pytest

PATH = "hf://datasets/HuggingFaceFW/fineweb-2/data/ben_Beng/train"


def _one_line_exit_2(run, *argv) -> str:
    t0 = time.monotonic()
    code, out, err = run(*argv)
    assert time.monotonic() - t0 < 10  # the hub's own retries would take minutes
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and PATH in lines[0], err
    return lines[0]


def test_offline_is_one_line_and_exit_2(run, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = _one_line_exit_2(run, "report", PATH, "-q", "--pretokenizers", "whitespace")
    assert "offline" in line
    _one_line_exit_2(run, "report", PATH, "-q", "--pretokenizers", "gpt2", "--precision", "0.01")


def test_no_hub_answering_is_one_line_and_exit_2(run, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    # port 9 (discard) on this machine: refused at once, as a hub that is down
    monkeypatch.setattr(hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    line = _one_line_exit_2(run, "report", PATH, "-q", "--pretokenizers", "whitespace")
    assert "cannot reach" in line


def test_a_path_that_is_no_dataset_is_one_line(run):
    code, _, err = run("report", "hf://models/gpt2", "-q")
    assert code == 2 and "hf://datasets/ORG/NAME" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["fix", "eval"])
def test_precision_is_refused_where_nothing_samples(run, tmp_path, command):
    """--precision is report's and gate's: the others read every document; one line, exit 2."""
    (tmp_path / "en.txt").write_text("a line of text\n", encoding="utf-8")
    args = {"fix": ["--vocab-size", "300", "--out", tmp_path / "o"], "eval": [tmp_path / "run"]}[
        command
    ]
    if command == "eval":
        code, _, err = run("eval", *args, "--precision", "0.1")
    else:
        code, _, err = run("fix", tmp_path, *args, "--precision", "0.1")
    assert code == 2 and "--precision" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
