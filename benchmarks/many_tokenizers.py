"""`fertility report` with several real tokenizer files against their own libraries run in turn
on the same documents, each side a whole process, alternated (issue #36's rows "four real
files" and "14 real files, 1.7 MB").

    python benchmarks/many_tokenizers.py                 # --set four: 6 MB of real text, 3 rounds
    python benchmarks/many_tokenizers.py --set all       # every fixture file, 1.7 MB, 3 rounds
    python benchmarks/many_tokenizers.py --mb 6 --rounds 5 --keep /tmp/real6
    python benchmarks/many_tokenizers.py --profile       # one more run of ours under cProfile
    python benchmarks/many_tokenizers.py --check         # then both sides' token counts compared
    python benchmarks/many_tokenizers.py --join 100      # long documents: 100 lines each (~6 KB)
    python benchmarks/many_tokenizers.py --floor         # and ours with the measuring taken out

Files, from the real-world fixtures (tests/realworld/build.py), named as
tests/realworld/results.py's TOKENIZERS names them (label=file#split):
  --set four: o200k_base.tiktoken, cl100k_base.tiktoken, Mistral's SentencePiece
              tokenizer.model.v1 and MiniLM's tokenizer.json;
  --set all:  every tokenizer file the fixtures hold (12 at build version 5): the four above,
              r50k_base and Whisper's multilingual rank files (GPT-2 split), Llama 3's and
              Llama 4's tokenizer.model (rank files; `#llama3` and `#llama4` are the cl100k
              and o200k splits, fertility.tokenizers.patterns.ALIASES), Mistral's v3
              SentencePiece model, Mistral's Tekken JSON and the two byte-level BPE
              tokenizer.json files build.py trains.
Each file's own library, as its users call it:
  - rank files: tiktoken, `Encoding(pat_str=FAMILIES[family], special_tokens={})`'s
    `encode_ordinary_batch` (family: the `#split` given, else the one the file name implies);
  - SentencePiece models: sentencepiece, `encode` of a list (no BOS/EOS);
  - tokenizer.json: HF tokenizers, `encode_batch` without special tokens, truncation and
    padding off (as fertility measures it and tests/realworld/test_counts.py compares it:
    MiniLM's file pads every text to 128 tokens, work that is no part of counting them);
  - Tekken: mistral-common's `Tekkenizer.encode(text, bos=False, eos=False)`, one text at a
    time (it has no batch call), as tests/realworld/test_loaders.py compares it.
Both sides read the same lines (the corpus of benchmarks/analyze_throughput.py: every fixture
language repeated to size, one document per line) in batches of 1,000; the raw side runs the
libraries one after another, each over the whole corpus. Each round prints both sides' wall, CPU
and peak RSS; the summary gives the median of the rounds' ratios (raw wall / our wall) and
their range. --check runs the raw side once more, untimed, counting tokens, and compares each
file's total with the report's. --floor times a third process each round: ours with
`fertility.measure.passes.measure_batch` made a no-op, so that reading, encoding (the spans
included), loading and the report's end remain and only the measuring is gone. Its ratio is
the most any work on the measuring alone could reach; below the goal, the encoding is what
must get cheaper.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))  # tests.realworld.results: the fixtures' list of tokenizer files
from analyze_throughput import (  # noqa: E402
    FERTILITY,
    PY,
    RAW_BATCHES,
    floor_cmd,
    real_corpus,
    realworld_root,
    timed,
)
from timing import steal_text  # noqa: E402

from fertility.tokenizers.patterns import ALIASES  # noqa: E402
from tests.realworld.results import TOKENIZERS  # noqa: E402

SETS = {"four": ["o200k", "cl100k", "mistral-v1", "minilm"], "all": list(TOKENIZERS)}
DEFAULT_MB = {"four": 6.0, "all": 1.7}

# argv: corpus, repository, JSON [[library, path, family], ...], "count" or "time"
RAW = (
    RAW_BATCHES
    + r"""
import json, sys
import sentencepiece, tiktoken, tokenizers
from tiktoken.load import load_tiktoken_bpe
sys.path.insert(0, sys.argv[2])
from fertility.tokenizers.patterns import FAMILIES

def rank_file(path, family):
    return tiktoken.Encoding(family, pat_str=FAMILIES[family],
                             mergeable_ranks=load_tiktoken_bpe(path), special_tokens={}
                             ).encode_ordinary_batch

def sentencepiece_model(path, _):
    return sentencepiece.SentencePieceProcessor(model_file=path).encode

def tokenizer_json(path, _):
    t = tokenizers.Tokenizer.from_file(path)
    t.no_truncation()
    t.no_padding()
    return lambda b: t.encode_batch(b, add_special_tokens=False)

def tekken(path, _):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    t = Tekkenizer.from_file(path)
    return lambda b: [t.encode(s, bos=False, eos=False) for s in b]

encs = [globals()[lib](path, family) for lib, path, family in json.loads(sys.argv[3])]
count = sys.argv[4] == "count"
totals = []
for encode in encs:  # the libraries in turn, each over the whole corpus
    n = 0
    for buf in batches(sys.argv[1]):
        r = encode(buf)
        n += sum(map(len, r)) if count else 0
    totals.append(n)
print(json.dumps(totals))
"""
)


def library(spec: str) -> tuple[str, str | None]:
    """The raw side's loader for a fixture file (a function of RAW) and a rank file's split."""
    name, _, split = spec.partition("#")
    base = Path(name).name
    if base.endswith(".tiktoken") or split:
        stem = base.removesuffix(".tiktoken")
        return "rank_file", ALIASES.get(split or stem, split or stem)
    if base == "tokenizer.json":
        return "tokenizer_json", None
    if base.startswith("tekken") and base.endswith(".json"):
        return "tekken", None
    return "sentencepiece_model", None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=list(SETS), default="four", help="which files (default four)")
    ap.add_argument("--mb", type=float, help="corpus size (default 6 for four, 1.7 for all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--join", type=int, default=1, help="lines per document (default 1)")
    ap.add_argument("--keep", help="folder to keep the corpus in (reused if present)")
    ap.add_argument("--profile", action="store_true", help="then one run of ours under cProfile")
    ap.add_argument("--check", action="store_true", help="then compare the token counts")
    ap.add_argument("--floor", action="store_true", help="and ours with the measuring taken out")
    args = ap.parse_args()
    labels = SETS[args.set]
    mb = DEFAULT_MB[args.set] if args.mb is None else args.mb
    root = realworld_root() / "tokenizers"
    specs = [f"{root / TOKENIZERS[lab]}" for lab in labels]
    libs = [[lib, spec.partition("#")[0], fam] for spec in specs for lib, fam in [library(spec)]]
    tmp = Path(tempfile.mkdtemp(prefix="fert-many-"))
    try:
        corpus = Path(args.keep) if args.keep else tmp / "corpus"
        if not corpus.exists():
            real_corpus(corpus, mb, args.join)
        size = sum(p.stat().st_size for p in corpus.glob("*.txt")) / 1e6
        raw = [PY, "-c", RAW, str(corpus), str(REPO), json.dumps(libs)]
        ours = [FERTILITY, "report", str(corpus), "--format", "json", "-o", str(tmp / "r.json")]
        ours += ["-q", *(x for lab, spec in zip(labels, specs) for x in ("-t", f"{lab}={spec}"))]
        print(f"corpus: {size:.1f} MB real text; tokenizers: {', '.join(specs)}")
        # (its own output: --check reads ours)
        floor = floor_cmd([str(tmp / "f.json") if x == str(tmp / "r.json") else x for x in ours])
        ratios, rss, floors = [], [], []
        for i in range(args.rounds):
            a, b = timed(raw + ["time"]), timed(ours)
            ratios.append(a["wall"] / b["wall"])
            rss.append(b["rss"])
            print(
                f"round {i + 1}: raw {a['wall']:.2f} s wall, {a['cpu']:.2f} s CPU, "
                f"{a['rss']:.0f} MiB{steal_text(a)}; ours {b['wall']:.2f} s wall, "
                f"{b['cpu']:.2f} s CPU, {b['rss']:.0f} MiB{steal_text(b)}; "
                f"ratio {ratios[-1]:.3f}",
                flush=True,
            )
            if args.floor:
                f = timed(floor)
                floors.append(a["wall"] / f["wall"])
                print(
                    f"  floor (no measuring): {f['wall']:.2f} s wall, {f['cpu']:.2f} s CPU, "
                    f"{f['rss']:.0f} MiB{steal_text(f)}; raw/floor {floors[-1]:.3f}",
                    flush=True,
                )
        print(
            f"ratio raw/ours (wall), median of {len(ratios)}: {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f}); peak RSS ours {max(rss):.0f} MiB "
            f"(goal >= 0.9)"
        )
        if floors:
            print(
                f"ratio raw/floor (wall), median of {len(floors)}: "
                f"{statistics.median(floors):.3f} (range {min(floors):.3f}-{max(floors):.3f}): "
                "the most the measuring's own work could give"
            )
        if args.check:
            theirs = json.loads(timed(raw + ["count"])["out"])
            report = json.loads((tmp / "r.json").read_text())["tokenizers"]
            mine = [next(r["tokens"] for r in t["rows"] if r["group"] == "all") for t in report]
            for lab, (lib, _, fam), n, m in zip(labels, libs, theirs, mine):
                how = f"{lib}, {fam}" if fam else lib
                print(f"check {lab} ({how}): library {n:,} tokens, report {m:,}", end="")
                print("" if n == m else "  DIFFERENT")
        if args.profile:
            prof = tmp / "p.prof"
            timed([PY, "-m", "cProfile", "-o", str(prof), *ours, "--workers", "1"])
            import pstats

            pstats.Stats(str(prof)).sort_stats("cumulative").print_stats("fertility", 25)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
