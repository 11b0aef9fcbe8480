"""`--precision REL`: measure random blocks of the corpus until every interval is narrow enough.

The corpus is read in a seeded random order of blocks (fertility.corpus.precision: 16 KB of
text or jsonl lines, a parquet row group, a compressed file whole), each block its own
batches. After each block the pass stops when, for every tokenizer, every language and every
judged script (a "running" row holding at least the default policy's min_share of the
characters, or of a language's with its min_chars characters in min_documents documents:
fertility.findings.not_judged) has a chars/token 95% interval of relative half-width
<= REL, with at least MIN_CLUSTERS blocks and min_documents documents holding it;
a language all of whose blocks were measured is exhausted and its documents give its
interval (no block minimum); a language named by a file or folder that no block read yet is
not reached.

The interval. Documents of one block are neighbours (one page, one crawl, one topic), so the
sample is a cluster sample: the interval of the report is the ratio's delta-method interval
over blocks, not documents (Bootstrap.interval's formula with each block's characters and
tokens as one observation). It is wider than the per-document one when neighbours agree,
which is what makes it cover. At the end these block sums replace the per-document ones in
the accumulators, so the table's interval columns (and the gate) use them.

Strata. When files name the languages, each language is a stratum, measured into its own
accumulators: the order deals the languages in turn, and once a language's interval and
those of the scripts it holds running text of are reached, its blocks are skipped (the
checks close it for good, so the sample depends on the seed alone). Drawn in proportion, the
rarest language set the length of the pass: 737-1,089 blocks of the 13-language benchmark
against 469-496 drawn apart (benchmarks/RESULTS.md). The languages then hold different
shares of their blocks, so the pooled rows (all, script, running) weight each language's
counts by its blocks over those measured (Stopper.weights) and take the stratified interval
(Bootstrap.stratified); each language's own rows are its sample, unweighted, but for their
shares of the all row (counters.Weighted). With labels
read from records there is one stratum, drawn in proportion, and no weight.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fertility import unicode as U
from fertility.corpus import Corpus
from fertility.corpus.precision import BLOCK_BYTES, BlockOrder
from fertility.errors import CorpusError
from fertility.measure.counters import (
    DETAIL,
    NS,
    Bootstrap,
    C,
    PooledRow,
    TokenizerAccumulator,
    Weighted,
    grow_rows,
)
from fertility.measure.passes import run_pass
from fertility.policy import default_policy, judges_running

MIN_CLUSTERS = 30  # blocks holding a group before its interval is trusted (delta method)


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


def _boot_tables(acc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The per-document sums the stopper follows: language, script and running rows."""
    return acc.boot.lang, acc.boot.script, acc.boot_running.script


def _as_counts(weighted: np.ndarray, scale: float) -> np.ndarray:
    """Weighted counts as a pooled row's counts: times `scale`, the row's sampled characters
    over its weighted ones, so the row keeps the size of what was read (its characters, and
    about its tokens and documents: a Wilson interval over its rates is as wide as the
    sample allows, not as the weights would pretend) with the weighted mix of languages;
    rounded, a count above 0 stays at least 1 (what was seen stays seen)."""
    x = np.asarray(weighted, dtype=float) * scale
    return np.where(x > 0, np.maximum(np.rint(x), 1), 0).astype(np.int64)


DETAIL_COLUMNS = [C[name] for name in DETAIL]


def _pooled_counts(weighted: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """A pooled row's counts from its languages' weighted and plain sums: the weighted ones
    scaled back to the sample's characters (_as_counts), but the detail subset's as they
    are (counters.DETAIL: a fixed number of documents per language, which the full pass
    sums alike, whatever share of each language was read)."""
    out = _as_counts(weighted, sample[C["chars"]] / weighted[C["chars"]])
    out[DETAIL_COLUMNS] = sample[DETAIL_COLUMNS]
    return out


LANG, SCRIPT, RUNNING = range(3)  # the stopper's tables, in _boot_tables's order


class Stopper:
    """run_pass's `until`: adds each block to its stratum's cluster sums, says when to stop,
    and tells the order which strata need no more blocks (`order.done`)."""

    def __init__(self, order: BlockOrder, strata: list[list], state, rel: float):
        """strata: per stratum of `order`, one accumulator per tokenizer (the same tokenizers
        in the same order in each): the batches of a stratum's blocks are measured into its
        own (`route`), but for the script histograms and used-id mask, shared."""
        self.order, self.strata, self.state, self.rel = order, strata, state, rel
        for accs in strata[1:]:  # one script histogram and used-id mask per tokenizer, not
            for acc, first in zip(accs, strata[0]):  # per language (_histogram says why)
                acc.vocab_script, acc.vocab_all = first.vocab_script, first.vocab_all
        self.read_seconds = 0.0  # run_pass counts the reading thread's time here
        # what the default policy judges: its min_documents, min_chars and min_share
        self.least = default_policy()
        empty = [np.zeros((0, 2), np.int64), np.zeros((NS, 2), np.int64)]
        six = [np.zeros((0, 6), np.int64), np.zeros((NS, 6), np.int64)]
        # per stratum and tokenizer, (C, T) of the language, script and running tables at
        # the end of the stratum's last block, and Bootstrap's six sums over its blocks
        self.start = [[[empty[0], empty[1], empty[1]] for _ in accs] for accs in strata]
        self.sums = [[[six[0], six[1], six[1].copy()] for _ in accs] for accs in strata]
        self.drawn = np.zeros(len(strata), np.int64)  # per stratum, blocks measured whole
        self._counted = 0  # of order.drawn, the positions counted in `drawn`
        self._stratum = {name: i for i, name in enumerate(order.strata)} if order.by_label else {}
        self.groups: dict[tuple[str, str], dict] = {}  # the last check: (kind, key) -> its state
        self.whole = False  # every block was measured (set once the pass has ended)
        # (stratum, tokenizer) -> _language_shares of its accumulator, until its next block
        self._shares_of: dict[tuple[int, int], np.ndarray] = {}

    @property
    def stratified(self) -> bool:
        return len(self.strata) > 1

    def route(self, index: int) -> list | None:
        """run_pass's `route`: the accumulators batch `index` is measured into; None for a
        batch of a stratum the checks so far have closed (`order.done`), which the reading
        thread, ahead, gave out before it knew. Strata are only ever added to `done`, so
        what is measured depends on the seed alone, not on how far ahead that thread was."""
        stratum = int(self.order.stratum[self.order.batch_unit[index]])
        return None if stratum in self.order.done else self.strata[stratum]

    def __call__(self, index: int, bytes_measured: int) -> bool:
        """After batch `index`: when its block ends with it (a block can span batches: a
        cluster is the block, not the batch), add the block and check."""
        if not self.order.batch_last[index]:
            return False
        unit = self.order.batch_unit[index]
        self._flush(int(self.order.stratum[unit]))
        self._count_drawn(unit + 1)
        return not self._too_few_blocks() and self.check()

    def _count_drawn(self, before: int) -> None:
        """Count in `drawn` the blocks drawn at positions before `before` (empty ones too:
        a block with no document is a block of its stratum's sample all the same), but for
        those of a closed stratum (`route`): called before the check that may close more."""
        drawn, stratum, done = self.order.drawn, self.order.stratum, self.order.done
        while self._counted < len(drawn) and drawn[self._counted] < before:
            h = int(stratum[drawn[self._counted]])
            if h not in done:
                self.drawn[h] += 1
            self._counted += 1

    def _shares(self, stratum: int, k: int) -> np.ndarray:
        """_language_shares of tokenizer k's accumulator of `stratum`, worked out again only
        after a block of it (a check reads every stratum's; one of them changed)."""
        key = (stratum, k)
        if key not in self._shares_of:
            self._shares_of[key] = _language_shares(self.strata[stratum][k])
        return self._shares_of[key]

    def _flush(self, stratum: int) -> None:
        """Add the block whose last batch was just measured (what its stratum's tables
        gained since `start`) as one cluster of `stratum`."""
        for k in range(len(self.strata[stratum])):
            self._shares_of.pop((stratum, k), None)
        for k, acc in enumerate(self.strata[stratum]):
            for j, table in enumerate(_boot_tables(acc)):
                last = table[:, 1:3].copy()
                start = grow_rows(self.start[stratum][k][j], last.shape[0])
                rows = _cluster_rows(*(last - start).T)
                self.sums[stratum][k][j] = grow_rows(self.sums[stratum][k][j], last.shape[0]) + rows
                self.start[stratum][k][j] = last

    def _languages(self) -> set[str]:
        """The languages met so far, and those named by a file (read or not)."""
        return set(self.state.langs) | set(self._stratum)

    def _stratum_of(self, lang: str) -> int:
        return self._stratum.get(lang, 0)

    def _exhausted(self, stratum: int) -> bool:
        """Whether every block of `stratum` was measured."""
        return self.whole or bool(self.drawn[stratum] >= self.order.units_in[stratum])

    def _too_few_blocks(self) -> bool:
        """Whether a language not read whole still holds under MIN_CLUSTERS blocks: then
        check() cannot pass, and its per-group intervals (most of a pass's checking time
        while the early blocks come in) are not worked out. Block counts are the same for
        every tokenizer (a block holds a language when it holds its characters)."""
        if not self.strata or not self.strata[0]:
            return False
        names = dict(self.state.langs)
        for lang in self._languages():
            h = self._stratum_of(lang)
            if self._exhausted(h):
                continue
            i, lang_sums = names.get(lang), self.sums[h][0][LANG]
            if i is None or i >= len(lang_sums) or not _enough(False, int(lang_sums[i][0])):
                return True
        return False

    def weights(self) -> np.ndarray:
        """Per stratum, what each of its measured blocks stands for in the pooled rows (all,
        script, running): its blocks over those measured (Horvitz-Thompson); 0 for a stratum
        with no block measured. A pooled row is then scaled back to its sample's size
        (_as_counts), so only the ratios of the weights matter."""
        n, size = self.drawn.astype(float), self.order.units_in.astype(float)
        return np.divide(size, n, out=np.zeros_like(n), where=n > 0)

    def pooled(self, k: int, table: int, weights: np.ndarray) -> dict[int, PooledRow]:
        """Tokenizer k's pooled rows of `table` (LANG: the one `all` row, key -1; SCRIPT,
        RUNNING: per script index) over the strata: the weighted counts scaled back to the
        characters the row's sample holds (_as_counts), the stratified interval
        (Bootstrap.stratified), the blocks holding the row and whether every stratum holding
        it was read whole."""
        rows: dict[int, list] = {}
        for h, accs in enumerate(self.strata):
            acc, sums = accs[k], self.sums[h][k][table]
            whole, w = self._exhausted(h), float(weights[h])
            if table == LANG:
                counts = {-1: acc.counts.lang.sum(axis=0)}
                by_docs, by_blocks = {-1: acc.boot.lang.sum(axis=0)}, {-1: sums.sum(axis=0)}
            else:
                tab = acc.counts.script if table == SCRIPT else acc.counts.running
                present = np.flatnonzero(tab[:, C["chars"]])
                counts = {int(s): tab[s] for s in present}
                docs = _boot_tables(acc)[table]
                by_docs = {int(s): docs[s] for s in present}
                by_blocks = {int(s): sums[s] for s in present}
            for key, row in counts.items():
                if not row[C["chars"]] or w == 0:
                    continue
                s6 = by_docs[key] if whole else by_blocks[key]
                n = int(s6[0]) if whole else int(self.drawn[h])
                entry = rows.setdefault(key, [0.0, 0, [], 0, True])
                entry[0] = entry[0] + w * row
                entry[1] = entry[1] + row
                entry[2].append((w, n, s6, whole))
                entry[3] += int(by_blocks[key][0])
                entry[4] = entry[4] and whole
        return {
            key: PooledRow(
                _pooled_counts(weighted, sample),
                Bootstrap.stratified(strata),
                None,
                blocks,
                whole,
                float(sample[C["chars"]] / weighted[C["chars"]]),
            )
            for key, (weighted, sample, strata, blocks, whole) in rows.items()
        }

    def check(self) -> bool:
        """Update `groups` and the strata to skip; whether every group has reached the
        target."""
        groups: dict[tuple[str, str], dict] = {}
        self.groups = groups
        names = dict(self.state.langs)
        weights = self.weights()
        for k in range(len(self.strata[0])):
            for lang in self._languages():
                i, h = names.get(lang), self._stratum_of(lang)
                acc, lang_sums = self.strata[h][k], self.sums[h][k][LANG]
                sums = lang_sums[i] if i is not None and i < len(lang_sums) else None
                docs = int(acc.counts.lang[i, C["documents"]]) if sums is not None else 0
                chars = int(acc.counts.lang[i, C["chars"]]) if sums is not None else 0
                exhausted = self._exhausted(h)
                blocks = int(sums[0]) if sums is not None else 0
                if exhausted and sums is not None and i is not None and i < len(acc.boot.lang):
                    # every block of the language was read: no cluster sample is left to
                    # draw, so its documents give the interval (no 30-block minimum)
                    sums = acc.boot.lang[i]
                interval = Bootstrap.interval(sums) if sums is not None else None
                self._judge(groups, ("language", lang), interval, docs, chars, exhausted, blocks)
            for s, row, interval, blocks, whole in self._running(k, weights):
                key = ("script", U.SCRIPTS[s])
                docs, chars = int(row[C["documents"]]), int(row[C["chars"]])
                self._judge(groups, key, interval, docs, chars, whole, blocks)
        if self.stratified:
            self.order.done.update(self._done(groups))
        return all(g["reached"] or g["exhausted"] for g in groups.values())

    def _running(self, k: int, weights: np.ndarray):
        """Tokenizer k's judged running-script rows, as the default policy judges them
        (fertility.policy.judges_running: by the row's share of the corpus, or of a language
        when large enough on its own): (script, counts, interval, blocks, read whole)."""
        if self.stratified:
            every = self.pooled(k, LANG, weights).get(-1)
            total = int(every.counts[C["chars"]]) if every is not None else 0
            rows = self.pooled(k, RUNNING, weights)
            own = np.max([self._shares(h, k) for h in range(len(self.strata))], axis=0)
            # the share of the corpus is the weighted one (Weighted.shares), the row's own
            # counts those of its sample
            base = every.scale if every is not None else 1.0
            factor: dict[int, float] = {s: base / r.scale for s, r in rows.items()}
        else:
            acc = self.strata[0][k]
            total = int(acc.counts.script[:, C["chars"]].sum())
            own = _language_shares(acc)
            rows = {}
            for s in np.flatnonzero(acc.counts.running[:, C["chars"]]):
                sums = self.sums[0][k][RUNNING][s]
                blocks = int(sums[0])
                if self.whole:  # the whole corpus read: the documents' interval
                    sums = acc.boot_running.script[s]
                rows[int(s)] = PooledRow(
                    acc.counts.running[s], Bootstrap.interval(sums), None, blocks, self.whole
                )
            factor = {}
        least = self.least
        for s, row in sorted(rows.items()):
            chars, docs = int(row.counts[C["chars"]]), int(row.counts[C["documents"]])
            share = chars * factor.get(s, 1.0) / total if total else 1.0
            if judges_running(
                share, own[s], chars, docs, least.min_share, least.min_chars, least.min_documents
            ):
                yield s, row.counts, row.interval, row.blocks, row.whole

    def _done(self, groups: dict) -> set[int]:
        """The strata to draw no more blocks from: read whole, or their language reached and
        every script row they hold running text of reached (a stratum stops once its own
        rows need nothing more; another that still does goes on)."""
        open_scripts = [
            U.SCRIPT_INDEX[key]
            for (kind, key), g in groups.items()
            if kind == "script" and not (g["reached"] or g["exhausted"])
        ]
        done = set()
        for h, name in enumerate(self.order.strata):
            g = groups.get(("language", name))
            if self._exhausted(h):
                done.add(h)
            elif g is not None and g["reached"]:
                holds = [
                    acc.counts.running[open_scripts, C["chars"]].any() for acc in self.strata[h]
                ]
                if not any(holds):
                    done.add(h)
        return done

    def _judge(self, groups, key, interval, docs, chars, exhausted, blocks) -> None:
        """`interval`: the group's (lo, hi) over blocks, or over its documents when
        `exhausted` (read whole), which need no block minimum; None when nothing holds it.
        `blocks`: the blocks holding it."""
        width = float("nan")
        if interval is not None and chars > 0:
            lo, hi = interval
            if lo == lo:  # not NaN
                width = float((hi - lo) / (hi + lo))  # (hi - lo) / 2 / the midpoint, R
        enough = _enough(exhausted, blocks)
        reached = bool(enough and docs >= self.least.min_documents and width <= self.rel)
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
        if docs < self.least.min_documents:
            return f"{docs} documents, under {self.least.min_documents}"
        if width != width:
            return "no interval"
        return f"half-width {width:.1%} > {self.rel:g}"

    def finish(self, ended: bool) -> tuple[list[TokenizerAccumulator], Weighted | None]:
        """The accumulators of the report and, for a stratified pass not read whole, its
        pooled rows and language shares (frame.build_table's `weighted`). `ended`: the order
        ran out (every block drawn was measured; the pass stops only where a block ends).
        The block (cluster) sums go where the table reads the interval's, except for what
        was read whole (a language every block of which was read; everything when every
        block was): its documents' interval stays."""
        self._shares_of.clear()  # (what they read stays; the checks after start afresh)
        if ended:  # blocks drawn after the last one with documents were empty
            self._count_drawn(len(self.order))
        self.whole = bool((self.drawn >= self.order.units_in).all())
        if self.whole:
            return self._merged(), None
        weighted = self._weighted() if self.stratified else None  # before the sums move
        names = dict(self.state.langs)
        for h, accs in enumerate(self.strata):
            whole = [i for lang, i in names.items() if self._stratum_of(lang) == h]
            whole = whole if self._exhausted(h) else []
            for k, acc in enumerate(accs):
                lang, script, running = self.sums[h][k]
                by_docs = acc.boot.lang
                acc.boot.lang = grow_rows(lang, by_docs.shape[0]).copy()
                for i in whole:
                    if i < len(by_docs):
                        acc.boot.lang[i] = by_docs[i]
                if not self.stratified:  # (a stratified pass's pooled rows are `pooled`)
                    acc.boot.script = script.copy()
                    acc.boot_running.script = running.copy()
        return self._merged(), weighted

    def _weighted(self) -> Weighted:
        """The pooled rows and the language rows' share factors (Weighted), from the strata's
        documents' sums where read whole: before `finish` puts the block sums in their place."""
        weights = self.weights()
        rows: dict[tuple[str, str, str], PooledRow] = {}
        shares: dict[tuple[str, str, str], float] = {}
        for k, acc in enumerate(self.strata[0]):
            label = acc.tok.label
            every = 1.0
            for table, group in ((LANG, "all"), (SCRIPT, "script"), (RUNNING, "running")):
                for key, row in self.pooled(k, table, weights).items():
                    name = "all" if table == LANG else U.SCRIPTS[key]
                    hist = None if table == RUNNING else self._histogram(k, table, key, weights)
                    rows[(label, group, name)] = row._replace(histogram=hist)
                    every = row.scale if table == LANG else every
                    shares[(label, group, name)] = every / row.scale
            for lang in self.state.langs:
                shares[(label, "language", lang)] = float(weights[self._stratum_of(lang)] * every)
        return Weighted(rows, shares)

    def _histogram(self, k: int, table: int, key: int, weights: np.ndarray):
        """The token-id histogram of a pooled row (None without a vocabulary): the `all`
        row's, each language's weighted; a script row's, the strata's one shared histogram
        (__init__), unweighted. Per-language script histograms would cost a vocabulary-sized
        array per language and script (1.6 MB for a 200k vocabulary: gigabytes over
        hundreds of languages); the distribution metrics are the same under any scale, so
        the unweighted one gives a script written by one language exactly, and leans toward
        the languages read most thoroughly only where several write it."""
        first = self.strata[0][k]
        if not first.track_vocab:
            return None
        if table != LANG:
            return first.vocab_script.get(key)
        chars = np.array([accs[k].counts.lang[:, C["chars"]].sum() for accs in self.strata])
        total = np.zeros(len(first.vocab_all))
        for h, accs in enumerate(self.strata):
            for part in accs[k].vocab_lang.values():
                total += float(weights[h]) * part
        return _as_counts(total, chars.sum() / (weights * chars).sum())

    def _merged(self) -> list[TokenizerAccumulator]:
        """One accumulator per tokenizer: the strata's added up (their language rows are
        each stratum's own; the pooled rows are replaced by `finish`'s when weighted)."""
        if not self.stratified:
            return self.strata[0]
        merged = [TokenizerAccumulator(acc.tok) for acc in self.strata[0]]
        for accs in self.strata:
            for into, acc in zip(merged, accs):
                state = acc.export()
                del state["vocab_script"], state["vocab_all"]  # the strata's shared ones
                into.merge(state)
        for into, acc in zip(merged, self.strata[0]):
            into.vocab_script, into.vocab_all = acc.vocab_script, acc.vocab_all
        return merged

    def statement(self, seed: int) -> dict:
        """The corpus summary's `precision` object (docs/METRICS.md, "Samples")."""
        self.check()
        total = len(self.order)
        out: dict = {"target": self.rel, "seed": seed, "block_bytes": BLOCK_BYTES}
        out["blocks_read"], out["blocks"] = int(self.drawn.sum()), total
        out["exhausted"] = self.whole
        langs = {key: g for (kind, key), g in self.groups.items() if kind == "language"}
        scripts = {key: g for (kind, key), g in self.groups.items() if kind == "script"}
        for g in self.groups.values():
            if self.whole:
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
        how = "the whole corpus was read" if self.whole else "stopped"
        drawn = (
            ", each language's in turn until its rows were reached (the all and script rows "
            "weight each language by its blocks over those read)"
            if self.stratified and not self.whole
            else ""
        )
        out["statement"] = (
            f"precision={self.rel} (seed {seed}): random {BLOCK_BYTES // 1024} KB blocks and "
            f"row groups{drawn}, {out['blocks_read']:,} of {total:,} read; {how}"
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
) -> tuple[list[TokenizerAccumulator], dict, Weighted | None]:
    """analyze's pass over `corpus` under `options.precision` (one process; the options
    passed `check` first): accumulators, summary and what a stratified pass weighted
    (fertility.measure.frame.build_table's `weighted`; None when nothing was)."""
    order = BlockOrder(corpus, options.seed)
    strata = [[TokenizerAccumulator(t) for t in toks] for _ in order.strata]
    stop = Stopper(order, strata, state, options.precision)
    rest = run_pass(
        order, toks, strata[0], state, batch_size, progress=progress, until=stop, route=stop.route
    )
    accs, weighted = stop.finish(ended=rest is None)
    summary = corpus.summary()
    summary["precision"] = stop.statement(options.seed)
    # what was measured: the reading thread reads a few blocks past the stop
    summary["documents_read"] = summary["documents"]
    summary["documents"] = state.docs_measured
    summary["chars"] = int(accs[0].counts.lang[:, C["chars"]].sum()) if accs else 0
    summary["bytes"] = state.bytes_measured
    summary["subset"]["method"] = "precision"
    summary["subset"]["statement"] = summary["precision"]["statement"]
    return accs, summary, weighted
