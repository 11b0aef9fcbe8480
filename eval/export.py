"""`fertility export --to hf`: a folder Hugging Face transformers loads as LlamaForCausalLM.

    OUT_DIR/config.json               LlamaConfig (trainer.model.hf_llama_config) + special ids
    OUT_DIR/model.safetensors         weights under Llama's names (trainer.model.hf_llama_state_dict)
    OUT_DIR/generation_config.json    bos/eos ids
    OUT_DIR/tokenizer.json            the run's tokenizer as a `tokenizers` file (see below)
    OUT_DIR/tokenizer_config.json     PreTrainedTokenizerFast, max length, special tokens
    OUT_DIR/special_tokens_map.json
    OUT_DIR/fertility_export.json     provenance: run folder, step, tokenizer fingerprint;
                                      marks the folder as an export (see _check_output)

The tokenizer files are written by fertility.tokenizers.convert, each kind's conversion
declared in fertility.tokenizers.kinds:
    hf             the run's tokenizer.json, truncation and padding off.
    tiktoken       converted to a byte-level BPE tokenizer.json (ranks become the vocabulary,
                   merges derived from the ranks, the split regex becomes a Split pre-tokenizer;
                   the conversion transformers itself uses for Llama 3), then checked: the
                   export is refused if the converted tokenizer encodes a probe text
                   differently.
    sentencepiece  converted to tokenizer.json when that encodes the check texts alike; else
                   the .model is copied as tokenizer.model and tokenizer_config.json names
                   LlamaTokenizer with add_bos_token/add_eos_token false (transformers
                   converts the .model on load, which needs the `sentencepiece` and
                   `protobuf` packages).
    tekken         not exported.
The run's document separator (the tokenizer's end-of-text token, or the id the trainer reserved
past the vocabulary when the tokenizer has none, written here as the special token
SEPARATOR_TOKEN) is bos_token and eos_token, and the tokenizer adds nothing: `tokenizer(text)`
gives the bare ids. Evaluators put the separator in front themselves: lm-evaluation-harness
takes bos_token_id as its prefix token, so its rolling log-likelihood of a document is exactly
`fertility eval`'s (docs/EVAL.md); a tokenizer that prepended it too would have lm-eval
score the separator as a token of every document. max_position_embeddings is the run's
training context, which lm-evaluation-harness and generation tools read as the model's
context length.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from fertility.errors import EvalError, one_line
from fertility.eval.run import heldout_documents, open_run
from fertility.files import PARTIAL
from fertility.outputs import Inputs, check_folder, read_manifest, record, remove, replace_inside
from fertility.tokenizers import convert
from fertility.trainer.model import hf_llama_config, hf_llama_state_dict

if TYPE_CHECKING:  # fertility_export.json's record (fertility/schemas/eval.py), for mypy only
    from fertility.schemas.eval import Export

# the name a separator the trainer reserved past the vocabulary is given
SEPARATOR_TOKEN = convert.SEPARATOR_TOKEN
# The provenance file marks a folder as an export: `--overwrite` replaces only such a folder.
MARKER = "fertility_export.json"
EXPORT_SCHEMA: Final = "fertility.export/1"
# Every file an export may write; `--overwrite` touches these and nothing else.
EXPORT_FILES = frozenset(
    {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        MARKER,
    }
)


def export_hf(
    run_dir: str | Path, out_dir: str | Path, *, step: int | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Write the Hugging Face folder; returns {"out_dir", "step", "files", "tokenizer"}."""
    # deferred: safetensors is the optional train extra
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    real, previous = _check_output(Path(run_dir), out_dir, overwrite)
    run = open_run(run_dir, step=step, device="cpu")
    tok, cfg = run.tokenizer, run.model.cfg
    sep_token = convert.separator_text(tok, run.separator)

    # A fresh hidden folder beside the output, never an existing one: a fixed name such as
    # OUT.partial could be the user's (or the run's own) folder, and it was deleted first.
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{real.name}{PARTIAL}", dir=real.parent))
        umask = os.umask(0o22)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would become the export folder's mode
    except OSError as e:
        raise EvalError(f"{out_dir}: cannot create the export folder ({e.strerror or e})") from e
    files: dict[str, Any] = {}
    try:
        weights = {k: v.detach().contiguous() for k, v in hf_llama_state_dict(run.model).items()}
        try:
            save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        except OSError:
            raise
        except Exception as e:  # safetensors' own error (a full disk among them) names no file
            raise EvalError(f"{out_dir}: cannot write model.safetensors ({one_line(e)})") from None
        # safetensors creates its file 0600; the export's files all get the umask's mode
        (tmp / "model.safetensors").chmod(0o666 & ~umask)
        config = hf_llama_config(cfg)
        config.update(
            {
                "bos_token_id": run.separator,
                "eos_token_id": run.separator,
                "pad_token_id": None,
                "max_position_embeddings": run.context,
            }
        )
        _write_json(tmp / "config.json", config)
        _write_json(
            tmp / "generation_config.json",
            {"bos_token_id": run.separator, "eos_token_id": run.separator},
        )
        probes = [convert.PROBE, *_heldout_sample(run.dir)]
        note = _write_tokenizer(tok, run.tokenizer_path, tmp, run.separator, run.context, probes)
        provenance: Export = {
            "schema": EXPORT_SCHEMA,
            "run_dir": str(run.dir),
            "step": run.manifest.get("step"),
            "tokenizer": run.meta.get("tokenizer"),
            "separator": run.separator,
            "separator_token": sep_token,
            "context": run.context,
            "tokenizer_note": note,
        }
        _write_json(tmp / MARKER, provenance)
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        record(real if previous else tmp, sorted(EXPORT_FILES), made_by="export")
        if previous:
            _replace_export(tmp, real)
        else:
            if real.is_dir():  # empty (checked above): rename needs it gone or empty
                real.rmdir()
            tmp.replace(real)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EvalError(f"{out_dir}: cannot write the export ({e.strerror or e})") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {
        "out_dir": str(out_dir),
        "step": run.manifest.get("step"),
        "files": files,
        "tokenizer": note,
    }


def _check_output(run_dir: Path, out_dir: Path, overwrite: bool) -> tuple[Path, bool]:
    """The real output folder and whether it holds a previous export to replace; EvalError
    for an output the export must not touch (fertility.outputs.check_folder, the one policy).

    A symlinked output is resolved and the rules apply to the folder it points to (the link
    stays a link). The output may not be, contain or lie inside the run folder: replacing it
    would delete the run. `--overwrite` replaces only a previous export (its manifest, or the
    MARKER of an export made before manifests), and then only EXPORT_FILES: anything else in
    it is the user's and is kept."""
    real = out_dir.resolve()
    shown = out_dir if real == out_dir.absolute() else Path(f"{out_dir} (-> {real})")
    inputs = Inputs.of(roles={"run folder": run_dir})
    occupied = f"{shown}: already exists and is not an empty folder (choose another, or --overwrite to replace a previous export)"
    try:
        real, state = check_folder(real, "export", EXPORT_FILES, inputs, error=EvalError)
    except EvalError as e:
        if "was not made by" not in str(e):
            raise EvalError(str(e).replace(str(real), str(shown), 1)) from None
        if not overwrite:
            raise EvalError(occupied) from None
        if read_manifest(real) is not None or not _is_export(real / MARKER):
            raise EvalError(
                f"{shown}: is not a previous export (no valid {MARKER}); --overwrite "
                "replaces only an export, choose another folder"
            ) from None
        # an export made before manifests: its files are the ones EXPORT_FILES names
        record(real, sorted(n for n in EXPORT_FILES if (real / n).exists()), made_by="export")
        state = "ours"
    if state == "ours" and not overwrite:
        raise EvalError(occupied)
    return real, state == "ours"


def _is_export(marker: Path) -> bool:
    """Whether `marker` is an export's provenance file (exports before EXPORT_SCHEMA was
    written are known by their run_dir and step)."""
    try:
        obj = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(obj, dict) and (
        obj.get("schema") == EXPORT_SCHEMA or {"run_dir", "step"} <= obj.keys()
    )


def _replace_export(tmp: Path, out: Path) -> None:
    """Move the new export's files from `tmp` into the previous export `out`: first remove
    the previous export's files the new one does not write (a tokenizer.model beside a new
    tokenizer.json would change what transformers loads), then rename each new file over
    its old one, the marker last, so a folder interrupted midway is still an export."""
    new = {p.name for p in tmp.iterdir()}
    for name in EXPORT_FILES - new:
        remove(out, name, EvalError)  # fertility.outputs: only what the manifest lists
    for name in sorted(new - {MARKER}) + [MARKER]:
        replace_inside(tmp / name, out, name, EvalError)  # onto the entry, no link followed
    tmp.rmdir()


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_tokenizer(
    tok, src: Path, out: Path, sep_id: int | None, context: int, probes: list[str]
) -> str:
    """The tokenizer files (fertility.tokenizers.convert); returns the summary's note."""
    return convert.write_hf_tokenizer(tok, src, out, sep_id, context, probes, error=EvalError)


def _heldout_sample(run_dir: Path, limit: int = 200) -> list[str]:
    """Up to `limit` held-out documents of the run: real text to check a conversion on.

    A run without a readable held-out split is still exported, checked on convert.PROBE alone."""

    try:
        return heldout_documents(run_dir, limit)[0]
    except EvalError:
        return []
