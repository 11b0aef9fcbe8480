"""`--precision REL`: measure random blocks of the corpus until every interval is narrow enough.

The corpus is read in a seeded random order of blocks (fertility.corpus.precision: 16 KB of
text or jsonl lines, a parquet row group, a compressed file whole), each block its own
batches. After each block the pass stops when, for every tokenizer, every language and every
judged script (a "running" row holding at least MIN_SHARE of the characters, the default
policy's min_share, or of a language's with MIN_CHARS characters in MIN_DOCUMENTS
documents: fertility.findings.not_judged) has a chars/token 95% interval of relative
half-width <= REL, with at least MIN_CLUSTERS blocks and MIN_DOCUMENTS documents holding it;
a language all of whose blocks were measured is exhausted and its documents give its
interval (no block minimum); a language named by a file or folder that no block read yet is
not reached.

The interval. Documents of one block are neighbours (one page, one crawl, one topic), so the
sample is a cluster sample: the interval of the report is the ratio's delta-method interval
over blocks, not documents (Bootstrap.interval's formula with each block's characters and
tokens as one observation). It is wider than the per-document one when neighbours agree,
which is what makes it cover. At the end these block sums replace the per-document ones in
the accumulators, so the frame's interval columns (and the gate) use them. Sampling blocks
at random in proportion keeps the "all" and script rows unbiased; the rarest language sets
the length of the pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fertility import unicode as U
from fertility.corpus import Corpus
from fertility.corpus.precision import BLOCK_BYTES, BlockOrder
from fertility.errors import CorpusError
from fertility.measure.counters import NS, Bootstrap, C, TokenizerAccumulator, grow_rows
from fertility.measure.passes import run_pass

MIN_CLUSTERS = 30  # blocks holding a group before its interval is trusted (delta method)
MIN_DOCUMENTS = 10  # the default policy's min_documents
MIN_SHARE = 0.01  # the default policy's min_share: a running script under it is not judged
MIN_CHARS = 1000  # the default policy's min_chars


def _language_shares(acc) -> np.ndarray:
    """Per script index: the largest share of a language's characters that is the script's
    running text (GroupCounts.running_lang over the language rows' characters)."""
    rl = acc.counts.running_lang
    n = min(len(rl), len(acc.counts.lang))
    if n == 0:
        return np.zeros(rl.shape[1] if rl.ndim == 2 else NS)
    chars = acc.counts.lang[:n, C["chars"]].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(chars[:, None] > 0, rl[:n] / np.maximum(chars[:, None], 1), 0.0)
    return share.max(axis=0)


def _enough(exhausted: bool, blocks: int) -> bool:
    """Whether a group's interval may be trusted for its number of blocks: MIN_CLUSTERS of
    them, or all of its text read (its documents give the interval)."""
    return exhausted or blocks >= MIN_CLUSTERS


def _cluster_rows(dc: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """Bootstrap's six sums for one block per row: (present, C, T, C^2, CT, T^2)."""
    return np.stack([(dc > 0).astype(np.int64), dc, dt, dc * dc, dc * dt, dt * dt], axis=-1)


class Stopper:
    """run_pass's `until`: adds each block to the cluster sums, says when to stop."""

    def __init__(self, order: BlockOrder, accs: list, state, rel: float):
        self.order, self.accs, self.state, self.rel = order, accs, state, rel
        self.read_seconds = 0.0  # run_pass counts the reading thread's time here
        empty = [np.zeros((0, 2), np.int64), np.zeros((NS, 2), np.int64)]
        # per tokenizer, (C, T) of the language, script and running tables: at the start of
        # the block being measured, and after the last batch
        self.start = [[empty[0], empty[1], empty[1]] for _ in accs]
        self.last = [[empty[0], empty[1], empty[1]] for _ in accs]
        # per tokenizer, Bootstrap's six sums over blocks: language, script, running rows
        self.sums = [[np.zeros((0, 6), np.int64), np.zeros((NS, 6), np.int64)] for _ in accs]
        for s in self.sums:
            s.append(s[1].copy())
        self.index = -1
        self.groups: dict[tuple[str, str], dict] = {}  # the last check: (kind, key) -> its state
        self.whole = False  # the pass read every block (set once it has ended)

    def __call__(self, index: int, bytes_measured: int) -> bool:
        """After batch `index`: a block ended with the batch before when this one is another
        block's (a block can span batches: a cluster is the block, not the batch)."""
        units = self.order.batch_unit
        ended = index > 0 and units[index] != units[index - 1]
        if ended:
            self._flush()
        self.index = index
        for k, acc in enumerate(self.accs):
            tables = (acc.boot.lang, acc.boot.script, acc.boot_running.script)
            self.last[k] = [t[:, 1:3].copy() for t in tables]
        return ended and not self._too_few_blocks() and self.check()

    def _too_few_blocks(self) -> bool:
        """Whether a language not read whole still holds under MIN_CLUSTERS blocks: then
        check() cannot pass, and its per-group intervals (most of a pass's checking time
        while the early blocks come in) are not worked out. Block counts are the same for
        every tokenizer (a block holds a language when it holds its characters)."""
        if not self.accs:
            return False
        names = dict(self.state.langs)
        lang_sums = self.sums[0][0]
        for lang in set(names) | set(self.order.last_unit):
            if self._exhausted(lang):
                continue
            i = names.get(lang)
            if i is None or i >= len(lang_sums) or not _enough(False, int(lang_sums[i][0])):
                return True
        return False

    def _flush(self) -> None:
        """Add the block measured since `start` (up to `last`) as one cluster."""
        for k in range(len(self.accs)):
            for j in range(3):
                last = self.last[k][j]
                start = grow_rows(self.start[k][j], last.shape[0])
                rows = _cluster_rows(*(last - start).T)
                self.sums[k][j] = grow_rows(self.sums[k][j], last.shape[0]) + rows
                self.start[k][j] = last

    def _exhausted(self, lang: str) -> bool:
        if self.whole:
            return True
        last = self.order.last_unit.get(lang)
        units = self.order.batch_unit
        return last is not None and self.index >= 0 and units[self.index] > last

    def check(self) -> bool:
        """Update `groups`; whether every group has reached the target."""
        groups: dict[tuple[str, str], dict] = {}
        self.groups = groups
        names = dict(self.state.langs)
        for k, acc in enumerate(self.accs):
            for lang in set(names) | set(self.order.last_unit):
                i = names.get(lang)
                sums = self.sums[k][0][i] if i is not None and i < len(self.sums[k][0]) else None
                docs = int(acc.counts.lang[i, C["documents"]]) if sums is not None else 0
                chars = int(acc.counts.lang[i, C["chars"]]) if sums is not None else 0
                exhausted = self._exhausted(lang)
                blocks = int(sums[0]) if sums is not None else 0
                if exhausted and sums is not None and i is not None and i < len(acc.boot.lang):
                    # every block of the language was read: no cluster sample is left to
                    # draw, so its documents give the interval (no 30-block minimum)
                    sums = acc.boot.lang[i]
                self._judge(groups, ("language", lang), sums, docs, chars, exhausted, blocks)
            total = acc.counts.script[:, C["chars"]].sum()
            own = _language_shares(acc)
            for s in np.flatnonzero(acc.counts.running[:, C["chars"]]):
                chars = int(acc.counts.running[s, C["chars"]])
                docs = int(acc.counts.running[s, C["documents"]])
                # judged as the default policy judges it (fertility.findings.not_judged): by
                # its share of the corpus, or of a language when large enough on its own
                big = chars >= MIN_CHARS and docs >= MIN_DOCUMENTS and own[s] >= MIN_SHARE
                if chars < MIN_SHARE * total and not big:
                    continue
                sums = self.sums[k][2][s]
                blocks = int(sums[0])
                if self.whole:  # the whole corpus read: the documents' interval
                    sums = acc.boot_running.script[s]
                key = ("script", U.SCRIPTS[s])
                self._judge(groups, key, sums, docs, chars, self.whole, blocks)
        return all(g["reached"] or g["exhausted"] for g in groups.values())

    def _judge(self, groups, key, sums, docs, chars, exhausted, blocks) -> None:
        """`sums`: the group's block sums, or its documents' when `exhausted` (read whole):
        then the interval is over documents, which need no block minimum. `blocks`: the
        blocks holding it."""
        width = float("nan")
        if sums is not None:
            lo, hi = Bootstrap.interval(sums)
            if sums[2] > 0 and lo == lo:  # not NaN
                width = float((hi - lo) / 2 / (int(sums[1]) / int(sums[2])))
        enough = _enough(exhausted, blocks)
        reached = bool(enough and docs >= MIN_DOCUMENTS and width <= self.rel)
        why = self._why(blocks, docs, width, enough)
        g = groups.get(key)
        if g is None:  # the first tokenizer
            groups[key] = {
                "documents": docs,
                "chars": chars,
                "blocks": blocks,
                "half_width": width,
                "interval": "documents" if exhausted else "blocks",
                "reached": reached,
                "exhausted": exhausted,
                "why": None if reached else why,
            }
        else:  # the widest over tokenizers; reached by all of them
            g["half_width"] = max(g["half_width"], width) if width == width else float("nan")
            g["why"] = g["why"] or (None if reached else why)
            g["reached"] = g["reached"] and reached

    def _why(self, clusters: int, docs: int, width: float, enough: bool) -> str:
        """Why a group has not reached the target, in words (the statement's)."""
        if not enough:
            blocks = f"{clusters} block" + ("" if clusters == 1 else "s")
            return f"{blocks}, an interval over blocks needs {MIN_CLUSTERS}"
        if docs < MIN_DOCUMENTS:
            return f"{docs} documents, under {MIN_DOCUMENTS}"
        if width != width:
            return "no interval"
        return f"half-width {width:.1%} > {self.rel:g}"

    def finish(self, went_to_end: bool = False) -> None:
        """Add the last block; put the block (cluster) sums where the frame reads the
        interval's, except for what was read whole (a language every block of which was
        read; everything when the pass went to the end): its documents' interval stays."""
        self._flush()
        if went_to_end:
            return
        names = dict(self.state.langs)
        whole = [i for lang, i in names.items() if self._exhausted(lang)]
        for k, acc in enumerate(self.accs):
            lang, script, running = self.sums[k]
            by_docs = acc.boot.lang
            acc.boot.lang = grow_rows(lang, by_docs.shape[0]).copy()
            for i in whole:
                if i < len(by_docs):
                    acc.boot.lang[i] = by_docs[i]
            acc.boot.script = script.copy()
            acc.boot_running.script = running.copy()

    def statement(self, seed: int, went_to_end: bool) -> dict:
        """The corpus summary's `precision` object (docs/METRICS.md, "Samples")."""
        self.whole = went_to_end
        self.check()
        units = self.order.batch_unit
        read = units[self.index] + 1 if self.index >= 0 else 0
        total = len(self.order)
        out: dict = {"target": self.rel, "seed": seed, "block_bytes": BLOCK_BYTES}
        out["blocks_read"], out["blocks"] = read if not went_to_end else total, total
        out["exhausted"] = went_to_end
        langs = {key: g for (kind, key), g in self.groups.items() if kind == "language"}
        scripts = {key: g for (kind, key), g in self.groups.items() if kind == "script"}
        for g in self.groups.values():
            if went_to_end:
                g["exhausted"] = True
            g["half_width"] = None if g["half_width"] != g["half_width"] else g["half_width"]
        out["languages"] = dict(sorted(langs.items()))
        out["scripts"] = dict(sorted(scripts.items()))
        missed = [k for k, g in out["languages"].items() if not g["reached"]]
        missed += [f"script {k}" for k, g in out["scripts"].items() if not g["reached"]]
        out["not_reached"] = missed
        why = [f"{k} ({g['why']})" for k, g in out["languages"].items() if not g["reached"]] + [
            f"script {k} ({g['why']})" for k, g in out["scripts"].items() if not g["reached"]
        ]
        how = "the whole corpus was read" if went_to_end else "stopped"
        out["statement"] = (
            f"precision={self.rel} (seed {seed}): random {BLOCK_BYTES // 1024} KB blocks and "
            f"row groups, {out['blocks_read']:,} of {total:,} read; {how}"
            + (f"; not reached: {', '.join(why)}" if missed else "; every interval reached it")
        )
        return out


def check(options) -> None:
    """`options.precision` and what it excludes, refused before the corpus is read."""
    rel = options.precision
    if isinstance(rel, bool) or not isinstance(rel, (int, float)) or not 0 < rel < 1:
        raise CorpusError(f"precision={rel!r}: must be a fraction in (0, 1)")
    if options.sample is not None or options.max_docs is not None:
        raise CorpusError("precision: draws its own sample; leave out --sample and --max-docs")


def run(
    corpus: Corpus, options, toks, state, batch_size: int, progress: Callable | None
) -> tuple[list[TokenizerAccumulator], dict]:
    """analyze's pass over `corpus` under `options.precision` (one process; the options
    passed `check` first): accumulators and summary."""
    rel = options.precision
    order = BlockOrder(corpus, options.seed)
    accs = [TokenizerAccumulator(t) for t in toks]
    stop = Stopper(order, accs, state, rel)
    rest = run_pass(order, toks, accs, state, batch_size, progress=progress, until=stop)
    stop.finish(went_to_end=rest is None)
    summary = corpus.summary()
    summary["precision"] = stop.statement(options.seed, rest is None)
    # what was measured: the reading thread reads a few blocks past the stop
    summary["documents_read"] = summary["documents"]
    summary["documents"] = state.docs_measured
    summary["chars"] = int(accs[0].counts.lang[:, C["chars"]].sum()) if accs else 0
    summary["bytes"] = state.bytes_measured
    summary["subset"]["method"] = "precision"
    summary["subset"]["statement"] = summary["precision"]["statement"]
    return accs, summary
