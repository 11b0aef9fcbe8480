"""`fertility report --precision REL` against a full pass, both timed as whole processes.

    python benchmarks/precision.py                   # 200 MB of real text, REL 0.01
    python benchmarks/precision.py --mb 2000 --rel 0.01
    python benchmarks/precision.py --mb 10000 --no-full --keep /tmp/p10g   # (b) alone
    python benchmarks/precision.py --no-full --seeds 1,2,3,4,5 --keep /tmp/p200
    python benchmarks/precision.py --no-full --seeds 1,2,3 --keep /tmp/p200 --base /tmp/old

Corpus: the fixtures' ROOT/text/<lang>.txt (tests/realworld/build.py; ROOT is
$FERTILITY_REALWORLD or ~/.cache/fertility/realworld), each language written as shuffled
copies (a fresh shuffle of its lines per copy) to LANG.txt until the corpus holds --mb MB,
every language its share. Tokenizer: the fixtures' bpe-gpt2 tokenizer.json.
  (a) full:      `fertility report DIR -t tok --format json -o full.json -q`
  (b) precision: `fertility report DIR -t tok --precision REL --seed S --format json -o p.json -q`
One run each, side by side (a then b); wall, CPU and peak RSS of each whole process
(benchmarks/timing.py). `--no-full` runs (b) alone, twice (or once per `--seeds` seed): whether
its time grows with the corpus, where (a) would take hours; with `--base TREE` each (b) is
followed by the same command from another checkout (`python -P -m fertility.cli` with TREE on
PYTHONPATH: the tree before a change), seed by seed, and their ratio. Both checkouts' modules are
compiled first (benchmarks/timing.py: compiled). Printed: both times and peak RSS,
the ratio b/a, the blocks read, and per language the sampled chars/token, its stated interval,
the full pass's value and whether it lies inside.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from timing import compiled, steal_text, timed  # benchmarks/timing.py: wall, CPU, RSS

PY = sys.executable
FERTILITY = str(Path(PY).with_name("fertility"))
REALWORLD = Path(os.environ.get("FERTILITY_REALWORLD", Path.home() / ".cache/fertility/realworld"))


def build(folder: Path, mb: float, seed: int) -> int:
    """Shuffled copies of each language's real text, `mb` MB in all; its size in bytes."""
    texts = sorted((REALWORLD / "text").glob("*.txt"))
    share = mb * 1e6 / len(texts)
    rng = random.Random(seed)
    total = 0
    for path in texts:
        lines = [x for x in path.read_text("utf-8").splitlines() if x.strip()]
        size = sum(len(x.encode()) + 1 for x in lines)
        with open(folder / path.name, "w", encoding="utf-8") as out:
            written = 0
            while written < share:
                rng.shuffle(lines)
                out.write("\n".join(lines) + "\n")
                written += size
        total += written
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--rel", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="build (or reuse) the corpus in this folder")
    ap.add_argument("--no-full", action="store_true", help="time --precision alone, twice")
    ap.add_argument("--base", help="with --no-full: also time this checkout, seed by seed")
    ap.add_argument(
        "--seeds",
        help="with --no-full: one run per seed (e.g. 1,2,3): where the pass stops is random",
    )
    args = ap.parse_args()
    tok = str(REALWORLD / "tokenizers" / "bpe-gpt2")
    with tempfile.TemporaryDirectory(prefix="fertility-precision-") as tmp:
        corpus = Path(args.keep or tmp) / "corpus"
        if not corpus.is_dir():
            corpus.mkdir(parents=True)
            t = time.monotonic()
            size = build(corpus, args.mb, args.seed)
            print(f"built {size / 1e6:,.0f} MB in {time.monotonic() - t:.0f} s: {corpus}")
        size = sum(p.stat().st_size for p in corpus.iterdir())
        out = Path(tmp)
        report = [FERTILITY, "report", str(corpus), "-t", tok, "--format", "json", "-q"]
        if args.no_full:
            seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed] * 2
            trees = [("", report, None)]
            compiled(Path(__file__).resolve().parents[1], *([args.base] if args.base else []))
            if args.base:
                base = [PY, "-P", "-m", "fertility.cli", *report[1:]]  # -P: not the cwd's
                trees.append((f" base {args.base}", base, {"PYTHONPATH": args.base}))
            for seed in seeds:
                sample = ["--precision", str(args.rel), "--seed", str(seed)]
                walls = []
                for name, cmd, env in trees:
                    took = timed(cmd + sample + ["-o", str(out / "p.json")], env=env)
                    p = json.loads((out / "p.json").read_text())["corpus"]["precision"]
                    walls.append(took["wall"])
                    print(
                        f"corpus {size / 1e6:,.0f} MB, seed {seed}{name}: --precision "
                        f"{args.rel} took {took['wall']:.1f} s ({took['cpu']:.1f} s CPU, peak "
                        f"RSS {took['rss']:.0f} MiB{steal_text(took)}); blocks read "
                        f"{p['blocks_read']:,} of "
                        f"{p['blocks']:,}; not reached: {p['not_reached'] or 'none'}"
                    )
                if args.base:
                    print(f"  this tree / base: {walls[0] / walls[1]:.2f}")
            return
        full_s = timed(report + ["-o", str(out / "full.json")])
        prec_s = timed(
            report
            + ["--precision", str(args.rel), "--seed", str(args.seed), "-o", str(out / "p.json")]
        )
        full, prec = (json.loads((out / n).read_text()) for n in ("full.json", "p.json"))
    p = prec["corpus"]["precision"]
    print(f"corpus {size / 1e6:,.0f} MB, {len(p['languages'])} languages, REL {args.rel}")
    print(f"full pass   {full_s['wall']:8.1f} s, peak RSS {full_s['rss']:.0f} MiB")
    print(
        f"--precision {prec_s['wall']:8.1f} s, peak RSS {prec_s['rss']:.0f} MiB   "
        f"ratio {prec_s['wall'] / full_s['wall']:.3f}   blocks read "
        f"{p['blocks_read']:,} of {p['blocks']:,}   not reached: {p['not_reached'] or 'none'}"
    )

    def rows(r: dict) -> dict:
        return {(x["group"], x["key"]): x for x in r["tokenizers"][0]["rows"]}

    f, s = rows(full), rows(prec)
    inside = judged = 0
    print("row               full     sampled  [95% interval]       half-width  inside")
    for key in sorted(f, key=lambda k: ("all language script running".split().index(k[0]), k[1])):
        group, name = key
        g = p["languages"].get(name) if group == "language" else p["scripts"].get(name)
        if group not in ("all", "language") and not (group == "running" and g):
            continue  # the rows the stop judges (a judged script's running row) and `all`
        a, b = f[key], s[key]
        ok = b["chars_per_token_lo"] <= a["chars_per_token"] <= b["chars_per_token_hi"]
        inside, judged = inside + ok, judged + 1
        half = (b["chars_per_token_hi"] - b["chars_per_token_lo"]) / 2 / b["chars_per_token"]
        print(
            f"{group[:8]:8} {name:8} {a['chars_per_token']:.4f}   {b['chars_per_token']:.4f}   "
            f"[{b['chars_per_token_lo']:.4f}, {b['chars_per_token_hi']:.4f}]   "
            f"{half:.4f}      {'yes' if ok else 'NO'}"
        )
    print(f"inside its interval: {inside} of {judged}")


if __name__ == "__main__":
    main()
