"""The Bangla trap, reproduced on examples/corpus: a GPT-2-style tokenizer, its diagnosis, the fix.

    python examples/bangla_trap/run.py [--out out/bangla_trap] [--vocab-size 16000]
                                       [--heldout 0.2] [--seed 0] [--sweep 4000,8000]

1. Hold out lines exactly as `fertility fix` will (same fraction and seed), so that neither
   tokenizer is measured on text it was trained on.
2. Train the naive tokenizer: byte-level BPE with the GPT-2 pre-tokenizer on the training lines,
   Bangla-weighted (the Bengali lines three times, as in the published corpus).
3. `fertility report` on the corpus: Bengali chars per token and the `mark-split` finding.
4. `fertility fix examples/corpus --from naive ...` with the same vocabulary size: trains the
   mark-aware vocabulary and measures old and new side by side on the held-out lines.
5. Print the figures and write them to OUT/walkthrough.json (README.md quotes that file).

`--sweep` repeats steps 2 and 4 for other vocabulary sizes and adds a table (held-out figures).
Until the `fertility fix` command exists, step 4 calls `fertility.fix.fix` with the same
arguments.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import regex
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fertility.fix import FixConfig, fix, heldout_documents

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"
CLI = [sys.executable, "-m", "fertility.cli"]


def training_lines(held: set[tuple[str, int]]) -> tuple[list[str], dict[str, list[str]]]:
    """Bangla-weighted training text for the naive tokenizer, and the training lines per file."""
    weighted, per_lang = [], {}
    for path in sorted(CORPUS.glob("*.txt")):
        lines = [t for i, t in enumerate(path.read_text("utf-8").splitlines(), 1)
                 if t.strip() and (str(path), i) not in held]
        per_lang[path.stem] = lines
        weighted += lines * (3 if path.stem == "bn" else 1)
    return weighted, per_lang


def train_naive(lines: list[str], vocab_size: int, path: Path) -> int:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return tok.get_vocab_size()


def run_report(naive: Path, out: Path) -> dict:
    cmd = [*CLI, "report", str(CORPUS), "-t", f"naive={naive}", "--format", "json", "-o",
           str(out), "--quiet"]
    print("$", "fertility", *cmd[3:], flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text("utf-8"))


def run_fix(naive: Path, out: Path, args, vocab_size: int) -> dict:
    argv = ["fix", str(CORPUS), "--from", str(naive), "--vocab-size", str(vocab_size),
            "--out", str(out), "--heldout", str(args.heldout), "--seed", str(args.seed),
            "--quiet"]
    have_cli = subprocess.run([*CLI, "fix", "--help"], capture_output=True).returncode == 0
    print("$", "fertility", *argv, "" if have_cli else "   (library call: no CLI command yet)",
          flush=True)
    if have_cli:
        done = subprocess.run([*CLI, *argv])
        if done.returncode not in (0, 1):  # 1: written, but the gate said no
            sys.exit(done.returncode)
    else:
        fix([CORPUS], out, FixConfig(vocab_size=vocab_size, heldout_fraction=args.heldout,
                                     seed=args.seed), from_tokenizer=str(naive))
    return json.loads((out / "fix-report.json").read_text("utf-8"))


def unseen_share(per_lang: dict[str, list[str]], held_texts: list[str], lang: str) -> float:
    """Share of held-out words (\\w+, marks included) that never occur in the training lines."""
    seen = set(regex.findall(r"\w+", "\n".join(per_lang[lang])))
    words = regex.findall(r"\w+", "\n".join(held_texts))
    return sum(w not in seen for w in words) / max(len(words), 1)


def figures(fix_report: dict) -> dict:
    rows = {(r["group"], r["key"]): r for r in fix_report["rows"]}
    out = {}
    for group, key in (("script", "Beng"), ("language", "bn"), ("language", "en"),
                       ("script", "Latn")):
        r = rows[(group, key)]
        b, a = r["before"], r["after"]
        out[f"{group}:{key}"] = {
            "before": b["chars_per_token"], "before_ci": [b["chars_per_token_lo"],
                                                          b["chars_per_token_hi"]],
            "after": a["chars_per_token"], "after_ci": [a["chars_per_token_lo"],
                                                        a["chars_per_token_hi"]],
            "ratio": r["chars_per_token_ratio"], "before_ceiling": b["chars_per_pretoken"],
            "after_ceiling": a["chars_per_pretoken"],
            "after_roundtrip_failures": a["roundtrip_failures"], "documents": a["documents"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bangla_trap")
    ap.add_argument("--vocab-size", type=int, default=16000)
    ap.add_argument("--heldout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep", default="", help="other vocabulary sizes, comma-separated")
    args = ap.parse_args()
    out: Path = args.out

    held = set(heldout_documents([CORPUS], args.heldout, args.seed))
    weighted, per_lang = training_lines(held)
    print(f"held out {len(held)} lines ({args.heldout:g} per language, seed {args.seed}); "
          f"the naive tokenizer trains on the other {sum(map(len, per_lang.values()))} "
          "(Bengali three times)")

    naive = out / "naive" / "tokenizer.json"
    naive_size = train_naive(weighted, args.vocab_size, naive)
    rep = run_report(naive, out / "naive-report.json")
    beng = next(r for r in rep["tokenizers"][0]["rows"]
                if r["group"] == "script" and r["key"] == "Beng")
    marks = [f for f in rep.get("findings", []) if f["rule"] == "mark-split"
             and f["key"] in ("Beng", "bn")]
    print(f"naive, whole corpus: Bengali {beng['chars_per_token']:.2f} chars/token "
          f"[{beng['chars_per_token_lo']:.2f}, {beng['chars_per_token_hi']:.2f}]")
    for f in marks:
        print(f"  {f['severity']} {f['rule']} {f['group']}={f['key']}: {f['cause']}")

    fixed = run_fix(naive, out / "fixed", args, args.vocab_size)
    fig = figures(fixed)
    held_bn = [json.loads(x)["text"] for x in
               (out / "fixed" / "heldout" / "bn.jsonl").read_text("utf-8").splitlines()]
    result = {
        "settings": {"vocab_size": args.vocab_size, "heldout": args.heldout, "seed": args.seed,
                     "temperature": fixed["settings"]["temperature"]},
        "naive_vocab_size": naive_size, "fixed_vocab_size": fixed["tokenizer"]["vocab_size"],
        "report_whole_corpus": {"Beng": beng["chars_per_token"],
                                "Beng_ci": [beng["chars_per_token_lo"],
                                            beng["chars_per_token_hi"]],
                                "mark_split": [f["cause"] for f in marks]},
        "heldout": fig, "gate_passed": fixed["gate"]["passed"],
        "gate_failures": [f"{c['name']} {c['group']}={c['key']}: {c['value']:.3g} "
                          f"{c['direction']} {c['threshold']:g} ({c['verdict']})"
                          for c in fixed["gate"]["checks"] if c["verdict"] != "pass"],
        "bn_heldout_words_unseen_in_training": unseen_share(per_lang, held_bn, "bn"),
        "sweep": [],
    }
    for size in [int(s) for s in args.sweep.split(",") if s.strip()]:
        path = out / f"sweep-{size}" / "naive" / "tokenizer.json"
        n = train_naive(weighted, size, path)
        f = figures(run_fix(path, out / f"sweep-{size}" / "fixed", args, size))
        result["sweep"].append({"vocab_size": size, "naive_vocab_size": n, **f})
    (out / "walkthrough.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")

    print(f"\nheld-out lines only (vocabulary {args.vocab_size}: naive used {naive_size}, "
          f"fixed {result['fixed_vocab_size']})")
    for key in ("language:bn", "language:en"):
        f = fig[key]
        print(f"  {key:<12} naive {f['before']:.2f} [{f['before_ci'][0]:.2f}, "
              f"{f['before_ci'][1]:.2f}]  fixed {f['after']:.2f} [{f['after_ci'][0]:.2f}, "
              f"{f['after_ci'][1]:.2f}]  x{f['ratio']:.2f}  ceiling {f['before_ceiling']:.2f}"
              f" -> {f['after_ceiling']:.2f}  round-trip failures {f['after_roundtrip_failures']}")
    print(f"  held-out Bengali words never seen in training: "
          f"{result['bn_heldout_words_unseen_in_training']:.0%}")
    print(f"  gate on the fixed tokenizer: {'PASS' if result['gate_passed'] else 'FAIL'}")
    for line in result["gate_failures"]:
        print(f"    {line}")
    for s in result["sweep"]:
        print(f"  vocabulary {s['vocab_size']}: bn {s['language:bn']['before']:.2f} -> "
              f"{s['language:bn']['after']:.2f}, en {s['language:en']['before']:.2f} -> "
              f"{s['language:en']['after']:.2f} (x{s['language:en']['ratio']:.3f})")
    print(f"wrote {out / 'walkthrough.json'}")


if __name__ == "__main__":
    main()
