"""`pretrain --init-from MODEL_DIR`: continue pretraining a Llama-architecture model whose
tokenizer `fertility extend` has extended.

MODEL_DIR is a Hugging Face folder: ``config.json`` and ``model.safetensors`` (or the shards
``model.safetensors.index.json`` lists), as `fertility export` writes or a released model ships.
Weights are read with safetensors only (never unpickled).

What is checked before anything trains:
- config.json describes a model trainer/model.py computes exactly (LlamaForCausalLM, SiLU, no
  biases, no rope scaling, head_dim = hidden_size / num_attention_heads);
- the tokenizer's base part is the model's vocabulary: when MODEL_DIR holds a tokenizer, every
  id below the model's vocab_size spells the same bytes in both; the new ids start at the
  model's vocab_size; ``ids-map.json`` (written by `fertility extend` beside the tokenizer) was
  made for this very tokenizer (its fingerprint).

The rule for the rows (embedding, and the LM head when it is not tied), `new_rows_init`:
- ids below the model's vocab_size: the base row, unchanged (every mode);
- "mean" (the default; docs/EXTEND.md has the measurement that chose it): a new id gets the
  mean of the base rows of the base ids that spell it (``base_ids`` in ids-map.json: the base
  tokens it replaces in the text it was learned from; byte pieces when the base spelt it with
  bytes); any other id above the base (a separator `pretrain` reserves) the mean of all base
  rows;
- "mean_norm": the same mean, rescaled to the median norm of the base rows whose
  tokens are text of the new token's script (or of all base rows when the base has no token of
  that script, e.g. a byte-level base that spells it with byte pieces). A mean of n pieces that
  point different ways is shorter than they are (~1/sqrt(n) of their norm when unrelated),
  and pieces the base hardly trained (byte pieces of a script it never saw) are not at a
  trained row's norm either; the correction starts the row at a typical trained row's norm,
  as NVIDIA's Nemotron tokenizer-extension guide does;
- "random": the rows the model's own initialisation drew (normal, std init_std), as a model
  trained from scratch starts them.
Every other weight is the base's. So at step 0 a text whose ids are all base ids gets exactly
the base model's logits over the base ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# the one classification of code points by script (fertility.unicode's)
from fertility import unicode as U
from fertility.errors import TrainingError
from fertility.tokenizers import load_tokenizer
from fertility.trainer.model import ModelConfig, Transformer, hf_llama_state_dict

MODES = ("mean", "mean_norm", "random")
RULES = {
    "mean": "base ids: the base rows unchanged; a new id: the mean of the base rows of the "
    "base ids that spell it (ids-map.json base_ids); any other new id: the mean of all base rows",
    "mean_norm": "base ids: the base rows unchanged; a new id: the mean of the base rows of the "
    "base ids that spell it (ids-map.json base_ids; any other new id: of all base rows), "
    "rescaled to the median norm of the base rows of its script's tokens (of all base rows "
    "when the base has none)",
    "random": "base ids: the base rows unchanged; new ids: the model's own random "
    "initialisation (normal, std init_std)",
}


def _config(model_dir: Path) -> dict:
    path = model_dir / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingError(
            f"{path}: --init-from needs a Hugging Face model folder with "
            "config.json and model.safetensors"
        ) from None
    except (OSError, ValueError) as e:
        raise TrainingError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise TrainingError(f"{path}: not a model config object")
    return cfg


def base_vocab_size(model_dir: str | Path) -> int:
    """MODEL_DIR's config.json vocab_size (0 when it gives none)."""
    return int(_config(Path(model_dir)).get("vocab_size") or 0)


def model_config(model_dir: str | Path, vocab_size: int) -> ModelConfig:
    """Our ModelConfig for MODEL_DIR's architecture with `vocab_size` ids."""
    model_dir = Path(model_dir)
    c = _config(model_dir)
    where = model_dir / "config.json"
    if c.get("model_type") != "llama" and "LlamaForCausalLM" not in (c.get("architectures") or []):
        raise TrainingError(
            f"{where}: model_type {c.get('model_type')!r}: --init-from takes "
            "Llama-architecture models (LlamaForCausalLM)"
        )
    unsupported = {
        "hidden_act": c.get("hidden_act", "silu") != "silu",
        "rope_scaling": c.get("rope_scaling") is not None,
        "attention_bias": bool(c.get("attention_bias")),
        "mlp_bias": bool(c.get("mlp_bias")),
    }
    bad = [k for k, v in unsupported.items() if v]
    if bad:
        raise TrainingError(
            f"{where}: {', '.join(f'{k}={c.get(k)!r}' for k in bad)}: the "
            "trainer's Llama has SiLU, no biases and no rope scaling"
        )
    try:
        d, heads = int(c["hidden_size"]), int(c["num_attention_heads"])
        if int(c.get("head_dim") or d // heads) != d // heads:
            raise TrainingError(
                f"{where}: head_dim {c['head_dim']} is not hidden_size / "
                "num_attention_heads, which the trainer's Llama assumes"
            )
        return ModelConfig(
            vocab_size=vocab_size,
            d_model=d,
            n_layers=int(c["num_hidden_layers"]),
            n_heads=heads,
            n_kv_heads=int(c.get("num_key_value_heads") or heads),
            d_ff=int(c["intermediate_size"]),
            max_seq_len=int(c.get("max_position_embeddings", 2048)),
            rope_theta=float(c.get("rope_theta", 10000.0)),
            norm_eps=float(c.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(c.get("tie_word_embeddings", False)),
            init_std=float(c.get("initializer_range", 0.02)),
        )
    except KeyError as e:
        raise TrainingError(f"{where}: no {e.args[0]!r}") from None


def _weights(model_dir: Path) -> dict[str, Any]:
    # deferred: safetensors is the optional train extra
    from safetensors.torch import load_file

    index = model_dir / "model.safetensors.index.json"
    files = [model_dir / "model.safetensors"]
    if not files[0].is_file() and index.is_file():
        names = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()
        files = [model_dir / n for n in sorted(set(names))]
    out: dict[str, Any] = {}
    for f in files:
        if not f.is_file():
            raise TrainingError(f"{f}: missing (--init-from reads safetensors weights only)")
        try:
            out.update(load_file(str(f)))
        except Exception as e:  # safetensors raises its own SafetensorError
            raise TrainingError(f"{f}: not a readable safetensors file ({e})") from None
    return out


def script_of(piece: bytes) -> str | None:
    """The script most of a token's letters are in (ISO 15924); None for a token with no
    letter of any script (punctuation, digits, a byte piece that is not UTF-8 on its own)."""
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text:
        return None
    own = U.analyze_texts([text]).own_script
    # Common, Inherited and Unknown belong to no script
    own = own[(own > U.ZINH) & (own != U.ZZZZ)]
    if not own.size:
        return None
    values, first, counts = np.unique(own, return_index=True, return_counts=True)
    return U.SCRIPTS[int(values[np.lexsort((first, -counts))[0]])]  # ties: the first


def plan(model_dir: str | Path, tok, new_rows: str = "mean") -> dict:
    """Check the tokenizer against MODEL_DIR; the record run.json keeps (see the module
    docstring). `new_rows`: the rule for the new rows (MODES). Raises TrainingError naming
    what does not match."""
    if new_rows not in MODES:
        raise TrainingError(f"new_rows_init must be one of {', '.join(MODES)}, got {new_rows!r}")

    model_dir = Path(model_dir).resolve()
    base_v = base_vocab_size(model_dir)
    n = int(tok.vocab_size)
    if n < base_v:
        raise TrainingError(
            f"{tok.spec}: {n} ids, fewer than the model's vocab_size {base_v}: "
            "not an extension of its tokenizer"
        )
    checked = "vocab_size"
    own = next(
        (model_dir / f for f in ("tokenizer.json", "tokenizer.model") if (model_dir / f).is_file()),
        None,
    )
    if own is not None:
        base = load_tokenizer(str(own))
        for i in range(min(int(base.vocab_size), base_v)):
            if base.token_bytes(i) != tok.token_bytes(i):
                raise TrainingError(
                    f"{tok.spec}: id {i} is {tok.token_bytes(i)!r}, the model's "
                    f"tokenizer {own} has {base.token_bytes(i)!r} there"
                )
        checked = f"token bytes of ids 0..{min(int(base.vocab_size), base_v) - 1} against {own}"
    spell: dict[int, list[int]] = {}
    ids_map = None
    if n > base_v:
        path = Path(tok.path).parent / "ids-map.json" if tok.path is not None else None
        if path is None or not path.is_file():
            raise TrainingError(
                f"{tok.spec}: {n - base_v} ids above the model's vocab_size "
                f"{base_v} and no ids-map.json beside it; extend the model's "
                "tokenizer with `fertility extend`"
            )
        m = json.loads(path.read_text(encoding="utf-8"))
        if m.get("fingerprint") != tok.fingerprint:
            raise TrainingError(
                f"{path}: written for another tokenizer (fingerprint "
                f"{m.get('fingerprint')}, {tok.spec} is {tok.fingerprint})"
            )
        first = int(m["unchanged_ids"][1])
        if first != base_v:
            raise TrainingError(
                f"{path}: new ids start at {first}, the model's vocab_size is "
                f"{base_v}: this tokenizer extends another vocabulary"
            )
        spell = {int(e["id"]): [int(i) for i in e["base_ids"]] for e in m["new"]}
        ids_map = str(path)
    scripts: dict[int, str | None] = {}  # id -> its script, for mean_norm's target norms
    if new_rows == "mean_norm" and n > base_v:
        scripts = {i: script_of(tok.token_bytes(i)) for i in range(n)}
    return {
        "model_dir": str(model_dir),
        "base_vocab_size": base_v,
        "vocab_size": n,
        "new_rows": n - base_v,
        "spelled_rows": len(spell),
        "checked": checked,
        "ids_map": ids_map,
        "new_rows_init": new_rows,
        "rule": RULES[new_rows],
        "_spell": spell,
        "_scripts": scripts,
    }


def load_into(model: Transformer, record: dict) -> None:
    """Copy MODEL_DIR's weights into `model` and initialise its new rows (the module
    docstring's rule for the record's new_rows_init)."""
    # deferred: torch is the optional train extra
    import torch

    weights = _weights(Path(record["model_dir"]))
    base_v, spell = record["base_vocab_size"], record["_spell"]
    mode, scripts = record.get("new_rows_init", "mean"), record.get("_scripts", {})
    ours = hf_llama_state_dict(model)  # views of the model's own tensors, under HF names
    missing = sorted(set(ours) - set(weights))
    if missing:
        raise TrainingError(
            f"{record['model_dir']}: no weight {missing[0]} in its safetensors "
            f"({len(missing)} missing)"
        )
    with torch.no_grad():
        for name, dest in ours.items():
            src = weights[name]
            if name in ("model.embed_tokens.weight", "lm_head.weight"):
                if tuple(src.shape) != (base_v, dest.shape[1]):
                    raise TrainingError(
                        f"{record['model_dir']}: {name} is {tuple(src.shape)}, "
                        f"expected ({base_v}, {dest.shape[1]})"
                    )
                src = src.to(dest.dtype)
                dest[:base_v].copy_(src)
                if mode != "random":  # random: the model's own draw stays in the new rows
                    _new_rows(dest, src.double(), spell, scripts, mode)
                continue
            if tuple(src.shape) != tuple(dest.shape):
                raise TrainingError(
                    f"{record['model_dir']}: {name} is {tuple(src.shape)}, "
                    f"the model built from its config.json has "
                    f"{tuple(dest.shape)}"
                )
            dest.copy_(src.to(dest.dtype))


def _new_rows(dest, src, spell: dict, scripts: dict, mode: str) -> dict[str, float]:
    """Write rows base_v.. of `dest` from the float64 base rows `src` (the module docstring);
    returns the target norm used per script ("*": all base rows) under mean_norm."""
    import torch

    base_v = src.shape[0]
    mean = src.mean(0)
    row_norm = src.norm(dim=1)
    by_script: dict[str | None, list[int]] = {}
    for i in range(base_v):
        by_script.setdefault(scripts.get(i), []).append(i)
    used: dict[str, float] = {}

    def target(script: str | None) -> float:
        key = script if script in by_script and script is not None else "*"
        if key not in used:
            pick = row_norm if key == "*" else row_norm[torch.tensor(by_script[key])]
            used[key] = float(pick.median())
        return used[key]

    for i in range(base_v, dest.shape[0]):
        ids = spell.get(i)
        row = src[ids].mean(0) if ids else mean
        if mode == "mean_norm" and float(row.norm()) > 0:
            row = row * (target(scripts.get(i)) / row.norm())
        dest[i].copy_(row.to(dest.dtype))
    return used


def public(record: dict) -> dict:
    """The record without the spelling table (run.json keeps the path to ids-map.json)."""
    return {k: v for k, v in record.items() if not k.startswith("_")}
