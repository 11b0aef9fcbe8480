"""Checkpoints: one folder per step, written atomically, verified by checksum on load.

    RUN_DIR/checkpoints/step-00000100/
        model.safetensors   weights (tied tensors stored once, aliases in the metadata)
        optimizer.pt        optimizer, scheduler, RNG states, data cursor: tensors and plain
                            values only, so torch.load(weights_only=True) reads it
        state.json          manifest: step, tokens seen, config, tokenizer fingerprint,
                            the sha256 of every other file and of itself; written last

A checkpoint is built in `checkpoints/.tmp-step-...`, every file fsync'd, then renamed into
place, so a killed process leaves either the whole folder or a temporary one that is ignored.
Loading walks back from the newest folder and skips, with a warning, any whose files are
missing or do not match their checksums. A state.json that fails its own checksum, or whose
step is not its folder's, was edited by hand (a torn write cannot produce one: the folder
appears whole by rename): that is refused, not skipped, so no edit slips through silently.
A write that fails (full disk) leaves the previous checkpoints as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import shutil
import sys
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from fertility.errors import EvalError, TrainingError, one_line
from fertility.outputs import inside, make_inside
from fertility.trainer.model import ModelConfig, Transformer
from fertility.trainer.rundir import CHECKPOINTS, RunDir

SCHEMA = "fertility.checkpoint/1"
WEIGHTS, TRAIN_STATE, MANIFEST = "model.safetensors", "optimizer.pt", "state.json"
_STEP_RE = re.compile(r"^step-(\d{8})$")


def step_dir(run_dir: str | Path, step: int) -> Path:
    return RunDir(run_dir).checkpoint(step)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _manifest_sha256(state: dict[str, Any]) -> str:
    """sha256 of the manifest's fields except itself, in a canonical JSON form."""
    body = {k: v for k, v in state.items() if k != "manifest_sha256"}
    body = json.loads(json.dumps(body))  # as read back: int keys become str, tuples lists
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EditedManifest(TrainingError):
    """A state.json changed after it was written: refused rather than skipped."""


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- RNG states as weights_only-safe values ------------------------------------------------


def capture_rng() -> dict[str, Any]:
    legacy = np.random.get_state()  # a dict only for a RandomState over another generator
    assert isinstance(legacy, tuple), "numpy's global RandomState is an MT19937"
    _, keys, pos, has_gauss, cached = legacy
    version, py_state, gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": {
            "version": version,
            "state": torch.tensor(py_state, dtype=torch.int64),
            "gauss": gauss,
        },
    }


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state(
        ("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(int(x) for x in p["state"].tolist()), p["gauss"]))


# -- writing -------------------------------------------------------------------------------


def _dedupe(weights: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """safetensors refuses tensors sharing storage (tied embeddings): store each once."""
    seen: dict[tuple, str] = {}
    out: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, t in weights.items():
        key = (
            t.device,
            t.untyped_storage().data_ptr(),
            t.storage_offset(),
            tuple(t.shape),
            tuple(t.stride()),
            t.dtype,
        )
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            out[name] = t.detach().to("cpu").contiguous()
    return out, aliases


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    weights: dict[str, torch.Tensor],
    train_state: dict[str, Any],
    manifest: dict[str, Any],
    keep_last: int = 3,
) -> Path:
    """Write checkpoint `step` atomically and prune all but the newest `keep_last`.

    `weights` is a full (unsharded) state dict, `train_state` holds the optimizer, scheduler,
    RNG and data-cursor state (tensors and plain values), `manifest` the JSON-able fields
    (config, tokens_seen, tokenizer fingerprint, ...) that go into state.json.
    """
    final = step_dir(run_dir, step)
    root = final.parent
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        # below the run folder nothing is followed: a link at checkpoints/ or at one of its
        # entries is refused (fertility.outputs), its target never written or deleted
        make_inside(Path(run_dir), CHECKPOINTS, TrainingError)
        inside(Path(run_dir), f"{CHECKPOINTS}/{tmp.name}", TrainingError)
        inside(Path(run_dir), f"{CHECKPOINTS}/{final.name}", TrainingError)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        _write_folder(tmp, step, weights, train_state, manifest)
    # torch.save on a full disk raises RuntimeError ("... unexpected pos ..."), safetensors
    # its own error; either way the temporary folder goes and the older checkpoints stay.
    except (OSError, RuntimeError, SafetensorError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        cause = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())
        raise TrainingError(
            f"{final}: cannot write the checkpoint ({cause}); the previous checkpoints are kept"
        ) from None
    if final.exists():  # the same step written again after a rollback: replace it
        old = root / f".tmp-old-{final.name}-{os.getpid()}"
        os.replace(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, final)
    _fsync(root)
    for _, path in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(path, ignore_errors=True)
    return final


def _write_folder(
    tmp: Path,
    step: int,
    weights: dict[str, torch.Tensor],
    train_state: dict[str, Any],
    manifest: dict[str, Any],
) -> None:
    """The checkpoint's three files in `tmp`, each fsync'd, the manifest last."""
    tensors, aliases = _dedupe(weights)
    save_file(
        tensors, str(tmp / WEIGHTS), metadata={"format": "pt", "aliases": json.dumps(aliases)}
    )
    torch.save(train_state, tmp / TRAIN_STATE)
    files = {}
    for name in (WEIGHTS, TRAIN_STATE):
        _fsync(tmp / name)
        files[name] = sha256(tmp / name)
    state = {
        "schema": SCHEMA,
        "step": step,
        **manifest,
        "files": files,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    state["manifest_sha256"] = _manifest_sha256(state)
    with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    _fsync(tmp)


def remove_partial(run_dir: str | Path) -> None:
    """Remove temporary folders left by a process killed while writing a checkpoint (never
    through a symbolic link: fertility.outputs.inside refuses one on the way)."""
    root = inside(Path(run_dir), CHECKPOINTS, TrainingError)
    if root.is_dir():
        for p in root.glob(".tmp-*"):
            path = inside(Path(run_dir), f"{CHECKPOINTS}/{p.name}", TrainingError)
            shutil.rmtree(path, ignore_errors=True)


# -- reading -------------------------------------------------------------------------------


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, folder) of every finished checkpoint folder, oldest first (not yet verified)."""
    root = RunDir(run_dir).checkpoints
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_RE.match(p.name))
    ]
    return sorted(found)


def verify_checkpoint(path: str | Path) -> dict[str, Any]:
    """The manifest of a whole, uncorrupted checkpoint; TrainingError saying what is wrong."""
    path = Path(path)
    try:
        state = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingError(f"{path}: {MANIFEST} is missing (partial checkpoint)") from None
    except (OSError, ValueError) as e:
        raise TrainingError(f"{path / MANIFEST}: unreadable ({one_line(e)})") from None
    except RecursionError:  # the decoder recurses per nesting level
        raise TrainingError(f"{path / MANIFEST}: JSON nested too deeply to read") from None
    if not isinstance(state, dict) or state.get("schema") != SCHEMA:
        raise TrainingError(f"{path / MANIFEST}: not a {SCHEMA} manifest")
    # Checkpoints written before the manifest carried its own checksum have none.
    if "manifest_sha256" in state and state["manifest_sha256"] != _manifest_sha256(state):
        raise EditedManifest(
            f"{path / MANIFEST}: checksum does not match its contents "
            "(edited after it was written); restore it or delete the folder"
        )
    m = _STEP_RE.match(path.name)
    if m and state.get("step") != int(m.group(1)):
        raise EditedManifest(
            f"{path / MANIFEST}: step {state.get('step')!r} is not the "
            f"folder's {int(m.group(1))}; restore it or delete the folder"
        )
    files = state.get("files")
    if not isinstance(files, dict):
        raise TrainingError(f"{path / MANIFEST}: no checksums of its files (files)")
    for name in (WEIGHTS, TRAIN_STATE):
        expected = files.get(name)
        if not (path / name).is_file():
            raise TrainingError(f"{path / name}: missing")
        if expected != sha256(path / name):
            raise TrainingError(f"{path / name}: checksum does not match {MANIFEST} (corrupt)")
    return state


def latest_checkpoint(
    run_dir: str | Path, warn: Callable[[str], None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The newest valid checkpoint, skipping (with a warning) corrupt or partial ones;
    EditedManifest when a state.json was changed by hand."""
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    for _, path in reversed(list_checkpoints(run_dir)):
        try:
            return path, verify_checkpoint(path)
        except EditedManifest:
            raise
        except TrainingError as e:
            warn(f"skipping checkpoint: {e}")
    return None


def load_weights(path: str | Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The full state dict of a checkpoint folder, tied names restored."""
    file = Path(path) / WEIGHTS
    try:
        with safe_open(str(file), framework="pt", device=str(device)) as f:
            weights = {name: f.get_tensor(name) for name in f.keys()}
            aliases = json.loads((f.metadata() or {}).get("aliases", "{}"))
    except (OSError, SafetensorError, ValueError) as e:  # never unpickled: safetensors only
        raise TrainingError(f"{file}: not a readable safetensors file ({one_line(e)})") from None
    if not isinstance(aliases, dict) or not all(
        isinstance(t, str) and t in weights for t in aliases.values()
    ):
        raise TrainingError(f"{file}: its tied-weight aliases name no stored tensor")
    for name, target in aliases.items():
        weights[name] = weights[target]
    return weights


def _refused(file: Path) -> str:
    """What a file holding pickled code or objects gets: a refusal, never advice on how to
    load it anyway (torch's own message suggests weights_only=False, which would run it)."""
    return (
        f"{file}: holds code or objects that are not plain tensors and values; it will "
        "not be loaded (a checkpoint written by `fertility pretrain` never holds any)"
    )


def load_train_state(path: str | Path) -> dict[str, Any]:
    """optimizer.pt: tensors and plain values only (torch.load with weights_only=True, which
    never runs pickled code); anything else in it is refused, one line naming the file."""
    file = Path(path) / TRAIN_STATE
    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol it reads
            warnings.simplefilter("ignore")
            state = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # weights_only met a global it does not allow
        raise TrainingError(_refused(file)) from None
    except Exception as e:  # noqa: BLE001  a truncated or corrupt file, in torch's words
        if "weights_only" in str(e) or "Weights only" in str(e):
            raise TrainingError(_refused(file)) from None
        raise TrainingError(f"{file}: unreadable training state ({one_line(e)})") from None
    missing = [
        k for k in ("optimizer", "rng", "cursor") if not isinstance(state, dict) or k not in state
    ]
    if missing:
        raise TrainingError(f"{file}: not a training state (no {missing[0]!r})")
    return state


def load_model(
    run_dir: str | Path, step: int | None = None, device: str | torch.device = "cpu"
) -> tuple[Transformer, dict[str, Any]]:
    """(Transformer in eval mode, checkpoint manifest) for evaluation and export.

    `step` None takes the newest valid checkpoint (corrupt ones skipped with a warning).
    """

    if step is None:
        found = latest_checkpoint(run_dir)
        if found is None:
            raise EvalError(f"{run_dir}: no valid checkpoint in {Path(run_dir) / 'checkpoints'}")
        path, manifest = found
    else:
        path = step_dir(run_dir, step)
        if not path.is_dir():
            raise EvalError(f"{path}: no checkpoint for step {step}")
        try:
            manifest = verify_checkpoint(path)
        except TrainingError as e:
            raise EvalError(str(e)) from None
    spec = manifest.get("model")
    if not isinstance(spec, dict):
        raise EvalError(f"{path / MANIFEST}: no model configuration (model)")
    try:
        model = Transformer(ModelConfig.from_dict(spec))
    except TrainingError as e:
        raise EvalError(f"{path / MANIFEST}: {e}") from None
    try:
        weights = load_weights(path, "cpu")
    except TrainingError as e:
        raise EvalError(str(e)) from None
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise EvalError(
            f"{path / WEIGHTS}: does not fit the model in {MANIFEST} ({one_line(e)})"
        ) from None
    return model.to(device).eval(), manifest
