"""One batch of documents through every tokenizer's counters (see fertility.measure).

Each count starts as a (k x documents) matrix, one row per script present in the batch
(fertility.measure.counters.DocGroups), from one bincount of the keys `row * documents +
document` of what it counts (a code point, token, word or document); one reduction then sums
all the counts of a tokenizer per language and per script at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fertility import unicode as U
from fertility.arrays import index_dtype
from fertility.hashing import mix64
from fertility.measure import roundtrip
from fertility.measure.counters import (
    COUNTS,
    NORMALIZATION_EXAMPLES,
    NOSPACE,
    NS,
    C,
    DocGroups,
)
from fertility.options import DETAIL_CHARS
from fertility.tokenizers.base import Flat
from fertility.tokenizers.kinds import capabilities

SAMPLE_CHARS = 600  # longest stretch of a document kept as a sample with token boundaries


def encode_flat(tok, texts: list[str]) -> Flat:
    """ids, starts, ends (code points, local to each document) and tokens per document
    (every tokenizer has encode_flat: fertility.tokenizers.base.Tokenizer)."""
    return tok.encode_flat(texts)


def encode_checked(tok, texts: list[str], checked: np.ndarray | None):
    """encode_flat, with what its encoding thread brings for the documents `checked` marks
    where the tokenizer's kind can (fertility.tokenizers.base.Checked, else None)."""
    if checked is not None and checked.any() and capabilities(tok).checked_pre_tokens:
        return tok.encode_flat_checked(texts, checked)
    return tok.encode_flat(texts), None


class DetailPlan:
    """Which documents of each batch get the detail checks, worked out as the batches are
    read (in corpus order, ahead of measure_batch) from a copy of the pass's state, so the
    encoding threads can bring what the checks need of those documents (encode_checked).
    measure_batch still decides (_detail_mask on the pass's own state); a document it checks
    that the plan left out (a batch the pass skips, --precision) is pre-tokenized and decoded
    on the measuring thread, as without a plan."""

    def __init__(self, state) -> None:
        self._state = PlanState(dict(state.langs), dict(state.detail_seen), state.detail_docs)

    def __call__(self, batch) -> np.ndarray:
        doc_lang, batch_langs = _lang_ids(batch.langs, self._state)
        return _detail_mask(batch.texts, doc_lang, batch_langs, self._state)


@dataclass
class PlanState:
    """The part of fertility.measure.passes.PassState the detail subset depends on."""

    langs: dict
    detail_seen: dict
    detail_docs: int | None


class _Keys:
    """A batch's (k x documents) grid: the key `row * documents + document` of each code
    point (`char`) and word start (`word`), the counts that do not depend on the tokenizer
    (`base`), and each document's dominant script (the row with most of its code points)."""

    def __init__(self, tb: U.TextBatch, doc_lang: np.ndarray, n_langs: int) -> None:
        # Runs of one script and one running-text flag in one document (about one per
        # document in most text): the per-code-point keys are those of the runs repeated,
        # and every count of code points, bytes and graphemes a sum over the runs, no
        # arithmetic per code point.
        self.n = n = tb.n_docs
        self.n_chars = len(tb.cps)
        off = tb.doc_offsets
        cut = np.empty(len(tb.script), dtype=bool)
        cut[0] = True  # documents are never empty (fertility.corpus)
        np.not_equal(tb.script[1:], tb.script[:-1], out=cut[1:])
        cut[1:] |= tb.running[1:] != tb.running[:-1]
        cut[off[:-1][off[:-1] < off[1:]]] = True
        run = np.flatnonzero(cut)
        run_len = np.diff(run, append=len(cut))
        run_script = tb.script.take(run)
        present = np.flatnonzero(np.bincount(run_script, minlength=NS))
        self.k = k = len(present)
        row = np.zeros(NS, np.int64)
        row[present] = np.arange(k)
        run_key = row.take(run_script) * n + tb.doc_of_char.take(run)
        self.char = np.repeat(run_key, run_len)
        self.groups = DocGroups(doc_lang, n_langs, present)
        self.spaced = ~NOSPACE[present][:, None]  # rows of scripts written with spaces
        self.word = self.char.take(tb.word_starts)
        run_bytes = np.add.reduceat(tb.nbytes, run)
        if np.count_nonzero(tb.gstart) == len(tb.gstart):  # each code point its own grapheme
            run_graphemes = run_len  # (no combining marks: most Latin, Cyrillic and CJK text)
        else:
            run_graphemes = np.add.reduceat(tb.gstart, run, dtype=np.int64)
        chars = self.summed(run_key, run_len)
        self.dominant_row = chars.argmax(axis=0)
        self.dominant = present[self.dominant_row]
        self.base = {
            "chars": chars,
            "bytes": self.summed(run_key, run_bytes),
            "graphemes": self.summed(run_key, run_graphemes),
            "words": self.count(self.word) * self.spaced,
            "nospace_chars": chars * ~self.spaced,
        }
        # The same counts of running text only (fertility.unicode.running): the rows of
        # the "running" group, on which a script is judged.
        self.running = tb.running
        ran = tb.running.take(run)
        run_chars = self.summed(run_key[ran], run_len[ran])
        self.base_running = {
            "documents": (run_chars > 0).astype(np.int64),
            "chars": run_chars,
            "bytes": self.summed(run_key[ran], run_bytes[ran]),
            "graphemes": self.summed(run_key[ran], run_graphemes[ran]),
        }
        # Where a token's script is read (attributed): the first character in its span
        # that has a script of its own, so a leading space or punctuation does not carry
        # the previous word's script into it. Those characters are found through their
        # count up to each position (`own_before[i]`: how many of them precede i), one
        # cumulative sum, not a running minimum and maximum over every code point.
        own = tb.own_script > U.ZINH
        index = index_dtype(len(own))
        self.own_before = np.zeros(len(own) + 1, index)
        np.cumsum(own, out=self.own_before[1:])
        own_at = np.flatnonzero(own)
        # the k-th of them at [k + 1]; [0]: none (-1), past the last: the end of the batch
        self.own_at = np.concatenate(([-1], own_at, [len(own)]))
        # how many times the script changed between characters with a script of their own,
        # up to the k-th of them: a token whose own characters are not all of one script
        # has a change after its first one (`script_changes[last] > script_changes[first]`)
        own_scripts = tb.own_script.take(own_at)
        self.script_changes = np.zeros(len(own_at), index)
        np.cumsum(own_scripts[1:] != own_scripts[:-1], out=self.script_changes[1:])

    def count(self, keys: np.ndarray) -> np.ndarray:
        """How many of `keys` fall in each (row, document): a (k x documents) matrix."""
        return np.bincount(keys, minlength=self.k * self.n).reshape(self.k, self.n)

    def summed(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        out = np.zeros(self.k * self.n, np.int64)
        np.add.at(out, keys, values)
        return out.reshape(self.k, self.n)


def _base_tables(keys: _Keys, doc_lang: np.ndarray, n_langs: int):
    """The counts that do not depend on the tokenizer, as whole (languages x counts) and
    (scripts x counts) tables, computed once per batch."""
    lang = np.zeros((n_langs, len(COUNTS)), np.int64)
    script = np.zeros((NS, len(COUNTS)), np.int64)
    names = [C[name] for name in keys.base]
    lang[:, names], script[:, names] = keys.groups.tables(np.stack(list(keys.base.values())))
    lang[:, C["documents"]] = np.bincount(doc_lang, minlength=n_langs)[:n_langs]
    script[keys.groups.present, C["documents"]] = np.count_nonzero(keys.base["chars"], axis=1)
    return lang, script


def measure_batch(batch, encoded, accs, state, index: int = 0, came=None) -> None:
    """Measure batch number `index` of the corpus (a fertility.corpus.DocBatch). `encoded`:
    encode_flat's result for each accumulator's tokenizer, same order; None for a batch
    another worker process measures (only the bookkeeping that depends on corpus order is
    done: language ids, the detail subset, the position of the per-document table). `came`:
    what encode_checked brought for the detail documents, for each tokenizer (None: none)."""
    n = len(batch)
    texts, langs = batch.texts, batch.langs
    doc_lang, batch_langs = _lang_ids(langs, state)
    n_langs = len(state.langs)
    detail = _detail_mask(texts, doc_lang, batch_langs, state)
    keep = _keep_rows(n, state)
    state.docs_done += n
    if encoded is None or n == 0:
        return
    tb = U.analyze_texts(texts)
    keys = _Keys(tb, doc_lang, n_langs)
    base_lang, base_script = _base_tables(keys, doc_lang, n_langs)
    doc_tokens = {}
    for acc, enc, got in zip(accs, encoded, came or [None] * len(accs)):
        acc.counts.add_table(base_lang, base_script)
        tokens = _measure_tokenizer(acc, enc, got, texts, tb, keys, doc_lang, detail, index)
        acc.boot.add(keys.groups, keys.base["chars"], tokens)
        doc_tokens[acc.tok.label] = tokens.sum(axis=0)
    doc_bytes = keys.base["bytes"].sum(axis=0)
    if keep:
        state.doc_rows.append(
            {
                "order": index,
                "lang": langs[:keep],
                "source": batch.sources[:keep],
                "line": batch.lines[:keep],
                "script": keys.dominant[:keep],
                "chars": np.diff(tb.doc_offsets)[:keep],
                "graphemes": keys.base["graphemes"].sum(axis=0)[:keep],
                "bytes": doc_bytes[:keep],
                "tokens": {label: t[:keep] for label, t in doc_tokens.items()},
            }
        )
    state.docs_measured += n
    state.bytes_measured += int(doc_bytes.sum())


def _lang_ids(langs: list[str], state) -> tuple[np.ndarray, list[int]]:
    """Language id of each document (new labels numbered in corpus order) and the ids the
    batch has."""
    if langs and langs.count(langs[0]) == len(langs):  # the usual batch: one label
        lang = state.langs.setdefault(langs[0], len(state.langs))
        return np.full(len(langs), lang, np.int64), [lang]
    ids = [state.langs.setdefault(lang, len(state.langs)) for lang in dict.fromkeys(langs)]
    doc_lang = np.fromiter(map(state.langs.__getitem__, langs), dtype=np.int64, count=len(langs))
    return doc_lang, ids


def _detail_mask(texts: list[str], doc_lang, batch_langs: list[int], state) -> np.ndarray:
    """The documents that get the detail checks: the first detail_docs of each language,
    stopping sooner once detail_docs x DETAIL_CHARS characters of it are checked."""
    if state.detail_docs is None:
        return np.ones(len(doc_lang), dtype=bool)
    mask = np.zeros(len(doc_lang), dtype=bool)
    budget = state.detail_docs * DETAIL_CHARS
    for lang in sorted(batch_langs):  # the first documents of each language
        seen, chars = state.detail_seen.get(lang, (0, 0))
        if seen < state.detail_docs and chars < budget:
            take = np.flatnonzero(doc_lang == lang)[: state.detail_docs - seen]
            lengths = np.fromiter((len(texts[i]) for i in take.tolist()), np.int64, take.size)
            before = chars + np.cumsum(lengths) - lengths  # characters ahead of each
            take, lengths = take[before < budget], lengths[before < budget]
            mask[take] = True
            state.detail_seen[lang] = (seen + take.size, chars + int(lengths.sum()))
    return mask


def _measure_tokenizer(
    acc, enc, came, texts, tb, keys: _Keys, doc_lang, detail, index
) -> np.ndarray:
    """Add one tokenizer's counts of the batch (`enc`: its flat encoding; `came`: what came
    with it for the detail documents, a Checked or None); returns its (k x documents) token
    counts."""
    ids, starts, ends, per_doc = enc
    tok_doc, gs, ge, pos, partial, at, key = _placed(acc, enc, tb, keys)
    tokens = keys.count(key)
    counts = {"tokens": tokens, "word_tokens": tokens * keys.spaced}
    run_tok = keys.running[at]
    running = {"tokens": keys.count(key[run_tok])}
    if acc.track_vocab:
        t_script = tb.script[at]
        counts["byte_fallback_tokens"] = keys.count(key[partial])
        running["byte_fallback_tokens"] = keys.count(key[partial & run_tok])
        acc.add_chars(acc.byte_fallback_chars, t_script[partial], tb.cps[at[partial]])
        if acc.unk_id is not None:
            unk = ids == acc.unk_id
            counts["unk_tokens"] = keys.count(key[unk])
            running["unk_tokens"] = keys.count(key[unk & run_tok])
            acc.add_chars(acc.unk_chars, t_script[unk], tb.cps[at[unk]])
        _mark_vocab(acc, keys, tokens, ids, doc_lang, tok_doc, t_script)

    nonempty = ge > gs
    new_start = np.ones(len(gs), dtype=bool)
    new_start[1:] = (gs[1:] != gs[:-1]) | (tok_doc[1:] != tok_doc[:-1])
    mark_initial = new_start & nonempty & tb.mark_or_joiner(pos)
    counts["mark_initial_tokens"] = keys.count(key[mark_initial])
    running["mark_initial_tokens"] = keys.count(key[mark_initial & run_tok])
    acc.counts.add_running(
        keys.groups.tables(np.stack([*keys.base_running.values(), *running.values()]))[1],
        (*keys.base_running, *running),
    )
    acc.boot_running.add(keys.groups, keys.base_running["chars"], running["tokens"])
    acc.counts.add_running_lang(
        keys.groups.per_lang(keys.base_running["chars"]), keys.groups.present
    )

    counts.update(_boundary_counts(tb, keys, key, gs, ge, pos, tok_doc, nonempty))
    counts.update(_detail_checks(acc, texts, tb, keys, doc_lang, detail, enc, came, gs, ge, index))
    acc.counts.add(tuple(counts), *keys.groups.tables(np.stack(list(counts.values()))))
    _take_samples(acc, texts, tb, keys.dominant, ids, starts, ends, per_doc, index)
    return tokens


def _placed(acc, enc, tb, keys: _Keys) -> tuple:
    """Where each token of `enc` (encode_flat's form) sits in the batch: its document, its
    global span [gs, ge), the character an empty one counts at (`pos`), whether it is a piece
    of a character's bytes (None when the accumulator keeps no vocabulary), the character it
    is attributed to (`at`, _attributed) and that character's grid key."""
    ids, starts, ends, per_doc = enc
    tok_doc = np.repeat(np.arange(len(per_doc), dtype=np.int64), per_doc)
    off = tb.doc_offsets
    tok_off = off[tok_doc]
    gs, ge = starts + tok_off, ends + tok_off
    # A token that covers no text (at a document's end) belongs to the last character.
    pos = np.minimum(gs, np.repeat(off[1:] - 1, per_doc))
    partial = acc.tok.partial_of(ids) if acc.track_vocab else None
    at = _attributed(tb, keys, pos, gs, ge, partial, (starts, ids, tok_doc))
    return tok_doc, gs, ge, pos, partial, at, keys.char.take(at)


def _boundary_counts(tb, keys: _Keys, key, gs, ge, pos, tok_doc, nonempty) -> dict:
    """The (k x documents) counts of the boundaries between a tokenizer's tokens (`key`: the
    grid key each token counts at; gs, ge: global spans; pos: where an empty one counts;
    tok_doc: each token's document): token_boundaries, grapheme_split_boundaries and
    continued_words (benchmarks/compiled_counting.py times this function against a compiled
    loop that gives the same counts)."""
    # Boundaries between consecutive non-empty tokens of one document; one that falls inside a
    # character's bytes or inside a grapheme cluster splits what a reader sees as one letter.
    ne = np.flatnonzero(nonempty)
    ne_doc = tok_doc[ne]
    after = np.flatnonzero(ne_doc[1:] == ne_doc[:-1])  # ne[after + 1] follows ne[after]
    cur, prev = ne[after + 1], ne[after]
    inside = (gs[cur] < ge[prev]) | ~tb.gstart[pos[cur]]
    # A word counts as continued when two or more tokens overlap it.
    cont = _overlapped_twice(gs[ne], ge[ne], tb.word_starts, tb.word_ends)
    return {
        "token_boundaries": keys.count(key[cur]),
        "grapheme_split_boundaries": keys.count(key[cur[inside]]),
        "continued_words": keys.count(keys.word[cont]) * keys.spaced,
    }


def _attributed(tb, keys: _Keys, pos, gs, ge, partial, who) -> np.ndarray:
    """The character each token counts at (its script and running flag), docs/METRICS.md
    "Which script a token belongs to": a piece of a character's bytes (`partial`) at that
    character, its last one (the first may be a whole leading space); any other token at
    the first character of its span with a script of its own (a leading space or
    punctuation carries no script), or at `pos` when it has none (all Common: ", "); a token
    holding characters of several scripts at the first character of one of them, drawn with
    probability its share of the token's characters (`who`: the tokens' starts in their
    document, ids and documents, which the draw is a hash of)."""
    before = keys.own_before
    first = keys.own_at.take(before.take(pos) + 1)  # the first at or after pos
    at = np.where(first < ge, first, pos)
    if partial is not None:  # byte pieces are few: set them by index, not a where over all
        p = np.flatnonzero(partial)
        at[p] = np.maximum(np.minimum(ge.take(p), keys.n_chars) - 1, pos.take(p))
    # mixed tokens: characters of two or more scripts of their own (the script changes
    # between the first of them, `at`, and the last)
    own = tb.own_script
    n_last = before.take(np.clip(ge, 1, keys.n_chars))  # those up to the token's last character
    mixed = (keys.own_at.take(n_last) > at) & (own.take(at) > U.ZINH)
    if partial is not None:
        mixed &= ~partial
    maybe = np.flatnonzero(mixed)
    if maybe.size:  # the script changed between the first and the last of them
        changes = keys.script_changes
        maybe = maybe[changes.take(n_last[maybe] - 1) > changes.take(before.take(at[maybe]))]
    if maybe.size:  # Japanese: 1-2% of tokens (kanji and kana); others: none (METRICS.md)
        # every character of those tokens, token by token, in order
        lengths = ge[maybe] - gs[maybe]
        starts = np.cumsum(lengths) - lengths
        which = np.repeat(np.arange(maybe.size), lengths)
        pos = np.arange(lengths.sum()) - np.repeat(starts - gs[maybe], lengths)
        script = own.take(pos)
        keep = script > U.ZINH
        which, pos = which[keep], pos[keep]
        pairs, first, counts = np.unique(
            which * 256 + script[keep], return_index=True, return_counts=True
        )
        at[maybe] = pos[first[_drawn(pairs // 256, first, counts, maybe, tb, who)]]
    return at


def _drawn(tok: np.ndarray, first: np.ndarray, counts: np.ndarray, maybe, tb, who) -> np.ndarray:
    """For each mixed token (`tok`: its number among them, per (token, script) pair sorted by
    token; `first`: where the pair's script first occurs in the token; `counts`: its
    characters), the pair of the script it counts in: script s with probability
    counts(s) / the token's characters of a script of its own, so that a script's count is
    in expectation the token split in fractions by characters, and every count an integer
    (exact sums across batches, processes and tasks). The draw is a hash of the token's start
    in its document, its id and its document's length: the same token of the same document
    draws the same script whatever the batch, order or process."""
    order = np.lexsort((first, tok))  # each token's scripts in the order they occur
    tok, counts = tok[order], counts[order]
    group = np.flatnonzero(np.diff(tok, prepend=-1))  # where each token's pairs begin
    sizes = np.diff(group, append=len(tok))
    cum = np.cumsum(counts)
    before = np.repeat(cum[group] - counts[group], sizes)
    within = cum - before  # the token's characters up to and including this script
    total = within[group + sizes - 1]
    starts, ids, tok_doc = who
    doc = tok_doc[maybe]
    length = np.diff(tb.doc_offsets)[doc]
    key = mix64(
        mix64(np.asarray(starts[maybe], np.uint64))
        ^ mix64(np.asarray(ids[maybe], np.uint64) + np.uint64(1 << 40))
        ^ np.asarray(length, np.uint64)
    )
    r = (key % np.asarray(total, np.uint64)).astype(np.int64)  # uniform in [0, total)
    hit = np.flatnonzero(within > np.repeat(r, sizes))
    chosen = hit[np.unique(tok[hit], return_index=True)[1]]
    return order[chosen]


def _mark_vocab(acc, keys: _Keys, tokens, ids, doc_lang, tok_doc, t_script) -> None:
    """Mark the ids used in all, and count them per language and per script (each token in
    the script t_script gives it): the rows' token-id histograms (a group's is only made
    once a token of it is seen)."""
    acc.vocab_all[ids] = True
    langs = keys.groups.run_lang
    if len(langs) == 1 and ids.size:  # the usual batch: one language, no comparisons
        acc.count_ids(acc.vocab_lang, langs[0], ids)
    else:
        acc.count_ids(acc.vocab_lang, doc_lang[tok_doc], ids)
    scripts = keys.groups.present[tokens.any(axis=1)]  # the scripts tokens start in
    if len(scripts) == 1:
        acc.count_ids(acc.vocab_script, scripts[0], ids)
    elif len(scripts) > 1:
        acc.count_ids(acc.vocab_script, t_script, ids)


def _overlapped_twice(ss, se, ws, we) -> np.ndarray:
    """Which words [ws, we) two or more spans overlap, of non-empty spans [ss, se) in order
    (ss sorted): the spans starting before we, minus those ending by ws, is 2 or more."""
    # Those ending by ws are the first b (by the running maximum of the ends), so the count
    # is 2 or more exactly when span b + 1 starts before we: one search, not two. The ends
    # are mostly sorted already, and checking costs a fifth of the running maximum.
    if se.size and not (se[1:] >= se[:-1]).all():
        se = np.maximum.accumulate(se)
    b = np.searchsorted(se, ws, "right")
    return np.append(ss, np.iinfo(np.int64).max).take(b + 1, mode="clip") < we


def _detail_checks(acc, texts, tb, keys: _Keys, doc_lang, detail, enc, came, gs, ge, index) -> dict:
    """Checks that call the tokenizer once per document, on the detail subset; returns their
    (k x documents) counts by name."""
    tok = acc.tok
    docs = np.flatnonzero(detail)
    if docs.size == 0:
        return {}
    ids, _, _, per_doc = enc
    pre = came.pre if came is not None else None
    decoded_by = (came.decoded if came is not None else None) or {}
    off = tb.doc_offsets
    counts = {"pretoken_chars": keys.base["chars"] * detail}
    if capabilities(tok).offsets == "pre_tokens":  # its tokens are its pre-tokens
        sel = np.repeat(detail, per_doc) & (ge > gs)
        return counts | _pretoken_counts(tb, keys, detail, gs[sel], ge[sel])
    bounds = np.concatenate(([0], np.cumsum(per_doc))).tolist()
    se, n_spans = _pre_token_spans(tok, texts, docs, pre)
    rt_fail = []
    # A document's decoded text came with its encode where the kind can (an HF tokenizer's
    # decode_batch on the encoding thread, which lets go of the interpreter); the others are
    # decoded here, one call each.
    for i in docs.tolist():
        text = texts[i]
        doc_ids = ids[bounds[i] : bounds[i + 1]]  # an array: decode makes its list at once
        decoded = decoded_by.get(i)
        if decoded is None:
            decoded = tok.decode(doc_ids)
        after = tok.normalize(text)
        if decoded != text:
            rt_fail.append(i)
            had_unk = acc.unk_id is not None and bool((doc_ids == acc.unk_id).any())
            changes = acc.roundtrip.setdefault(int(doc_lang[i]), roundtrip.new_changes())
            roundtrip.record(
                changes,
                text,
                decoded,
                after,
                tok.decode([acc.unk_id]) if had_unk else None,
                (index, i),
            )
        norm = acc.normalization
        norm["checked_docs"] += 1
        if after != text:
            norm["changed_docs"] += 1
            if len(norm["examples"]) < NORMALIZATION_EXAMPLES:
                norm["examples"].append(
                    {**roundtrip.diff_example(text, after), "order": (index, i)}
                )
    span_doc = np.repeat(docs, n_spans)
    keep = (se[:, 1] > se[:, 0]) & (se[:, 0] < off[span_doc + 1] - off[span_doc])
    se = se[keep] + off[span_doc[keep], None]
    # words are counted even if no pre-token came back
    counts |= _pretoken_counts(tb, keys, detail, se[:, 0], se[:, 1])
    # a document's round trip counts in its dominant script
    doc_key = keys.dominant_row * keys.n + np.arange(keys.n)
    counts["roundtrip_checked"] = keys.count(doc_key[docs])
    counts["roundtrip_failures"] = keys.count(doc_key[np.asarray(rt_fail, dtype=np.int64)])
    return counts


def _pre_token_spans(tok, texts, docs: np.ndarray, pre) -> tuple[np.ndarray, list[int]]:
    """The pre-tokens of documents `docs` (local code-point spans, document after document)
    and how many each has: those that came with the encode (`pre`, PreTokens), the others
    from the tokenizer's pre_tokenize, one call for all of them."""
    came = {} if pre is None else dict(zip(pre.docs.tolist(), range(len(pre.docs))))
    rest = [i for i in docs.tolist() if i not in came]
    if not came:  # the usual case: every document's pre-tokens from pre_tokenize
        spans, counts = tok.pre_tokenize([texts[i] for i in rest])
        return spans, counts.tolist()
    got = dict(zip(rest, _split_by(*tok.pre_tokenize([texts[i] for i in rest]))))
    at = np.concatenate(([0], np.cumsum(pre.per_doc))).tolist()
    for i, k in came.items():
        got[i] = pre.spans[at[k] : at[k + 1]]
    parts = [got[i] for i in docs.tolist()]
    return np.concatenate([np.zeros((0, 2), np.int64), *parts]), [len(p) for p in parts]


def _split_by(spans: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """(n, 2) spans end to end cut into each text's, `counts` a text."""
    return np.split(spans, np.cumsum(counts)[:-1]) if len(counts) else []


def _pretoken_counts(tb, keys: _Keys, detail, ps, pe) -> dict:
    """Pre-token counts of the detail documents from the pre-tokens' global code-point
    spans (non-empty, in document order): pre-tokens, those whose first code point is a
    combining mark, a ZWJ or a ZWNJ (the pre-tokenizer cut a word there), and the words of
    spaced scripts that two or more pre-tokens overlap (words the pre-tokenizer cuts)."""
    # A pre-token belongs to the script of its first character (a mark or joiner resolves
    # to the letter before it, fertility.unicode), so a cut Bengali word counts as Bengali.
    key = keys.char[ps]
    first = tb.cps[ps]
    zwj, zwnj = first == 0x200D, first == 0x200C
    mark = tb.mark_or_joiner(ps) & ~zwj & ~zwnj
    in_detail = detail[tb.doc_of_char[tb.word_starts]]
    cut = _overlapped_twice(ps, pe, tb.word_starts[in_detail], tb.word_ends[in_detail])
    return {
        "pretokens": keys.count(key),
        "pretoken_mark_initial": keys.count(key[mark]),
        "pretoken_zwj_initial": keys.count(key[zwj]),
        "pretoken_zwnj_initial": keys.count(key[zwnj]),
        "pretoken_words": keys.base["words"] * detail,
        "pretoken_cut_words": keys.count(keys.word[in_detail][cut]) * keys.spaced,
    }


def _take_samples(acc, texts, tb, dominant, ids, starts, ends, per_doc, index) -> None:
    """Keep, per script, the `samples_per_script` documents that show a tokenizer's trouble
    there best: written in that script (nine in ten of their letters), long enough to read
    (80 characters), most tokens per character (where marks start tokens and characters
    fall into byte pieces). Their "order" ranks them (smaller is better, then corpus order),
    so merging the workers' samples keeps the same ones; a text repeated is kept as often
    as it ranks (the HTML shows it once), as a worker cannot see another's."""
    min_chars = 80  # a shorter sample is shown only where no longer one exists

    def foreign(i: int, cut: int, script: int) -> bool:
        """Under nine in ten of the letters of document i's first `cut` characters are in
        `script` (Unicode's Script property): a Latin-majority line of placeholders around
        Amharic words is no Latin sample, a Japanese line no Han one."""
        if U.SCRIPTS[script] in ("?", "Zzzz"):  # no script to be in
            return False
        start = int(tb.doc_offsets[i])
        letters, own = tb.script_letters(start, start + cut, script)
        return not letters or own < 0.9 * letters

    n_chars = np.diff(tb.doc_offsets)  # each document's length in code points
    tpc = per_doc / np.maximum(n_chars, 1)
    bounds = np.concatenate(([0], np.cumsum(per_doc)))
    k = acc.samples_per_script
    for s in np.flatnonzero(np.bincount(dominant)).tolist():  # each script present
        kept = acc.samples.setdefault(int(s), [])
        docs = np.flatnonzero(dominant == s)
        # the best 4k by length, then tokens per character: the only ones that could enter
        rank = np.lexsort((-tpc[docs], n_chars[docs] < min_chars))
        for i in docs[rank[: 4 * k]].tolist():
            rest = (bool(n_chars[i] < min_chars), -round(float(tpc[i]), 6), index, i)
            full = len(kept) >= k
            if full and (False, *rest[:2]) > kept[-1]["order"][:3]:
                break  # nor any after it: they rank no better, and the last kept only improves
            if full and (False, *rest) >= kept[-1]["order"]:
                continue  # not better than the last kept even if in its script
            cut = min(len(texts[i]), SAMPLE_CHARS)
            text = texts[i][:cut]
            order = (foreign(i, cut, int(s)), *rest)
            if full and order >= kept[-1]["order"]:
                continue
            t0, t1 = bounds[i], bounds[i + 1]
            s0, e0 = starts[t0:t1], ends[t0:t1]
            keep = s0 < cut
            kept.append(
                {
                    "text": text,
                    "truncated": cut < len(texts[i]),
                    "spans": np.stack([s0[keep], np.minimum(e0[keep], cut)], axis=1).tolist(),
                    "ids": ids[t0:t1][keep].tolist(),  # the HTML's hover
                    "order": order,
                }
            )
            kept.sort(key=lambda x: x["order"])
            del kept[k:]


def _keep_rows(n: int, state) -> int:
    """How many of this batch's documents the per-document table keeps (corpus order)."""
    room = state.keep_docs - state.docs_done
    if room < n:
        state.docs_table_full = True
    return max(0, min(room, n))
