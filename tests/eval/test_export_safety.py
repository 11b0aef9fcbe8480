"""`fertility export --to hf` never deletes what is not its own: it refuses an output that is,
contains or lies inside the run folder (with or without --overwrite, through a symlink too),
`--overwrite` replaces only a previous export (its fertility_export.json) and only the files
an export writes, and every refusal is one line, exit 2, with every file as it was."""

import json
import os
from pathlib import Path

import pytest

from tests.eval.test_export import make_run, train_bpe
from tests.snapshot import snapshot


@pytest.fixture()
def tiny_run(tmp_path):
    """A run folder (checkpoint, run.json, tokenizer) in tmp_path/work/run, plus the user's
    own files beside it."""
    work = tmp_path / "work"
    work.mkdir()
    run = make_run(work, train_bpe(tmp_path / "tokenizer.json"))
    (run / "metrics.jsonl").write_text('{"step": 5, "loss": 3.2}\n')
    (work / "notes.txt").write_text("the user's notes\n")
    return run


def one_line_error(rc, out, err):
    assert rc == 2, out + err
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ")
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "where, why",
    [
        (lambda run: run, "is the run folder"),
        (lambda run: run / "hf", "lies inside the run folder"),
        (lambda run: run / "checkpoints", "lies inside the run folder"),
        (lambda run: run.parent, "contains the run folder"),
    ],
)
@pytest.mark.parametrize("overwrite", [False, True])
def test_output_at_inside_or_around_the_run_is_refused_and_nothing_deleted(
    run, tiny_run, where, why, overwrite
):
    work = tiny_run.parent
    before = snapshot(work)
    assert "run.json" in {Path(k).name for k in before} and len(before) > 5
    out = where(tiny_run)
    rc, stdout, err = run(
        "export", tiny_run, "--to", "hf", out, *(["--overwrite"] if overwrite else [])
    )
    err = one_line_error(rc, stdout, err)
    assert why in err and str(out) in err
    assert snapshot(work) == before


def test_symlink_to_the_run_is_refused(run, tiny_run, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tiny_run, target_is_directory=True)
    before = snapshot(tiny_run.parent)
    rc, stdout, err = run("export", tiny_run, "--to", "hf", link, "--overwrite")
    err = one_line_error(rc, stdout, err)
    assert "is the run folder" in err and str(tiny_run) in err
    assert snapshot(tiny_run.parent) == before and link.is_symlink()


def test_overwrite_of_a_folder_that_is_not_an_export_is_refused(run, tiny_run, tmp_path):
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "config.json").write_text('{"mine": true}')
    (mine / "sub" / "data.bin").write_bytes(b"\x00\x01")
    # a provenance file that is not an export's (not JSON) marks nothing
    (mine / "fertility_export.json").write_text("not json")
    before = snapshot(mine)
    rc, stdout, err = run("export", tiny_run, "--to", "hf", mine, "--overwrite")
    err = one_line_error(rc, stdout, err)
    assert "is not a previous export" in err and str(mine) in err
    assert snapshot(mine) == before


def test_a_file_as_output_is_refused_even_with_overwrite(run, tiny_run, tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"weights")
    rc, stdout, err = run("export", tiny_run, "--to", "hf", f, "--overwrite")
    assert "is not a folder" in one_line_error(rc, stdout, err)
    assert f.read_bytes() == b"weights"


def test_overwrite_replaces_a_previous_exports_files_and_keeps_the_users(run, tiny_run, tmp_path):
    out = tmp_path / "hf"
    rc, _, err = run("export", tiny_run, "--to", "hf", out)
    assert rc == 0, err
    first = snapshot(out)
    assert json.loads((out / "fertility_export.json").read_text())["step"] == 5
    # the user's own files, and export files made stale: a damaged config.json and a
    # tokenizer.model that this (tokenizer.json) export does not write
    (out / "README.md").write_text("# my model card\n")
    (out / "eval").mkdir()
    (out / "eval" / "results.json").write_text("{}")
    (out / "config.json").write_text("{}")
    (out / "tokenizer.model").write_bytes(b"stale")
    rc, _, err = run("export", tiny_run, "--to", "hf", out, "--overwrite")
    assert rc == 0, err
    assert (out / "README.md").read_text() == "# my model card\n"
    assert (out / "eval" / "results.json").read_text() == "{}"
    assert not (out / "tokenizer.model").exists()
    after = snapshot(out)
    # the export's own files are again exactly what a fresh export writes (same run, same
    # step: same bytes)
    assert {k: after[k] for k in first} == first
    assert set(after) - set(first) == {"README.md", "eval", "eval/results.json"}
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def test_symlinked_output_is_resolved_the_link_kept(run, tiny_run, tmp_path):
    real = tmp_path / "exports" / "v1"
    rc, _, err = run("export", tiny_run, "--to", "hf", real)
    assert rc == 0, err
    link = tmp_path / "latest"
    link.symlink_to(real, target_is_directory=True)
    (real / "config.json").write_text("{}")
    rc, _, err = run("export", tiny_run, "--to", "hf", link, "--overwrite")
    assert rc == 0, err
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads((real / "config.json").read_text())["model_type"] == "llama"


def test_export_folder_gets_the_umask_mode(run, tiny_run, tmp_path):
    out = tmp_path / "hf"
    rc, _, err = run("export", tiny_run, "--to", "hf", out)
    assert rc == 0, err
    umask = os.umask(0o22)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask
    # every file alike: safetensors creates model.safetensors 0600, its siblings get 0644
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes


def test_a_weights_write_that_fails_names_the_file(run, tiny_run, tmp_path, monkeypatch):
    """safetensors' own error (a full disk, for one) named no file: "unexpected"."""
    import safetensors.torch

    def full(*a, **k):
        raise safetensors.SafetensorError("Error while serializing: IoError(No space left)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    out = tmp_path / "hf"
    err = one_line_error(*run("export", tiny_run, "--to", "hf", out))
    assert f"{out}: cannot write model.safetensors (" in err and "No space left" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_an_export_that_fails_midway_leaves_the_previous_one_and_no_temp_folder(
    run, tiny_run, tmp_path, monkeypatch
):
    import fertility.eval.export as export

    out = tmp_path / "hf"
    rc, _, err = run("export", tiny_run, "--to", "hf", out)
    assert rc == 0, err
    before = snapshot(tmp_path)

    def fail(*a, **k):
        raise export.EvalError("tokenizer.json: conversion refused")

    # fails after the weights are written into the temporary folder
    monkeypatch.setattr(export, "_write_tokenizer", fail)
    for target in (out, tmp_path / "new"):
        rc, stdout, err = run("export", tiny_run, "--to", "hf", target, "--overwrite")
        assert "conversion refused" in one_line_error(rc, stdout, err)
        assert snapshot(tmp_path) == before
