"""`fertility eval` of a continued run against the model it continued: per-language bits per
byte of both on the same held-out documents, and the ratio (docs/EVAL.md, "Against the base
model").

Bits per byte, not per-token loss: the two models cut the text into different tokens (the
extension is the point of the run), so only a per-byte figure compares them. The base is a
Hugging Face folder as `pretrain --init-from` reads it (config.json, safetensors weights, its
tokenizer); it is scored by the trainer's own Llama (trainer/init.py checks the config).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fertility.errors import EvalError, FertilityError
from fertility.eval import nll
from fertility.shards.parts import choose_separator
from fertility.tokenizers import load_tokenizer
from fertility.trainer import init as base_model
from fertility.trainer.model import Transformer

if TYPE_CHECKING:  # eval's `base` object (fertility/schemas/eval.py), for mypy only
    from fertility.schemas.eval import Base, BaseRow


def open_base(model_dir: str | Path, device: Any) -> tuple[Transformer, Any, int | None]:
    """The base model (eval mode), its tokenizer and its document separator."""
    model_dir = Path(model_dir)
    tok_file = next(
        (model_dir / f for f in ("tokenizer.json", "tokenizer.model") if (model_dir / f).is_file()),
        None,
    )
    if tok_file is None:
        raise EvalError(f"{model_dir}: --base needs a model folder with its tokenizer.json")
    try:
        tok = load_tokenizer(str(tok_file))
        base_v = base_model.base_vocab_size(model_dir) or int(tok.vocab_size)
        model = Transformer(base_model.model_config(model_dir, base_v))
        # no rows past the base's vocabulary: load_into copies the weights as they are
        base_model.load_into(
            model,
            {"model_dir": str(model_dir), "base_vocab_size": base_v, "_spell": {}},
        )
    except FertilityError as e:
        raise EvalError(f"--base: {e}") from None
    # the separator the base would have put between documents: its end-of-text token, if any
    sep = choose_separator(dict(tok.special_tokens), "auto", None)
    return model.to(device).eval(), tok, sep


def compare(
    model_dir: str | Path,
    texts: Sequence[str],
    langs: Sequence[str],
    run_rows: Sequence[Mapping[str, Any]],
    *,
    context: int,
    device: Any,
    bootstrap: int,
    seed: int,
    batch_tokens: int | None = None,
) -> Base:
    """Score `texts` with the base; per language (and "all") its bits per byte, the run's
    (`run_rows`: nll.summarize's rows of the run on the same texts) and run / base."""
    model, tok, sep = open_base(model_dir, device)
    ctx = min(context, model.cfg.max_seq_len)
    prep = nll.prepare(texts, tok, ctx, sep)
    scores = nll.score(model, prep, batch_tokens=batch_tokens)
    # the same seed and documents as the run's summary: the same bootstrap weights per
    # document, so the two intervals are drawn from the same resamples
    rows = nll.summarize(prep, langs, {"model": scores}, bootstrap=bootstrap, seed=seed)
    ours = {(r["group"], r["key"]): r for r in run_rows}
    out: list[BaseRow] = []
    for r in rows:
        if r["group"] not in ("all", "language"):
            continue
        mine = ours.get((r["group"], r["key"]))
        if mine is None:
            continue
        b, m = r["bits_per_byte"], mine["bits_per_byte"]
        out.append(
            {
                "key": r["key"],
                "documents": mine["documents"],
                "base_bits_per_byte": b,
                "base_bits_per_byte_ci95": r["bits_per_byte_ci95"],
                "bits_per_byte": m,
                "bits_per_byte_ci95": mine["bits_per_byte_ci95"],
                # run / base: below 1 the run models the language better; for a language the
                # base was trained on, 1.017 is the anchor's +1.7% (docs/EXTEND.md)
                "ratio": m / b if b else None,
                "base_tokens": r["tokens"],
                "tokens": mine["tokens"],
            }
        )
    return {"model_dir": str(Path(model_dir).resolve()), "context": ctx, "rows": out}
