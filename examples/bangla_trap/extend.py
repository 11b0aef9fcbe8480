"""The Bangla trap, the other way out: extend the naive tokenizer instead of replacing it.

    python examples/bangla_trap/run.py           # first: the naive and the fixed tokenizer
    python examples/bangla_trap/extend.py [--out DIR] [--add N]

`run.py` trains the naive tokenizer (GPT-2 split) and `fertility fix`'s replacement. A team
that already trained a model on the naive tokenizer cannot swap it out; this script runs

    fertility extend OUT/naive/tokenizer.json examples/corpus examples/bangla_trap/extra \
        --add N --langs bn --heldout 0.2 --seed 0 --out OUT/extended

(same corpus, same held-out lines as the fix, every naive id kept) and prints Bengali and English
characters per token on the held-out lines for the naive, the fixed and the extended tokenizer.
N defaults to the number of tokens the fixed tokenizer has beyond the naive one, so both end at
the same vocabulary size. Figures go to OUT/extend.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = [ROOT / "examples" / "corpus", Path(__file__).resolve().parent / "extra"]
CLI = [sys.executable, "-m", "fertility.cli"]


def cpt(rows: list[dict], key: str, side: str) -> float | None:
    row = next((r for r in rows if r["group"] == "language" and r["key"] == key), None)
    m = row and row.get(side)
    return m and m.get("chars_per_token")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bangla_trap")
    ap.add_argument("--add", type=int, default=None)
    args = ap.parse_args()
    naive, fixed = args.out / "naive" / "tokenizer.json", args.out / "fixed" / "fix-report.json"
    if not naive.is_file() or not fixed.is_file():
        sys.exit(
            f"error: {args.out}: no naive tokenizer or fix report; run "
            "examples/bangla_trap/run.py first"
        )
    fix = json.loads(fixed.read_text(encoding="utf-8"))
    naive_size = json.loads(naive.read_text(encoding="utf-8"))["model"]["vocab"]
    add = args.add or fix["tokenizer"]["vocab_size"] - len(naive_size)
    cmd = [
        *CLI,
        "extend",
        str(naive),
        *map(str, CORPUS),
        "--add",
        str(add),
        "--langs",
        "bn",
        "--heldout",
        "0.2",
        "--seed",
        "0",
        "--out",
        str(args.out / "extended"),
        "--quiet",
    ]
    print("$", " ".join(cmd[2:]))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: the gate said no; the files are written either way
        sys.exit(done.stderr.strip())
    print(done.stdout)
    ext = json.loads((args.out / "extended" / "extend-report.json").read_text(encoding="utf-8"))
    figures = {
        "add": add,
        "vocab_size": {
            "naive": len(naive_size),
            "fixed": fix["tokenizer"]["vocab_size"],
            "extended": ext["tokenizer"]["vocab_size"],
        },
        "chars_per_token": {
            lang: {
                "naive": cpt(ext["rows"], lang, "base"),
                "fixed": cpt(fix["rows"], lang, "after"),
                "extended": cpt(ext["rows"], lang, "extended"),
            }
            for lang in ("bn", "en")
        },
        "same_ids_as_naive": ext["unchanged"],
        "pattern": ext["pattern"]["extended"],
        "gate_passed": ext["gate"]["passed"],
    }
    print(f"{'held-out chars/token':<22}{'naive':>8}{'fixed':>8}{'extended':>10}")
    for lang, f in figures["chars_per_token"].items():
        print(
            f"{lang:<22}"
            + "".join(
                f"{(f[k] or 0):>{w}.2f}" for k, w in (("naive", 8), ("fixed", 8), ("extended", 10))
            )
        )
    (args.out / "extend.json").write_text(
        json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {args.out / 'extend.json'}")


if __name__ == "__main__":
    main()
