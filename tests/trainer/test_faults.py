"""What a user of `fertility pretrain` meets when something goes wrong: an edited state.json,
another tokenizer or corpus on --resume, SIGTERM, a full disk, a checkpoint file holding a
pickled payload. Each is one line and a documented exit code, no good checkpoint is lost, and
no payload runs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fertility.trainer import checkpoint as ck
from tests.trainer.tokfixture import CORPUS, REPO, train_tokenizer

CONFIG = """preset = "tiny"
seq_len = 64
micro_batch = 4
tokens_per_step = 512
warmup_steps = 1
device = "cpu"
heldout_fraction = 0.05
keep_last = 3
checkpoint_every = {every}
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A finished 4-step run (checkpoints at steps 2 and 4) and its tokenizer."""
    root = tmp_path_factory.mktemp("faults")
    tok = train_tokenizer(root / "tok/tokenizer.json")
    cfg = root / "every2.toml"
    cfg.write_text(CONFIG.format(every=2))
    from fertility.cli import main

    main(
        [
            "pretrain",
            *CORPUS,
            "-t",
            tok,
            "--out",
            str(root / "run"),
            "--config",
            str(cfg),
            "--steps",
            "4",
            "--force",
            "--quiet",
        ]
    )  # returns on success
    assert [s for s, _ in ck.list_checkpoints(root / "run")] == [2, 4]
    return root, tok


@pytest.fixture()
def run_dir(base, tmp_path):
    shutil.copytree(base[0] / "run", tmp_path / "run")
    return tmp_path / "run"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_error_line(err: str) -> str:
    """The error: one line, the last (progress such as "resuming from ..." may precede it)."""
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("error: "), err
    assert sum(l.startswith("error: ") for l in lines) == 1, err
    return lines[-1]


def test_edited_step_in_state_json_refuses_the_resume(run, base, run_dir):
    state = run_dir / "checkpoints/step-00000004/state.json"
    manifest = json.loads(state.read_text())
    manifest["step"] = 3
    state.write_text(json.dumps(manifest, indent=1))
    code, out, err = run(
        "pretrain", *CORPUS, "-t", base[1], "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert str(state) in line and "edited" in line
    # Not quietly continued from the older checkpoint either: nothing was trained.
    assert [s for s, _ in ck.list_checkpoints(run_dir)] == [2, 4]


def test_edited_config_in_state_json_refuses_the_resume(run, base, run_dir):
    # The step matches its folder; only the manifest's own checksum can see this edit.
    state = run_dir / "checkpoints/step-00000004/state.json"
    manifest = json.loads(state.read_text())
    manifest["tokens_seen"] += 512
    state.write_text(json.dumps(manifest, indent=1))
    code, _, err = run(
        "pretrain", *CORPUS, "-t", base[1], "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    assert code == 2 and "checksum" in _one_error_line(err)


def test_another_tokenizer_on_resume_refused(run, base, run_dir, tmp_path):
    other = train_tokenizer(tmp_path / "other/tokenizer.json", vocab_size=320)
    code, _, err = run(
        "pretrain", *CORPUS, "-t", other, "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    assert code == 2 and str(run_dir / "run.json") in _one_error_line(err)


def test_swapped_tokenizer_copy_in_the_run_refused(run, base, run_dir, tmp_path):
    # eval and export load the run's copy: a replaced copy would score another tokenizer.
    other = train_tokenizer(tmp_path / "other/tokenizer.json", vocab_size=320)
    copy = run_dir / "tokenizer/tokenizer.json"
    shutil.copyfile(other, copy)
    code, _, err = run(
        "pretrain", *CORPUS, "-t", base[1], "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    assert code == 2 and str(copy) in _one_error_line(err)
    assert _sha(copy) == _sha(Path(other))  # the evidence is left as found


def test_different_corpus_on_resume_refused(run, base, run_dir):
    code, _, err = run(
        "pretrain",
        *CORPUS[:-1],
        "-t",
        base[1],
        "--out",
        run_dir,
        "--resume",
        "--steps",
        "6",
        "--quiet",
    )
    line = _one_error_line(err)
    assert code == 2 and "corpus" in line and os.path.abspath(CORPUS[-1]) in line


def test_the_same_corpus_from_another_folder_resumes(run, base, run_dir):
    # Paths are compared resolved: a job script may start in another working directory.
    rel = [os.path.relpath(p, run_dir) for p in CORPUS]
    cwd = os.getcwd()
    os.chdir(run_dir)
    try:
        code, out, err = run(
            "pretrain", *rel, "-t", base[1], "--out", ".", "--resume", "--steps", "5",
            "--quiet", "--format", "json",
        )  # fmt: skip
    finally:
        os.chdir(cwd)
    assert code == 0, err
    assert json.loads(out)["steps"] == 5


def test_sigterm_checkpoints_the_current_step_and_exits_143(run, base, tmp_path):
    cfg = tmp_path / "rare.toml"
    cfg.write_text(CONFIG.format(every=100000))  # no periodic checkpoint before the signal
    out_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from fertility.cli import main; main()",
            "pretrain",
            *CORPUS,
            "-t",
            base[1],
            "--out",
            str(out_dir),
            "--config",
            str(cfg),
            "--steps",
            "100000",
            "--force",
            "--quiet",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = out_dir / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert out == "" and "Traceback" not in err and err.strip().splitlines()[-1] == "terminated"
    steps = [
        r["step"] for r in map(json.loads, metrics.read_text().splitlines()) if "event" not in r
    ]
    found = ck.latest_checkpoint(out_dir)
    assert found is not None
    step = found[1]["step"]
    assert step >= 3 and step == steps[-1]  # the step it was in, not the one it was given
    code, out, err = run(
        "pretrain",
        *CORPUS,
        "-t",
        base[1],
        "--out",
        out_dir,
        "--resume",
        "--steps",
        str(step + 2),
        "--quiet",
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["steps"] == step + 2


@pytest.mark.parametrize(
    "fault",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        # what torch.save raises when the disk fills mid-file
        RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 1280 vs 1178"),
    ],
)
def test_full_disk_is_one_line_and_keeps_the_previous_checkpoint(
    run, base, run_dir, monkeypatch, fault
):
    before = {p.name: _sha(p) for p in (run_dir / "checkpoints/step-00000004").iterdir()}

    def full(*args, **kw):
        raise fault

    if isinstance(fault, OSError):
        monkeypatch.setattr(ck, "save_file", full)
    else:
        monkeypatch.setattr(torch, "save", full)
    code, out, err = run(
        "pretrain", *CORPUS, "-t", base[1], "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    monkeypatch.undo()
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert str(run_dir / "checkpoints/step-00000006") in line
    cause = os.strerror(errno.ENOSPC) if isinstance(fault, OSError) else "unexpected pos"
    assert cause in line
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "step-00000002",
        "step-00000004",
    ]  # no temporary folder left behind
    after = {p.name: _sha(p) for p in (run_dir / "checkpoints/step-00000004").iterdir()}
    assert after == before
    model, manifest = ck.load_model(run_dir)
    assert manifest["step"] == 4 and isinstance(model, torch.nn.Module)


# -- a checkpoint file that holds a pickled payload -------------------------------------------


class _Payload:
    """Unpickling this runs a shell command that creates `marker`: what a malicious
    checkpoint does to whoever loads it with weights_only=False."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def _plant(step_dir: Path, name: str, write) -> Path:
    """Replace `name` in a checkpoint folder and re-sign state.json (as an attacker can: the
    checksums find accidents, not intent), so only the loader stands in the way."""
    target = step_dir / name
    write(target)
    state_path = step_dir / "state.json"
    state = json.loads(state_path.read_text())
    state["files"][name] = ck.sha256(target)
    state["manifest_sha256"] = ck._manifest_sha256(state)
    state_path.write_text(json.dumps(state, indent=1))
    return target


def _pickled(marker: Path, form: str):
    def write(path: Path) -> None:
        if form == "torch.save":  # the whole state is the payload
            torch.save(_Payload(marker), path)
        elif form == "inside the rng state":  # a well-formed state with one bad leaf
            state = ck.load_train_state(path.parent)
            state["rng"]["python"]["gauss"] = _Payload(marker)
            torch.save(state, path)
        else:  # a bare pickle, not torch's zip format
            import pickle

            path.write_bytes(pickle.dumps(_Payload(marker), protocol=4))

    return write


def _refusal(code: int, out: str, err: str, path: Path) -> str:
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert line.startswith(f"error: {path}: ") and "will not be loaded" in line, line
    assert "weights_only" not in err, err  # never the advice that would run the payload
    return line


@pytest.mark.parametrize("form", ["torch.save", "inside the rng state", "bare pickle"])
def test_a_pickled_payload_in_optimizer_state_is_refused_and_never_run(
    run, base, run_dir, tmp_path, form
):
    marker = tmp_path / "payload-ran"
    planted = _plant(run_dir / "checkpoints/step-00000004", "optimizer.pt", _pickled(marker, form))
    code, out, err = run(
        "pretrain", *CORPUS, "-t", base[1], "--out", run_dir, "--resume", "--steps", "6", "--quiet"
    )
    line = _refusal(code, out, err, planted)
    assert "not plain tensors" in line
    assert not marker.exists()
    assert [s for s, _ in ck.list_checkpoints(run_dir)] == [2, 4]  # nothing trained


_MODEL_READERS = {
    "pretrain --resume": lambda run_dir, out, tok: (
        "pretrain",
        *CORPUS,
        "-t",
        tok,
        "--out",
        run_dir,
        "--resume",
        "--steps",
        "6",
        "--quiet",
    ),
    "eval": lambda run_dir, out, tok: ("eval", run_dir, "--device", "cpu", "--quiet"),
    "export": lambda run_dir, out, tok: ("export", run_dir, out, "--to", "hf"),
}


@pytest.mark.parametrize("command", list(_MODEL_READERS))
def test_a_pickle_in_place_of_the_model_file_is_refused_and_never_run(
    run, base, run_dir, tmp_path, command
):
    """model.safetensors is read by safetensors alone: a pickle there is not a safetensors
    file, and nothing unpickles it."""
    marker = tmp_path / "payload-ran"
    planted = _plant(
        run_dir / "checkpoints/step-00000004", "model.safetensors", _pickled(marker, "torch.save")
    )
    code, out, err = run(*_MODEL_READERS[command](run_dir, tmp_path / "hf", base[1]))
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert line.startswith(f"error: {planted}: not a readable safetensors file"), line
    assert "weights_only" not in err
    assert not marker.exists()
