"""Pretraining mixtures set in characters of source text, not in tokens.

A tokenizer that spends 2.8 tokens on a Bangla word and 1 on an English one turns a budget set
in tokens into a budget that buys Bangla far less text. So the mix is given in characters
(code points): `mix = {bn = 0.6, en = 0.4}` is the share of each language's characters in the
training stream; `mix_temperature = T` gives language g the share p_g = n_g**T / sum_h n_h**T
of its n_g training characters (mT5 and XLM-R use T = 0.3); neither keeps the corpus's own
proportions (the plain `Batches` order of trainer/data.py).

How a character share becomes batches. Every window is seq_len+1 tokens of ONE language: the
language's documents are laid end to end (in corpus order, each followed by the separator, so
a window that spans two documents always has the end-of-text id between them) and cut every
seq_len tokens. A window of language g carries about seq_len * c_g characters, c_g being its
characters per token in the training split, so the share of windows is the token share
t_g = (p_g / c_g) / sum_h (p_h / c_h). Windows are dealt to languages by a smooth weighted
round robin: slot n of the run goes to the language furthest below t_g * n, so after any
number of windows each language is within one window of its share. Which window of the
language: epoch e of language g visits its windows in the order
`default_rng([seed, g, e]).permutation(n_windows_g)`, on a grid shifted by the pass's offset
(trainer.data.grid_offsets: 0 in the first pass, then seeded in [0, seq_len)); a language that runs out starts its next
epoch alone (repeating its text, as the plan says it will). The cursor is the count of windows
dealt to each language, so a resumed run deals exactly the same windows, and under torchrun
rank r keeps every world-th window of the global batch, as `Batches` does.

What was consumed. Each target token counts for its document's characters and bytes divided
by the document's tokens (pro rata within a document: shards keep no per-token offsets), so
over a whole pass the counts are the documents' exact totals. `Ledger` keeps them per
language, in the cursor, for metrics.jsonl and run.json.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fertility.corpus.sampling import temperature_shares
from fertility.errors import TrainingError
from fertility.trainer.data import Batches, BatchSource, TokenData, grid_offsets
from fertility.trainer.rundir import read_run_json, write_run_json

if TYPE_CHECKING:  # run.json's `mix` record (fertility/schemas/run.py), for mypy only
    from fertility.schemas.run import Mix

MAX_PASSES = 4  # data-constrained scaling: repeated text stops paying off past about 4 epochs


def parse_mix(text: str, source: str = "--mix") -> dict[str, float]:
    """`bn=0.6,en=0.4` -> {"bn": 0.6, "en": 0.4} (checked by `check_mix`)."""
    mix: dict[str, float] = {}
    for item in (p.strip() for p in text.split(",")):
        lang, eq, value = item.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        if not eq or not lang.strip() or math.isnan(share):
            raise TrainingError(f"{source}: {item!r}: expected LANG=SHARE, e.g. bn=0.6,en=0.4")
        if lang.strip() in mix:
            raise TrainingError(f"{source}: language {lang.strip()!r} given twice")
        mix[lang.strip()] = share
    return check_mix(mix, None, source)


def check_mix(mix: Mapping[str, float], temperature: float | None, source: str) -> dict[str, float]:
    if mix and temperature is not None:
        raise TrainingError(f"{source}: give mix or mix_temperature, not both")
    if temperature is not None and not (0 <= temperature < math.inf):
        raise TrainingError(f"{source}: mix_temperature = {temperature!r}: must be a number >= 0")
    bad = [f"{k}={v}" for k, v in mix.items() if not (0 < v <= 1)]
    if bad:
        raise TrainingError(f"{source}: mix share {bad[0]} must be in (0, 1]")
    if mix and abs(sum(mix.values()) - 1) > 1e-6:
        raise TrainingError(f"{source}: mix shares sum to {sum(mix.values()):g}, not 1")
    return dict(mix)


# -- the plan --------------------------------------------------------------------------------


def plan_mix(
    languages: Sequence[Mapping[str, Any]],  # index.json's ShardLanguage rows
    mix: Mapping[str, float],
    temperature: float | None,
    total_tokens: int,
) -> Mix:
    """The run.json `mix` record (docs/TRAIN.md, "Mixtures") for the training split's
    per-language totals (index.json's `languages`) and the run's length in tokens."""
    names = [lang["lang"] for lang in languages]
    chars = np.array([lang["chars"] for lang in languages], dtype=np.float64)
    tokens = np.array([lang["tokens"] for lang in languages], dtype=np.float64)
    if mix:
        missing = sorted(set(mix) - {n for n, c in zip(names, chars) if c > 0})
        if missing:
            raise TrainingError(
                f"mix: {missing[0]} = {mix[missing[0]]:g} names a language with "
                f"no training text in the corpus (its languages: "
                f"{', '.join(names) or 'none'})"
            )
        rule, shares = "shares", np.array([mix.get(n, 0.0) for n in names])
    elif temperature is not None:
        rule, shares = "temperature", temperature_shares(chars, temperature)
    else:
        rule, shares = "corpus", chars / chars.sum()
    per_token = np.divide(chars, tokens, out=np.zeros_like(chars), where=tokens > 0)
    want = np.divide(shares, per_token, out=np.zeros_like(shares), where=per_token > 0)
    token_share = want / want.sum()
    planned = token_share * total_tokens
    return {
        "rule": rule,
        "temperature": temperature,
        "total_tokens": int(total_tokens),
        "languages": {
            n: {
                "char_share": float(shares[i]),
                "token_share": float(token_share[i]),
                "chars_per_token": float(per_token[i]),
                "available_chars": int(chars[i]),
                "available_tokens": int(tokens[i]),
                "planned_tokens": int(round(planned[i])),
                "passes": float(planned[i] / tokens[i]) if tokens[i] else 0.0,
            }
            for i, n in enumerate(names)
        },
        "consumed": None,
    }


def plan_warnings(plan: Mix) -> list[str]:
    out = [
        f"mix: {lang}'s training text will be repeated {p['passes']:.1f} times; returns "
        f"fall off past about {MAX_PASSES} passes (add {lang} text or lower its share)"
        for lang, p in plan["languages"].items()
        if p["passes"] > MAX_PASSES
    ]
    unused = [lang for lang, p in plan["languages"].items() if p["char_share"] == 0]
    if unused:
        out.append(f"mix: {', '.join(unused)} in the corpus but not in the mix: not trained on")
    return out


def format_plan(plan: Mix) -> str:
    rule = {
        "shares": "--mix",
        "temperature": f"temperature {plan['temperature']}",
        "corpus": "the corpus's own proportions",
    }[plan["rule"]]
    lines = [
        f"training mix ({rule}; shares of characters of source text):",
        f"  {'lang':<8}{'chars':>8}{'tokens':>8}{'chars/tok':>11}{'tokens to see':>16}"
        f"{'passes':>8}",
    ]
    for lang, p in plan["languages"].items():
        lines.append(
            f"  {lang:<8}{p['char_share']:>8.1%}{p['token_share']:>8.1%}"
            f"{p['chars_per_token']:>11.2f}{p['planned_tokens']:>16,}"
            f"{p['passes']:>8.2f}"
        )
    return "\n".join(lines)


def record_consumed(run_json: Path, consumed: dict[str, Any]) -> None:
    """Write what the run consumed per language into run.json's `mix` record."""
    record = read_run_json(run_json)
    if record.get("mix") is not None:
        record["mix"]["consumed"] = consumed
        write_run_json(run_json, record, TrainingError)


# -- counting what was consumed ----------------------------------------------------------------


class Ledger:
    """Characters, bytes and tokens consumed per language, from the document table."""

    def __init__(self, data: TokenData) -> None:
        docs = np.asarray(data.docs)
        self.languages = [lang["lang"] for lang in data.languages]
        self.base = np.concatenate([[0], np.cumsum([len(t) for t in data.tokens])])
        self.starts = self.base[docs[:, 0]] + docs[:, 1]  # global token offsets, increasing
        self.lang = docs[:, 3].copy()
        n_tok = np.maximum(docs[:, 2], 1).astype(np.float64)
        self.weights = np.stack([docs[:, 4] / n_tok, docs[:, 5] / n_tok])  # chars, bytes per tok
        self.totals = np.zeros((3, len(self.languages)))  # chars, bytes, tokens

    def doc_at(self, shard: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """The document holding each (shard, token offset)."""
        return np.searchsorted(self.starts, self.base[shard] + offset, side="right") - 1

    def add(self, docs: np.ndarray) -> None:
        """Count one consumed token per entry of `docs` (document ids)."""
        d = np.asarray(docs).ravel()
        n = len(self.languages)
        for row in range(2):
            self.totals[row] += np.bincount(self.lang[d], self.weights[row][d], minlength=n)
        self.totals[2] += np.bincount(self.lang[d], minlength=n)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {
            lang: {"chars": int(round(c)), "bytes": int(round(b)), "tokens": int(t)}
            for lang, c, b, t in zip(self.languages, *self.totals)
        }

    def state(self) -> list[list[float]]:
        return self.totals.tolist()

    def load(self, state: list[list[float]] | None) -> None:
        if state is not None:
            self.totals = np.array(state, dtype=np.float64).reshape(3, len(self.languages))


class CountedBatches(BatchSource):
    """The corpus-order `Batches` (no mix), counting what each global batch consumed; its
    cursor is the batches' own."""

    def __init__(self, batches: Batches, ledger: Ledger | None) -> None:
        self.batches, self.ledger = batches, ledger
        self.data, self.seed = batches.data, batches.seed
        self.n_windows, self.seq_len = batches.n_windows, batches.seq_len

    @property
    def epoch(self) -> int:  # type: ignore[override]
        return self.batches.epoch

    @property
    def position(self) -> int:  # type: ignore[override]
        return self.batches.position

    def next(self, advance: bool = True) -> tuple[Any, Any]:
        out = self.batches.next(advance)
        if advance and self.ledger is not None:
            shard, offset = self.batches.window_starts(self.batches.last_batch)
            targets = offset[:, None] + np.arange(1, self.batches.seq_len + 1)
            self.ledger.add(self.ledger.doc_at(shard[:, None], targets))
        return out

    def consumed(self) -> dict[str, dict[str, int]]:
        return self.ledger.as_dict() if self.ledger is not None else {}

    def state_dict(self) -> dict[str, Any]:
        state = self.batches.state_dict()
        return {**state, "consumed": self.ledger.state()} if self.ledger is not None else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)
        if self.ledger is not None:
            self.ledger.load(state.get("consumed"))


# -- sampling by language ----------------------------------------------------------------------


class MixBatches(BatchSource):
    """Windows of one language each, dealt in token shares (module docstring); resumable."""

    def __init__(
        self,
        data: TokenData,
        token_share: np.ndarray,
        seq_len: int,
        micro_batch: int,
        *,
        seed: int,
        rank: int = 0,
        world: int = 1,
        separator: int | None = None,
    ) -> None:
        if separator is None:
            raise TrainingError(
                f"{data.paths[0].parent}: a mix needs a separator between "
                'documents (separator = "none" would join them silently)'
            )
        self.data, self.seq_len, self.micro_batch = data, seq_len, micro_batch
        self.seed, self.rank, self.world = seed, rank, world
        self.share = np.asarray(token_share, dtype=np.float64)
        self.ledger = Ledger(data)
        docs = np.asarray(data.docs)
        self.doc_ids: dict[int, np.ndarray] = {}
        self.vstarts: dict[int, np.ndarray] = {}  # each language's documents end to end
        self.lang_windows = np.zeros(len(self.share), dtype=np.int64)
        for g in np.flatnonzero(self.share > 0).tolist():  # int keys, as the dicts declare
            ids = np.flatnonzero(docs[:, 3] == g)
            self.doc_ids[g] = ids
            self.vstarts[g] = np.concatenate([[0], np.cumsum(docs[ids, 2])])
            self.lang_windows[g] = max(0, (int(self.vstarts[g][-1]) - 1) // seq_len)
            if self.lang_windows[g] == 0:
                name = data.languages[g]["lang"]
                raise TrainingError(
                    f"{data.paths[0].parent}: language {name} has "
                    f"{int(self.vstarts[g][-1])} training tokens, fewer than "
                    f"one window of {seq_len + 1}"
                )
        self.n_windows = int(self.lang_windows.sum())
        self.counts = np.zeros(len(self.share), dtype=np.int64)  # windows dealt per language
        self._perms: dict[tuple[int, int], np.ndarray] = {}

    # The cursor in Batches' terms (the loop's rollback message counts windows with them).
    @property
    def epoch(self) -> int:  # type: ignore[override]
        return int(self.counts.sum()) // self.n_windows

    @property
    def position(self) -> int:  # type: ignore[override]
        return int(self.counts.sum()) % self.n_windows

    def _permutation(self, g: int, epoch: int) -> np.ndarray:
        key = (g, epoch)
        if key not in self._perms:
            if len(self._perms) > 2 * len(self.doc_ids):
                self._perms.clear()
            rng = np.random.default_rng([self.seed, g, epoch])
            self._perms[key] = rng.permutation(int(self.lang_windows[g]))
        return self._perms[key]

    def _deal(self, need: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(language, window start in the language's stream) of each slot of the next
        global batch, and the counts after."""
        counts = self.counts.copy()
        langs = np.empty(need, dtype=np.int64)
        starts = np.empty(need, dtype=np.int64)
        n_langs, T = len(self.share), self.seq_len
        for i in range(need):
            g = int(np.argmax(self.share * (counts.sum() + 1) - counts))
            epoch, pos = divmod(int(counts[g]), int(self.lang_windows[g]))
            # this pass's grid of windows (trainer.data.grid_offsets), kept inside the stream
            start = self._permutation(g, epoch)[pos] * T
            start += grid_offsets(self.seed, epoch, n_langs, T)[g]
            langs[i], starts[i] = g, min(start, int(self.vstarts[g][-1]) - T - 1)
            counts[g] += 1
        return langs, starts, counts

    def _locate(self, langs: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(document, token offset in its shard) of every token of each window."""
        docs = np.asarray(self.data.docs)
        doc = np.empty((len(langs), self.seq_len + 1), dtype=np.int64)
        offset = np.empty_like(doc)
        for g in np.unique(langs).tolist():
            rows = langs == g
            v = starts[rows, None] + np.arange(self.seq_len + 1)
            local = np.searchsorted(self.vstarts[g], v, side="right") - 1
            doc[rows] = self.doc_ids[g][local]
            offset[rows] = docs[doc[rows], 1] + (v - self.vstarts[g][local])
        return doc, offset

    def next(self, advance: bool = True) -> tuple[Any, Any]:
        """(inputs, targets) as int64 torch tensors of shape (micro_batch, seq_len)."""
        # deferred: torch is the optional train extra
        import torch

        langs, starts, counts = self._deal(self.micro_batch * self.world)
        doc, offset = self._locate(langs, starts)
        if advance:
            self.counts = counts
            self.ledger.add(doc[:, 1:])
        doc, offset = doc[self.rank :: self.world], offset[self.rank :: self.world]
        shard = np.asarray(self.data.docs)[doc, 0]
        out = np.empty(doc.shape, dtype=np.int64)
        for s in np.unique(shard):
            where = shard == s
            out[where] = self.data.tokens[s][offset[where]]
        w = torch.from_numpy(out)
        return w[:, :-1], w[:, 1:]

    def consumed(self) -> dict[str, dict[str, int]]:
        return self.ledger.as_dict()

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "mix": self.share.tolist(),
            "counts": self.counts.tolist(),
            "consumed": self.ledger.state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        if "counts" not in state or not np.allclose(state.get("mix", []), self.share):
            raise TrainingError(
                "checkpoint data cursor was made with another mix than the "
                "run's; resume with the run's own configuration"
            )
        self.counts = np.array(state["counts"], dtype=np.int64)
        self.ledger.load(state.get("consumed"))


def make_batches(data: TokenData, cfg: Any, *, rank: int = 0, world: int = 1) -> BatchSource:
    """The run's batch source: by language when cfg sets a mix, else in corpus order."""
    if not cfg.mix and cfg.mix_temperature is None:
        batches = Batches(data, cfg.seq_len, cfg.micro_batch, seed=cfg.seed, rank=rank, world=world)
        return CountedBatches(batches, Ledger(data) if data.docs is not None else None)
    if data.docs is None:
        raise TrainingError(
            f"{data.paths[0].parent}: these shards have no document table "
            "(built by an older version); a mix needs one: use a new --out"
        )
    plan = plan_mix(data.languages, cfg.mix, cfg.mix_temperature, total_tokens=1)
    share = np.array([p["token_share"] for p in plan["languages"].values()])
    return MixBatches(
        data,
        share,
        cfg.seq_len,
        cfg.micro_batch,
        seed=cfg.seed,
        rank=rank,
        world=world,
        separator=data.separator,
    )


def plan_for_run(
    index: Mapping[str, Any], cfg: Any, total_tokens: int, say: Any, warn: Any
) -> Mix | None:
    """The run's plan from its shard index: `say` gets the table, `warn` each warning.
    None for shards built before per-language totals existed (refused with a mix)."""
    if "languages" not in index:
        if cfg.mix or cfg.mix_temperature is not None:
            raise TrainingError(
                "mix: these shards have no per-language document table (built "
                "by an older version); use a new --out"
            )
        return None
    plan = plan_mix(index["languages"], cfg.mix, cfg.mix_temperature, total_tokens)
    say(format_plan(plan))
    for message in plan_warnings(plan):
        warn(message)
    return plan


def mix_summary(plan: dict[str, Any]) -> str:
    """One line for `fertility eval`: each language's share of characters and tokens, and what
    the run consumed (up to its last checkpoint, for a run that did not finish)."""
    consumed = plan.get("consumed") or {}
    total = sum(c["chars"] for c in consumed.values()) or 1
    parts = []
    for lang, p in plan["languages"].items():
        if p["char_share"] == 0 and not consumed.get(lang, {}).get("tokens"):
            continue
        got = f", consumed {consumed[lang]['chars'] / total:.1%}" if lang in consumed else ""
        parts.append(f"{lang} {p['char_share']:.1%} (tokens {p['token_share']:.1%}{got})")
    return f"training mix ({plan['rule']}; share of characters): " + ", ".join(parts)
