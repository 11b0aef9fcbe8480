"""Held-out language modelling: per-token NLL, and the tokenizer-independent bits per byte
and bits per character, per language and per script, with 95% intervals over documents.

The pipeline is three plain functions:

    prepare(texts, tokenizer, context, prefix_id) -> Prepared   tokens, windows, attribution
    score(model, prepared)                        -> nll        nats per scored token
    summarize(prepared, langs, {"model": nll, "twin": nll2}) -> rows with intervals

What is scored (docs/EVAL.md says the same for users)
    A document's token sequence S is its ids, preceded by the run's document separator when the
    run has one (the trainer put that id between documents, so "separator, then a document"
    is exactly what the model saw in training). Every token of S after the first is scored: with
    a separator that is every token of the document; without one the document's first token
    has no context and is not scored, and its characters and bytes leave the denominators.
    A sequence longer than the context C is cut into windows of C predictions: window k feeds
    S[kC : kC+C] and scores S[kC+1 : kC+C+1], and the last window, which has fewer than C
    tokens left to score, is the full window that ends at the document's end (it feeds the C
    tokens before the last and scores only the tokens not yet scored). Every scored token is
    scored exactly once; these are lm-evaluation-harness's rolling windows (context_len 1).

Attribution of text to tokens
    Token i owns the characters from the end of everything the tokens before it covered up to
    the end of its own span (cumulative maximum of the token end offsets); the last token also
    owns any trailing characters no token covers. Those spans partition the document, so summed
    per-token bytes equal the bytes of the scored text exactly, whatever the tokenizer does with
    whitespace or partial-character (byte) tokens. A token's script is the script
    `fertility.unicode` attributes to its first character (as in docs/METRICS.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fertility import unicode as U
from fertility.stats import percentile_interval, poisson1

if TYPE_CHECKING:
    from fertility.trainer.model import Transformer

LN2 = math.log(2.0)
# Elements of one float32 logits tensor per forward pass (B * T * V); bounds memory at ~1 GiB
# for the logits and their log-softmax together.
LOGIT_BUDGET = 1 << 27


# -- the model side ----------------------------------------------------------------------


@torch.inference_mode()
def token_logprobs(
    model: Transformer,
    sequences: Sequence[np.ndarray],
    *,
    batch_tokens: int | None = None,
    device: str | torch.device | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[np.ndarray]:
    """log p(seq[t] | seq[:t]) for t = 1 .. len-1 of every sequence, float64, in order.

    Sequences are at most the model's max_seq_len + 1 long. They are sorted by length and
    right-padded into batches: attention is causal, so padding after a position never changes
    its logits.
    """
    if device is None:
        device = next(model.parameters()).device
    vocab = model.cfg.vocab_size
    if batch_tokens is None:
        batch_tokens = max(1, LOGIT_BUDGET // vocab)
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    out: list[np.ndarray] = [np.zeros(max(0, n - 1)) for n in lengths]
    order = np.argsort(-lengths, kind="stable")
    order = order[lengths[order] >= 2]
    i = 0
    while i < len(order):
        T = int(lengths[order[i]]) - 1  # the longest in the batch sets its width
        rows = max(1, batch_tokens // T)
        chosen = order[i : i + rows]
        batch = np.zeros((len(chosen), T + 1), dtype=np.int64)
        for r, j in enumerate(chosen):
            batch[r, : lengths[j]] = sequences[j]
        ids = torch.from_numpy(batch).to(device)
        logits = model(ids[:, :-1]).float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
        logp_np = logp.double().cpu().numpy()
        for r, j in enumerate(chosen):
            out[j] = logp_np[r, : lengths[j] - 1]
        i += len(chosen)
        if on_batch is not None:
            on_batch(len(chosen))
    return out


def fresh_twin(model: Transformer, seed: int = 0) -> Transformer:
    """Same class and config, freshly initialised weights (seeded), on the same device.

    The global RNG is left as it was, so evaluating never changes what a caller draws next.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        twin = type(model)(model.cfg)
    device = next(model.parameters()).device
    return twin.to(device).eval()


# -- the text side -----------------------------------------------------------------------


@dataclass
class Prepared:
    """Everything about the held-out text that does not depend on the weights."""

    context: int
    windows: list[np.ndarray]  # token sequences fed to the model, <= context + 1 long
    skips: list[int]  # leading predictions of each window already scored before
    doc: np.ndarray  # int64 document index of each scored token (flat, in order)
    script: np.ndarray  # uint8 index into fertility.unicode.SCRIPTS
    nbytes: np.ndarray  # int64 UTF-8 bytes owned by each scored token
    nchars: np.ndarray  # int64 code points owned by each scored token
    n_docs: int  # documents given (including those with nothing to score)
    windowed_docs: int  # documents scored in two or more windows
    unscored_docs: int  # documents with no scored token (empty, or one token, no prefix)

    @property
    def n_tokens(self) -> int:
        return len(self.doc)


def token_spans(
    starts: np.ndarray, ends: np.ndarray, n_chars: int
) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) character spans owned by each token; they partition [0, n_chars)."""
    if len(ends) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    hi = np.maximum.accumulate(np.asarray(ends, dtype=np.int64))
    hi[-1] = n_chars
    lo = np.concatenate(([0], hi[:-1]))
    return lo, hi


def prepare(
    texts: Sequence[str],
    tokenizer,
    context: int,
    prefix_id: int | None = None,
    batch_docs: int = 256,
) -> Prepared:
    """Tokenize, attribute and window `texts` (see the module docstring for the rules)."""
    if context < 1:
        raise ValueError("context must be at least 1 token")
    windows: list[np.ndarray] = []
    skips: list[int] = []
    parts: dict[str, list[np.ndarray]] = {"doc": [], "script": [], "nbytes": [], "nchars": []}
    windowed = unscored = 0
    prefix = np.array([] if prefix_id is None else [prefix_id], dtype=np.int64)
    skip = 0 if prefix_id is not None else 1  # ids not scored at the start of a document
    for b0 in range(0, len(texts), batch_docs):
        chunk = list(texts[b0 : b0 + batch_docs])
        encs = tokenizer.encode_batch(chunk)
        tb = U.analyze_texts(chunk)
        cum_bytes = np.concatenate(([0], np.cumsum(tb.nbytes)))
        for k, (text, enc) in enumerate(zip(chunk, encs)):
            d = b0 + k
            off = int(tb.doc_offsets[k])
            n_chars = len(text)
            ids = np.asarray(enc.ids, dtype=np.int64)
            if len(ids) <= skip:
                unscored += 1
                continue
            lo, hi = token_spans(np.asarray(enc.starts), np.asarray(enc.ends), n_chars)
            first = np.clip(np.asarray(enc.starts, dtype=np.int64), 0, max(n_chars - 1, 0))
            sel = slice(skip, None)
            parts["doc"].append(np.full(len(ids) - skip, d, np.int64))
            parts["script"].append(
                tb.script[off + first[sel]]
                if n_chars
                else np.full(len(ids) - skip, U.ZYYY, np.uint8)
            )
            parts["nbytes"].append(cum_bytes[off + hi[sel]] - cum_bytes[off + lo[sel]])
            parts["nchars"].append(hi[sel] - lo[sel])
            seq = np.concatenate((prefix, ids))
            n = len(seq) - 1  # predictions
            n_win = -(-n // context)
            windowed += n_win > 1
            windows.extend(seq[w * context : w * context + context + 1] for w in range(n_win - 1))
            last = max(0, n - context)  # the last window ends at the document's end
            windows.append(seq[last:])
            skips.extend([0] * (n_win - 1) + [(n_win - 1) * context - last])
    cat = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in parts.items()}
    return Prepared(
        context=context,
        windows=windows,
        skips=skips,
        doc=cat["doc"],
        script=cat["script"].astype(np.uint8),
        nbytes=cat["nbytes"],
        nchars=cat["nchars"],
        n_docs=len(texts),
        windowed_docs=int(windowed),
        unscored_docs=int(unscored),
    )


def score(
    model: Transformer,
    prepared: Prepared,
    *,
    batch_tokens: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """NLL in nats of every scored token of `prepared`, aligned with prepared.doc."""
    if prepared.context > model.cfg.max_seq_len:
        raise ValueError(
            f"context {prepared.context} exceeds the model's max_seq_len {model.cfg.max_seq_len}"
        )
    logps = token_logprobs(model, prepared.windows, batch_tokens=batch_tokens, on_batch=on_batch)
    scored = [lp[k:] for lp, k in zip(logps, prepared.skips)]
    nll = -np.concatenate(scored) if scored else np.zeros(0)
    assert len(nll) == prepared.n_tokens  # windows are in document order, disjoint
    return nll


# -- summaries -----------------------------------------------------------------------------


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.asarray(num, float), np.asarray(den, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _interval(stats: np.ndarray) -> list[float] | None:
    ci = percentile_interval(stats)
    return None if ci is None else list(ci)


def summarize(
    prepared: Prepared,
    langs: Sequence[str],
    nll: Mapping[str, np.ndarray],
    *,
    bootstrap: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """Rows for "all", each language and each script: sums, ratios and 95% intervals.

    `nll` maps a model name to its per-token NLL ("model" is required; "twin" adds the twin
    columns and the paired difference). Intervals come from one Poisson bootstrap over
    documents shared by every row and both models, so the twin-minus-model interval is paired.
    A row of fewer than 2 documents, or fewer than 10 replicates, gets no interval (None).
    """
    names = list(nll)
    n_docs = prepared.n_docs
    lang_names, lang_of_doc = np.unique(np.asarray(langs, dtype=str), return_inverse=True)
    present = np.unique(prepared.script)
    groups: list[tuple[str, str, np.ndarray]] = [("all", "all", np.ones(prepared.n_tokens, bool))]
    tok_lang = lang_of_doc[prepared.doc]
    for i, name in enumerate(lang_names):
        groups.append(("language", str(name), tok_lang == i))
    for s in present:
        groups.append(("script", U.SCRIPTS[s], prepared.script == s))
    quantities = ["tokens", "bytes", "chars"] + [f"nll:{m}" for m in names]
    per_token = {
        "tokens": np.ones(prepared.n_tokens),
        "bytes": prepared.nbytes,
        "chars": prepared.nchars,
        **{f"nll:{m}": nll[m] for m in names},
    }
    # V[d, g, q]: the sum of quantity q over the tokens of document d in group g.
    V = np.zeros((n_docs, len(groups), len(quantities)))
    for g, (_, _, mask) in enumerate(groups):
        for q, name in enumerate(quantities):
            V[:, g, q] = np.bincount(
                prepared.doc[mask], weights=per_token[name][mask], minlength=n_docs
            )
    totals = V.sum(axis=0)
    rng = np.random.default_rng(seed)
    boot = np.zeros((len(groups), len(quantities), bootstrap))
    flat = V.reshape(n_docs, -1)
    step = max(1, 4_000_000 // max(bootstrap, 1))
    for d0 in range(0, n_docs, step):
        W = poisson1(rng, (min(step, n_docs - d0), bootstrap))
        boot += (flat[d0 : d0 + step].T @ W).reshape(len(groups), len(quantities), bootstrap)

    Q = {name: q for q, name in enumerate(quantities)}
    rows = []
    for g, (group, key, _) in enumerate(groups):
        docs = int((V[:, g, Q["tokens"]] > 0).sum())
        if docs == 0:
            continue
        t, b = totals[g], boot[g]

        def stat(num_q: str, den_q: str, scale: float = 1.0) -> tuple[float, list | None]:
            point = float(_ratio(t[Q[num_q]], t[Q[den_q]])) * scale
            ci = _interval(_ratio(b[Q[num_q]], b[Q[den_q]]) * scale) if docs >= 2 else None
            return point, ci

        row: dict[str, Any] = {
            "group": group,
            "key": key,
            "documents": docs,
            "tokens": int(t[Q["tokens"]]),
            "bytes": int(t[Q["bytes"]]),
            "chars": int(t[Q["chars"]]),
        }
        for m in names:
            pre = "" if m == "model" else f"{m}_"
            row[f"{pre}nll_per_token"], row[f"{pre}nll_per_token_ci95"] = stat(f"nll:{m}", "tokens")
            row[f"{pre}bits_per_byte"], row[f"{pre}bits_per_byte_ci95"] = stat(
                f"nll:{m}", "bytes", 1 / LN2
            )
            row[f"{pre}bits_per_char"], row[f"{pre}bits_per_char_ci95"] = stat(
                f"nll:{m}", "chars", 1 / LN2
            )
        row["perplexity"] = math.exp(row["nll_per_token"])
        ci = row["nll_per_token_ci95"]
        row["perplexity_ci95"] = [math.exp(ci[0]), math.exp(ci[1])] if ci else None
        if "twin" in names:
            # the gap as the other figures are given: per token in nats, per byte in bits
            # (the same summed difference over the row's bytes, so the same paired resamples)
            diff, bdiff = t[Q["nll:twin"]] - t[Q["nll:model"]], b[Q["nll:twin"]] - b[Q["nll:model"]]
            for suffix, den, scale in (("", "tokens", 1.0), ("_bits_per_byte", "bytes", 1 / LN2)):
                name = f"twin_minus_model{suffix}"
                row[name] = float(_ratio(diff, t[Q[den]])) * scale
                ci = _interval(_ratio(bdiff, b[Q[den]]) * scale) if docs >= 2 else None
                row[f"{name}_ci95"] = ci
        rows.append(row)
    return rows
