"""One batch of documents through every tokenizer's counters (see fertility.measure)."""

from __future__ import annotations

import numpy as np

from fertility import unicode as U
from fertility.measure import roundtrip
from fertility.measure.counters import COUNTS, NOSPACE, NS, C
from fertility.tokenizers.base import concat_encoded
from fertility.tokenizers.pretokenizer import PRETOKENIZER

SAMPLE_CHARS = 600  # longest stretch of a document kept as a sample with token boundaries


def encode_flat(tok, texts: list[str]):
    """ids, starts, ends (code points, local to each document) and tokens per document."""
    if hasattr(tok, "encode_flat"):
        return tok.encode_flat(texts)
    return concat_encoded(tok.encode_batch(texts))


def _table(lang_idx, script_idx, n_langs):
    """Counts per language and per script from one bincount over (language, script) pairs."""
    key = np.asarray(lang_idx, dtype=np.int64) * NS + script_idx
    m = np.bincount(key, minlength=n_langs * NS).reshape(n_langs, NS)
    return m.sum(axis=1), m.sum(axis=0)


def _marginals(per_doc: np.ndarray, doc_lang: np.ndarray, n_langs: int, present: np.ndarray):
    """A (documents x present scripts) count matrix -> counts per language and per script."""
    lang = np.bincount(doc_lang, weights=per_doc.sum(axis=1), minlength=n_langs)[:n_langs]
    script = np.zeros(NS, np.int64)
    script[present] = per_doc.sum(axis=0)
    return lang.astype(np.int64), script


def _per_doc(key: np.ndarray, n: int, k: int) -> np.ndarray:
    """Counts per (document, script) from keys document * k + compact script index, where
    the k columns are the scripts present in the batch (usually 1-3 of the ~170)."""
    return np.bincount(key, minlength=n * k).reshape(n, k)


def _base_counts(tb: U.TextBatch, doc_lang, n_langs, char_key, pds_chars, present):
    """Counts that do not depend on the tokenizer, computed once per batch, all from
    (document, script) matrices: one pass over the characters per count. Returns the
    (languages x counts) and (scripts x counts) tables and, per document, its graphemes and
    bytes (for the per-document table)."""
    n, k = tb.n_docs, len(present)
    lang = np.zeros((n_langs, len(COUNTS)), np.int64)
    script = np.zeros((NS, len(COUNTS)), np.int64)

    def put(name, per_doc):
        lang[:, C[name]], script[:, C[name]] = _marginals(per_doc, doc_lang, n_langs, present)

    lang[:, C["documents"]] = np.bincount(doc_lang, minlength=n_langs)[:n_langs]
    script[present, C["documents"]] = (pds_chars > 0).sum(axis=0)
    put("chars", pds_chars)
    # UTF-8 length is 1-4: one integer bincount over (key, length) instead of float weights
    by_len = np.bincount(char_key * 4 + (tb.nbytes - 1), minlength=n * k * 4)
    pds_bytes = by_len.reshape(n, k, 4) @ np.arange(1, 5)
    put("bytes", pds_bytes)
    pds_graphemes = _per_doc(char_key[tb.gstart], n, k)
    put("graphemes", pds_graphemes)
    ws = tb.word_starts
    put("words", _per_doc(char_key[ws][~NOSPACE[tb.script[ws]]], n, k))
    put("nospace_chars", pds_chars * NOSPACE[present])
    return lang, script, pds_graphemes.sum(axis=1), pds_bytes.sum(axis=1)


def measure_batch(batch, encoded, accs, state, index: int = 0) -> None:
    """Measure batch number `index` of the corpus (a fertility.corpus.DocBatch). `encoded`:
    encode_flat's result for each
    accumulator's tokenizer, same order; None for a batch another worker process measures
    (only the bookkeeping that depends on corpus order is done: language ids, the detail
    subset, the position of the per-document table)."""
    n = len(batch)
    texts, langs = batch.texts, batch.langs
    for lang in dict.fromkeys(langs):  # new labels numbered in corpus order
        state.langs.setdefault(lang, len(state.langs))
    doc_lang = np.fromiter(map(state.langs.__getitem__, langs), dtype=np.int64, count=n)
    n_langs = len(state.langs)
    detail = _detail_mask(doc_lang, state)
    keep = _keep_rows(n, state)
    state.docs_done += n
    if encoded is None:
        return
    tb = U.analyze_texts(texts)
    present = np.flatnonzero(np.bincount(tb.script, minlength=NS))
    remap = np.zeros(NS, np.int64)
    remap[present] = np.arange(len(present))
    cscript = remap[tb.script]
    char_key = tb.doc_of_char * len(present) + cscript
    pds_chars = _per_doc(char_key, n, len(present))
    dominant = present[pds_chars.argmax(axis=1)] if len(present) else np.zeros(n, np.int64)
    base_lang, base_script, doc_graphemes, doc_bytes = _base_counts(
        tb, doc_lang, n_langs, char_key, pds_chars, present
    )
    doc_tokens = {}
    for acc, enc in zip(accs, encoded):
        acc.counts.add_table(base_lang, base_script)
        pds_tokens = _measure_tokenizer(
            acc, enc, texts, tb, doc_lang, n_langs, detail, dominant, present, cscript, index
        )
        acc.boot.add(doc_lang, n_langs, pds_chars, pds_tokens, present)
        doc_tokens[acc.tok.label] = pds_tokens.sum(axis=1)
    if keep:
        state.doc_rows.append(
            {
                "order": index,
                "lang": langs[:keep],
                "source": batch.sources[:keep],
                "line": batch.lines[:keep],
                "script": dominant[:keep],
                "chars": np.diff(tb.doc_offsets)[:keep],
                "graphemes": doc_graphemes[:keep],
                "bytes": doc_bytes[:keep],
                "tokens": {label: t[:keep] for label, t in doc_tokens.items()},
            }
        )
    state.docs_measured += n
    state.bytes_measured += int(doc_bytes.sum())


def _detail_mask(doc_lang, state) -> np.ndarray:
    if state.detail_docs is None:
        return np.ones(len(doc_lang), dtype=bool)
    mask = np.zeros(len(doc_lang), dtype=bool)
    for lang in np.unique(doc_lang).tolist():  # the first documents of each language
        seen = state.detail_seen.get(lang, 0)
        if seen < state.detail_docs:
            take = np.flatnonzero(doc_lang == lang)[: state.detail_docs - seen]
            mask[take] = True
            state.detail_seen[lang] = seen + len(take)
    return mask


def _measure_tokenizer(
    acc, enc, texts, tb, doc_lang, n_langs, detail, dominant, present, cscript, index
) -> np.ndarray:
    # Documents are never empty (fertility.corpus), so every batch has characters.
    counts = acc.counts
    ids, starts, ends, per_doc = enc
    n = len(texts)
    tok_doc = np.repeat(np.arange(n, dtype=np.int64), per_doc)
    off = tb.doc_offsets
    gs, ge = starts + off[tok_doc], ends + off[tok_doc]
    # A token that covers no text (at a document's end) belongs to the last character.
    pos = np.minimum(gs, off[tok_doc + 1] - 1)
    t_script = tb.script[pos]
    t_lang = doc_lang[tok_doc]

    def put(name, sel):
        counts.add(name, *_table(t_lang[sel], t_script[sel], n_langs))

    k = len(present)
    pds_tokens = _per_doc(tok_doc * k + cscript[pos], n, k)
    for name, matrix in (("tokens", pds_tokens), ("word_tokens", pds_tokens * ~NOSPACE[present])):
        counts.add(name, *_marginals(matrix, doc_lang, n_langs, present))
    if acc.track_vocab:
        partial = acc.partial[ids]
        put("byte_fallback_tokens", partial)
        # the character whose bytes a partial token cuts is its last one (its first may be a
        # whole leading space)
        last = np.maximum(ge - 1, gs)
        acc.add_chars(acc.byte_fallback_chars, t_script[partial], tb.cps[last[partial]])
        if acc.unk_id is not None:
            unk = ids == acc.unk_id
            put("unk_tokens", unk)
            acc.add_chars(acc.unk_chars, t_script[unk], tb.cps[pos[unk]])
        acc.vocab_all[ids] = True
        acc.mark_vocab(acc.vocab_lang, t_lang, ids)
        acc.mark_vocab(acc.vocab_script, t_script.astype(np.int64), ids)

    nonempty = ge > gs
    new_start = np.ones(len(gs), dtype=bool)
    new_start[1:] = (gs[1:] != gs[:-1]) | (tok_doc[1:] != tok_doc[:-1])
    put("mark_initial_tokens", new_start & nonempty & U.is_mark_or_joiner(tb.cps[pos]))

    # Boundaries between consecutive non-empty tokens of one document; one that falls inside a
    # character's bytes or inside a grapheme cluster splits what a reader sees as one letter.
    ne = np.flatnonzero(nonempty)
    same = tok_doc[ne[1:]] == tok_doc[ne[:-1]]
    cur, prev = ne[1:][same], ne[:-1][same]
    inside = (gs[cur] < ge[prev]) | ~tb.gstart[pos[cur]]
    put("token_boundaries", cur)
    put("grapheme_split_boundaries", cur[inside])

    # A word counts as continued when two or more tokens overlap it.
    gsn, gen = gs[ne], np.maximum.accumulate(ge[ne]) if ne.size else ge[ne]
    ws, we = tb.word_starts, tb.word_ends
    overlap = np.searchsorted(gsn, we, "left") - np.searchsorted(gen, ws, "right")
    cont = ws[(overlap >= 2) & ~NOSPACE[tb.script[ws]]]
    counts.add("continued_words", *_table(doc_lang[tb.doc_of_char[cont]], tb.script[cont], n_langs))

    _detail_checks(
        acc,
        texts,
        tb,
        doc_lang,
        n_langs,
        detail,
        dominant,
        ids,
        per_doc,
        t_script,
        tok_doc,
        gs,
        ge,
        index,
    )
    _take_samples(acc, texts, dominant, ids, starts, ends, per_doc, index)
    return pds_tokens


def _detail_checks(
    acc,
    texts,
    tb,
    doc_lang,
    n_langs,
    detail,
    dominant,
    ids,
    per_doc,
    t_script,
    tok_doc,
    gs,
    ge,
    index,
) -> None:
    """Checks that call the tokenizer once per document, on the detail subset."""
    tok, counts = acc.tok, acc.counts
    docs = np.flatnonzero(detail)
    if docs.size == 0:
        return
    off = tb.doc_offsets
    in_detail = detail[tb.doc_of_char]
    counts.add(
        "pretoken_chars",
        *_table(doc_lang[tb.doc_of_char[in_detail]], tb.script[in_detail], n_langs),
    )
    if tok.kind == PRETOKENIZER:  # its tokens are its pre-tokens
        sel = detail[tok_doc] & (ge > gs)
        _pretoken_counts(counts, tb, doc_lang, n_langs, detail, gs[sel], ge[sel])
        return
    bounds = np.concatenate(([0], np.cumsum(per_doc))).tolist()
    # Spans gathered as Python pairs and turned into one array (not one per document).
    spans, n_spans, rt_fail = [], [], []
    for i in docs.tolist():
        got = tok.pre_tokenize(texts[i])
        spans += got
        n_spans.append(len(got))
    # One decode per document: the library's decode_batch waits for the thread pool that
    # is encoding the next batches, which costs more than it saves.
    for i in docs.tolist():
        text = texts[i]
        doc_ids = ids[bounds[i] : bounds[i + 1]].tolist()
        decoded = tok.decode(doc_ids)
        after = tok.normalize(text)
        if decoded != text:
            rt_fail.append(i)
            had_unk = acc.unk_id is not None and acc.unk_id in doc_ids
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
            if len(norm["examples"]) < 5:
                norm["examples"].append(
                    {**roundtrip.diff_example(text, after), "order": (index, i)}
                )
    se = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    span_doc = np.repeat(docs, n_spans)
    keep = (se[:, 1] > se[:, 0]) & (se[:, 0] < off[span_doc + 1] - off[span_doc])
    se = se[keep] + off[span_doc[keep], None]
    # words are counted even if no pre-token came back
    _pretoken_counts(counts, tb, doc_lang, n_langs, detail, se[:, 0], se[:, 1])
    counts.add("roundtrip_checked", *_table(doc_lang[docs], dominant[docs], n_langs))
    fail = np.asarray(rt_fail, dtype=np.int64)
    counts.add("roundtrip_failures", *_table(doc_lang[fail], dominant[fail], n_langs))


def _pretoken_counts(counts, tb, doc_lang, n_langs, detail, ps, pe) -> None:
    """Pre-token counts of the detail documents from the pre-tokens' global code-point
    spans (non-empty, in document order): pre-tokens, those whose first code point is a
    combining mark, a ZWJ or a ZWNJ (the pre-tokenizer cut a word there), and the words of
    spaced scripts that two or more pre-tokens overlap (words the pre-tokenizer cuts)."""
    # A pre-token belongs to the script of its first character (a mark or joiner resolves
    # to the letter before it, fertility.unicode), so a cut Bengali word counts as Bengali.
    doc = tb.doc_of_char[ps]
    p_lang, p_script = doc_lang[doc], tb.script[ps]
    first = tb.cps[ps]
    zwj, zwnj = first == 0x200D, first == 0x200C
    mark = U.is_mark_or_joiner(first) & ~zwj & ~zwnj
    counts.add("pretokens", *_table(p_lang, p_script, n_langs))
    for name, sel in (
        ("pretoken_mark_initial", mark),
        ("pretoken_zwj_initial", zwj),
        ("pretoken_zwnj_initial", zwnj),
    ):
        counts.add(name, *_table(p_lang[sel], p_script[sel], n_langs))
    ws, we = tb.word_starts, tb.word_ends
    keep = detail[tb.doc_of_char[ws]] & ~NOSPACE[tb.script[ws]]
    ws, we = ws[keep], we[keep]
    w_lang, w_script = doc_lang[tb.doc_of_char[ws]], tb.script[ws]
    counts.add("pretoken_words", *_table(w_lang, w_script, n_langs))
    # pre-tokens overlapping [ws, we): those starting before we minus those ending by ws
    ends = np.maximum.accumulate(pe) if pe.size else pe
    overlap = np.searchsorted(ps, we, "left") - np.searchsorted(ends, ws, "right")
    cut = overlap >= 2
    counts.add("pretoken_cut_words", *_table(w_lang[cut], w_script[cut], n_langs))


def _take_samples(acc, texts, dominant, ids, starts, ends, per_doc, index) -> None:
    wanted = [
        s
        for s in np.unique(dominant).tolist()
        if len(acc.samples.get(s, ())) < acc.samples_per_script
    ]
    if not wanted:  # the usual case after the first batches
        return
    bounds = np.concatenate(([0], np.cumsum(per_doc)))
    for i in np.flatnonzero(np.isin(dominant, wanted)).tolist():  # not every document
        have = acc.samples.setdefault(int(dominant[i]), [])
        if len(have) >= acc.samples_per_script:
            continue
        cut = min(len(texts[i]), SAMPLE_CHARS)
        s, e = starts[bounds[i] : bounds[i + 1]], ends[bounds[i] : bounds[i + 1]]
        keep = s < cut
        spans = np.stack([s[keep], np.minimum(e[keep], cut)], axis=1).tolist()
        have.append(
            {
                "text": texts[i][:cut],
                "truncated": cut < len(texts[i]),
                "spans": spans,
                "ids": ids[bounds[i] : bounds[i + 1]][keep].tolist(),  # the HTML's hover
                "order": (index, i),
            }
        )


def _keep_rows(n: int, state) -> int:
    """How many of this batch's documents the per-document table keeps (corpus order)."""
    room = state.keep_docs - state.docs_done
    if room < n:
        state.docs_table_full = True
    return max(0, min(room, n))
