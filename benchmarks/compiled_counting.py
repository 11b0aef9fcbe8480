"""What the per-token counting would cost as a compiled loop: one part of it, the boundaries
between tokens (`fertility.measure.batch._boundary_counts`: token boundaries, those inside a
character or grapheme, words two tokens overlap), timed as numpy does it today and as a C
loop built here with the system's compiler, on the same batches, with the counts compared.

    python benchmarks/compiled_counting.py --join 50 --keep /tmp/real6j50
    python benchmarks/compiled_counting.py -t /tmp/fertility-bench/real-o200k-32000/tokenizer.json \
        --keep /tmp/c25j5

The options are benchmarks/cost_model.py's (the same corpus and files). Issue #36's long-document
rows need the per-token counting far cheaper than numpy makes it (cost_model.py); a compiled
loop is a build dependency the project does not have (numba, or an extension module), so this
script measures what one would give before anyone decides on it. Nothing here is used by the
package. It needs a C compiler (`cc`), and skips with a message where there is none.

For each tokenizer and batch: where its tokens sit (`_placed`), then `_boundary_counts` (numpy)
and the C loop, each timed in thread CPU seconds, summed over the batches, best of --repeat.
The C side's time includes making its inputs contiguous int64 and its outputs the same
(k x documents) matrices. Every batch's three matrices must be equal, or the script stops.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cost_model import arguments, pass_state, prepare, with_corpus  # noqa: E402

from fertility import unicode as U  # noqa: E402
from fertility.measure import batch as B  # noqa: E402
from fertility.measure.counters import TokenizerAccumulator  # noqa: E402
from fertility.threads import encoding_threads  # noqa: E402

# One pass over the tokens, one over the words; the same rules as _boundary_counts.
KERNEL = r"""
#include <stdint.h>

void boundary_counts(int64_t T, const int64_t *gs, const int64_t *ge, const int64_t *pos,
                     const int64_t *tok_doc, const int64_t *key, const uint8_t *gstart,
                     int64_t W, const int64_t *ws, const int64_t *we, const int64_t *word_key,
                     int64_t *ss, int64_t *se, int64_t *boundaries, int64_t *gsplit,
                     int64_t *continued)
{
    /* consecutive non-empty tokens of one document; a boundary inside the previous
       token's span (a character's bytes) or inside a grapheme cluster splits a letter */
    int64_t prev = -1, S = 0;
    for (int64_t t = 0; t < T; t++) {
        if (ge[t] <= gs[t])
            continue;
        if (prev >= 0 && tok_doc[prev] == tok_doc[t]) {
            boundaries[key[t]]++;
            if (gs[t] < ge[prev] || !gstart[pos[t]])
                gsplit[key[t]]++;
        }
        prev = t;
        ss[S] = gs[t];
        se[S] = S && se[S - 1] > ge[t] ? se[S - 1] : ge[t]; /* the ends' running maximum */
        S++;
    }
    /* a word [ws, we) is continued when the span after the first one not ending by ws
       also starts before we (_overlapped_twice); words and spans are in text order */
    int64_t b = 0;
    for (int64_t w = 0; w < W; w++) {
        while (b < S && se[b] <= ws[w])
            b++;
        if (b + 1 < S && ss[b + 1] < we[w])
            continued[word_key[w]]++;
    }
}
"""


def build(folder: Path):
    """The kernel compiled (`cc -O2`) and loaded, or None without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = folder / "kernel.c", folder / "kernel.so"
    src.write_text(KERNEL)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    fn = ctypes.CDLL(str(lib)).boundary_counts
    fn.restype = None
    return fn


def compiled(fn, tb, keys, key, gs, ge, pos, tok_doc) -> dict:
    """_boundary_counts' three matrices from the C loop."""

    def i64(a):
        return np.ascontiguousarray(a, dtype=np.int64)

    def ptr(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    arrays = [i64(gs), i64(ge), i64(pos), i64(tok_doc), i64(key)]
    gstart = np.ascontiguousarray(tb.gstart).view(np.uint8)
    words = [i64(tb.word_starts), i64(tb.word_ends), i64(keys.word)]
    scratch = [np.empty(len(gs), np.int64) for _ in range(2)]
    out = [np.zeros(keys.k * keys.n, np.int64) for _ in range(3)]
    fn(
        ctypes.c_int64(len(gs)),
        *map(ptr, arrays),
        ptr(gstart),
        ctypes.c_int64(len(words[0])),
        *map(ptr, words + scratch + out),
    )
    boundaries, gsplit, continued = (o.reshape(keys.k, keys.n) for o in out)
    return {
        "token_boundaries": boundaries,
        "grapheme_split_boundaries": gsplit,
        "continued_words": continued * keys.spaced,
    }


def run(args, corpus_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="fert-kernel-") as tmp:
        fn = build(Path(tmp))
        if fn is None:
            print("no C compiler (cc): nothing to compare")
            return
        toks, batches, _ = prepare(args, corpus_dir)
        with encoding_threads():
            encoded = [[tok.encode_flat(b.texts) for tok in toks] for b in batches]
        state = pass_state()
        accs = [TokenizerAccumulator(tok) for tok in toks]
        per = {tok.label: [0.0, 0.0, 0] for tok in toks}  # numpy s, C s, tokens
        for b, encs in zip(batches, encoded):
            doc_lang, _ = B._lang_ids(b.langs, state)
            tb = U.analyze_texts(b.texts)
            keys = B._Keys(tb, doc_lang, len(state.langs))
            for acc, enc in zip(accs, encs):
                tok_doc, gs, ge, pos, _, _, key = B._placed(acc, enc, tb, keys)
                nonempty = ge > gs
                best = [float("inf"), float("inf")]
                for _ in range(args.repeat):
                    t = time.thread_time()
                    mine = B._boundary_counts(tb, keys, key, gs, ge, pos, tok_doc, nonempty)
                    best[0] = min(best[0], time.thread_time() - t)
                    t = time.thread_time()
                    theirs = compiled(fn, tb, keys, key, gs, ge, pos, tok_doc)
                    best[1] = min(best[1], time.thread_time() - t)
                for name, m in mine.items():
                    if not np.array_equal(m, theirs[name]):
                        sys.exit(f"{acc.tok.label}: {name} differs between numpy and C")
                row = per[acc.tok.label]
                row[0] += best[0]
                row[1] += best[1]
                row[2] += len(gs)
    w = max(12, *(len(label) for label in per))
    print(f"{'tokenizer':{w}s}     tokens   numpy (_boundary_counts)    C loop    numpy/C")
    for label, (numpy_s, c_s, n) in per.items():
        print(
            f"{label:{w}s} {n:10,d}   {numpy_s:6.3f} s {1e9 * numpy_s / n:5.1f} ns/token   "
            f"{c_s:6.3f} s {1e9 * c_s / n:4.1f} ns/token  {numpy_s / c_s:5.1f}x"
        )
    print("every batch's token_boundaries, grapheme_split_boundaries, continued_words: equal")


def main() -> None:
    with_corpus(arguments(__doc__.splitlines()[0]).parse_args(), run)


if __name__ == "__main__":
    main()
