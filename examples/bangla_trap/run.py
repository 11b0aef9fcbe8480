"""The Bangla trap on the project's text: a GPT-2-style tokenizer, its diagnosis, the fix.

    python examples/bangla_trap/run.py [--out DIR] [--vocab-size 24000]
                                       [--heldout 0.2] [--seed 0] [--sweep 8000,16000,32000]
                                       [--budget cover|corpus|CHARS] [--no-extra]

The corpus is examples/corpus (60 parallel lines in ten languages) plus
examples/bangla_trap/extra (570 more lines of everyday Bengali and their English translation;
the last 40 typed as keyboards type them, with য় as the one code point U+09DF, which NFC would
rewrite), so that the vocabulary has enough Bengali to learn its frequent words (`--no-extra`
leaves extra/ out, to show why it is there).

1. Hold out lines exactly as `fertility fix` will (same paths, fraction and seed), so that neither
   tokenizer is measured on text it was trained on.
2. Train the naive tokenizer: byte-level BPE with the GPT-2 pre-tokenizer on the training lines,
   Bangla-weighted (the Bengali lines three times, as in the published corpus).
3. `fertility report` on the corpus: Bengali chars per token and the `mark-split` finding.
4. `fertility fix examples/corpus examples/bangla_trap/extra --from naive ...` with the same
   vocabulary size: trains the mark-aware vocabulary on a temperature-0.3 sample over languages
   and measures old and new side by side on the held-out lines. The sample's budget
   (`--max-train-chars`) is, by default here, the smallest one whose share for every language
   covers all of that language's training text (`--budget cover`), so no training line is left
   out; `--budget corpus` keeps `fertility fix`'s own default (all training characters, which
   subsamples the languages above their share: here Bengali and English).
5. Check with the `tokenizers` library itself that every held-out line decodes to itself
   (`fertility fix` keeps the text as written: no normaliser), the lines with U+09DF included.
6. Print the figures and write them to OUT/walkthrough.json (README.md quotes that file).

`--sweep` repeats steps 2 and 4 for other vocabulary sizes and adds a table (held-out figures).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import regex
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fertility.corpus import Corpus
from fertility.corpus.sampling import temperature_shares
from fertility.fix import heldout_documents
from fertility.fix.config import FixConfig

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"
EXTRA = Path(__file__).resolve().parent / "extra"  # more Bengali (and its English), same split
CLI = [sys.executable, "-m", "fertility.cli"]  # the `fertility` command of this interpreter
TEMPERATURE = FixConfig.temperature  # `fertility fix`'s default; the budget rule needs it


def training_lines(
    paths: list[Path], held: set[tuple[str, int]]
) -> tuple[list[str], dict[str, list[str]]]:
    """Bangla-weighted training text for the naive tokenizer; the training lines per language.

    Read through fertility.corpus, as `fertility fix` reads them, so both tokenizers train on
    the same documents and the held-out (source, line) pairs name them the same way.
    """
    weighted, per_lang = [], {}
    for doc in Corpus(paths).documents():
        if (doc.source, doc.line) not in held:
            per_lang.setdefault(doc.lang, []).append(doc.text)
            weighted += [doc.text] * (3 if doc.lang == "bn" else 1)
    return weighted, per_lang


def train_naive(lines: list[str], vocab_size: int, path: Path) -> int:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return tok.get_vocab_size()


def run_report(paths: list[Path], naive: Path, out: Path) -> dict:
    cmd = [
        *CLI,
        "report",
        *map(str, paths),
        "-t",
        f"naive={naive}",
        "--format",
        "json",
        "-o",
        str(out),
        "--quiet",
    ]
    print("$", "fertility", *cmd[len(CLI) :], flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text("utf-8"))


def cover_budget(per_lang: dict[str, list[str]], temperature: float) -> int:
    """Smallest sampling budget B with p_g * B >= n_g for every language g, where p_g are the
    shares `fertility fix`'s sampler gives (n_g**T / sum).

    At this budget the temperature sampler repeats the small languages and drops nothing from
    the large ones. Computed from the training lines only; rounded up to the next thousand
    characters plus one thousand, so that floating-point rounding in the sampler cannot leave
    a line out.
    """
    n = np.array([sum(map(len, lines)) for lines in per_lang.values()], dtype=np.float64)
    p = temperature_shares(n, temperature)
    need = float((n[p > 0] / p[p > 0]).max())
    return -(-int(need) // 1000) * 1000 + 1000


def run_fix(
    paths: list[Path], naive: Path, out: Path, args, vocab_size: int, budget: int | None
) -> dict:
    argv = [
        "fix",
        *map(str, paths),
        "--from",
        str(naive),
        "--vocab-size",
        str(vocab_size),
        "--out",
        str(out),
        "--heldout",
        str(args.heldout),
        "--seed",
        str(args.seed),
        "--temperature",
        str(TEMPERATURE),
        *(["--max-train-chars", str(budget)] if budget else []),
        "--quiet",
    ]
    print("$", "fertility", *argv, flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "fix-stdout.txt", "w", encoding="utf-8") as log:
        done = subprocess.run([*CLI, *argv], stdout=log)  # its summary table: kept, not shown
    if done.returncode not in (0, 1):  # 1: written, but the gate said no
        sys.exit(done.returncode)
    return json.loads((out / "fix-report.json").read_text("utf-8"))


def heldout_records(fixed: Path) -> list[dict]:
    """The held-out documents `fertility fix` wrote (text, lang, source, line)."""
    return [
        json.loads(x)
        for p in sorted((fixed / "heldout").glob("*.jsonl"))
        for x in p.read_text("utf-8").splitlines()
    ]


def unseen_share(per_lang: dict[str, list[str]], held_texts: list[str], lang: str) -> float:
    """Share of held-out words (\\w+, marks included) that never occur in the training lines."""
    seen = set(regex.findall(r"\w+", "\n".join(per_lang[lang])))
    words = regex.findall(r"\w+", "\n".join(held_texts))
    return sum(w not in seen for w in words) / max(len(words), 1)


def by_source(
    records: list[dict], naive: Path, fixed: Path, per_lang: dict[str, list[str]]
) -> dict:
    """Held-out chars per token of each tokenizer per Bengali and English file, so the 12 lines
    of examples/corpus (written apart from extra/) can be read on their own. The tokenizers'
    own counts, not fix's measurement; chars are code points of the line."""
    toks = {
        "naive": Tokenizer.from_file(str(naive)),
        "fixed": Tokenizer.from_file(str(fixed / "tokenizer.json")),
    }
    texts: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if r["lang"] in ("bn", "en"):
            texts.setdefault((r["source"], r["lang"]), []).append(r["text"])
    out = {}
    for (source, lang), lines in texts.items():
        chars = sum(map(len, lines))
        row = {"lines": len(lines)}
        for name, tok in toks.items():
            row[name] = chars / sum(len(e.ids) for e in tok.encode_batch(lines))
        if lang == "bn":
            row["words_unseen_in_training"] = unseen_share(per_lang, lines, lang)
        out[str(Path(source).relative_to(ROOT))] = row
    return out


def round_trip(records: list[dict], fixed: Path) -> dict:
    """Held-out lines that decode(encode(line)) gives back, by the tokenizers library directly
    (not fix's measurement), overall and among the lines holding U+09DF (য় as one code point)."""
    tok = Tokenizer.from_file(str(fixed / "tokenizer.json"))
    texts = [r["text"] for r in records]
    back = [tok.decode(e.ids) == t for e, t in zip(tok.encode_batch(texts), texts)]
    yya = [ok for ok, t in zip(back, texts) if "\u09df" in t]
    return {
        "lines": len(texts),
        "round_trip": sum(back),
        "lines_with_u09df": len(yya),
        "u09df_round_trip": sum(yya),
    }


def figures(fix_report: dict) -> dict:
    rows = {(r["group"], r["key"]): r for r in fix_report["rows"]}
    out = {}
    for group, key in (
        ("script", "Beng"),
        ("language", "bn"),
        ("language", "en"),
        ("script", "Latn"),
    ):
        r = rows[(group, key)]
        b, a = r["before"], r["after"]
        out[f"{group}:{key}"] = {
            "before": b["chars_per_token"],
            "before_ci": [b["chars_per_token_lo"], b["chars_per_token_hi"]],
            "after": a["chars_per_token"],
            "after_ci": [a["chars_per_token_lo"], a["chars_per_token_hi"]],
            "ratio": r["chars_per_token_ratio"],
            "before_ceiling": b["chars_per_pretoken"],
            "after_ceiling": a["chars_per_pretoken"],
            "after_roundtrip_failures": a["roundtrip_failures"],
            "documents": a["documents"],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default out/bangla_trap (out/bangla_trap-no-extra with --no-extra)",
    )
    ap.add_argument("--vocab-size", type=int, default=24000)
    ap.add_argument("--heldout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--sweep",
        default="8000,16000,32000",
        help="other vocabulary sizes, comma-separated ('' for none)",
    )
    ap.add_argument(
        "--budget",
        default="cover",
        help="sampling budget of `fertility fix`: cover (every language's share "
        "covers its training text), corpus (fix's default), or a number",
    )
    ap.add_argument(
        "--no-extra",
        action="store_true",
        help="examples/corpus only: too little Bengali to learn its words from",
    )
    args = ap.parse_args()
    out: Path = args.out or ROOT / "out" / (
        "bangla_trap-no-extra" if args.no_extra else "bangla_trap"
    )
    paths = [CORPUS] if args.no_extra else [CORPUS, EXTRA]

    held = set(heldout_documents(paths, args.heldout, args.seed))
    weighted, per_lang = training_lines(paths, held)
    print(
        f"held out {len(held)} lines ({args.heldout:g} per language, seed {args.seed}); "
        f"the naive tokenizer trains on the other {sum(map(len, per_lang.values()))} "
        "(Bengali three times)"
    )
    budget = (
        cover_budget(per_lang, TEMPERATURE)
        if args.budget == "cover"
        else None
        if args.budget == "corpus"
        else int(args.budget)
    )

    naive = out / "naive" / "tokenizer.json"
    naive_size = train_naive(weighted, args.vocab_size, naive)
    rep = run_report(paths, naive, out / "naive-report.json")
    beng = next(
        r for r in rep["tokenizers"][0]["rows"] if r["group"] == "script" and r["key"] == "Beng"
    )
    marks = [
        f
        for f in rep.get("findings", [])
        if f["rule"] == "mark-split" and f["key"] in ("Beng", "bn")
    ]
    print(
        f"naive, whole corpus: Bengali {beng['chars_per_token']:.2f} chars/token "
        f"[{beng['chars_per_token_lo']:.2f}, {beng['chars_per_token_hi']:.2f}]"
    )
    for f in marks:
        print(f"  {f['severity']} {f['rule']} {f['group']}={f['key']}: {f['cause']}")

    fixed = run_fix(paths, naive, out / "fixed", args, args.vocab_size, budget)
    fig = figures(fixed)
    records = heldout_records(out / "fixed")
    held_bn = [r["text"] for r in records if r["lang"] == "bn"]
    result = {
        "settings": {
            "vocab_size": args.vocab_size,
            "heldout": args.heldout,
            "seed": args.seed,
            "temperature": fixed["settings"]["temperature"],
            "budget": args.budget,
            "max_train_chars": budget,
        },
        "paths": [str(p.relative_to(ROOT)) for p in paths],
        "sampling": {
            g: {
                "train_chars": fixed["split"]["languages"][g]["train_chars"],
                "repeat": round(v["repeat"], 3),
            }
            for g, v in fixed["sampling"]["languages"].items()
        },
        "naive_vocab_size": naive_size,
        "fixed_vocab_size": fixed["tokenizer"]["vocab_size"],
        "report_whole_corpus": {
            "Beng": beng["chars_per_token"],
            "Beng_ci": [beng["chars_per_token_lo"], beng["chars_per_token_hi"]],
            "mark_split": [f["cause"] for f in marks],
        },
        "heldout": fig,
        "gate_passed": fixed["gate"]["passed"],
        "gate_failures": [
            f"{c['name']} {c['group']}={c['key']}: {c['value']:.3g} "
            f"{c['direction']} {c['threshold']:g} ({c['verdict']})"
            for c in fixed["gate"]["checks"]
            if c["verdict"] != "pass"
        ],
        "bn_heldout_words_unseen_in_training": unseen_share(per_lang, held_bn, "bn"),
        "heldout_by_file": by_source(records, naive, out / "fixed", per_lang),
        "heldout_round_trip": round_trip(records, out / "fixed"),
        "fix_roundtrip": {
            g: {k: v[k] for k in ("checked", "failures")} for g, v in fixed["roundtrip"].items()
        },
        "sweep": [],
    }
    for size in [int(s) for s in args.sweep.split(",") if s.strip()]:
        path = out / f"sweep-{size}" / "naive" / "tokenizer.json"
        n = train_naive(weighted, size, path)
        rep_s = run_fix(paths, path, out / f"sweep-{size}" / "fixed", args, size, budget)
        result["sweep"].append(
            {
                "vocab_size": size,
                "naive_vocab_size": n,
                "fixed_vocab_size": rep_s["tokenizer"]["vocab_size"],
                **figures(rep_s),
            }
        )
    (out / "walkthrough.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")

    print(
        f"\nheld-out lines only (vocabulary {args.vocab_size}: naive used {naive_size}, "
        f"fixed {result['fixed_vocab_size']})"
    )
    for key in ("language:bn", "language:en"):
        f = fig[key]
        print(
            f"  {key:<12} naive {f['before']:.2f} [{f['before_ci'][0]:.2f}, "
            f"{f['before_ci'][1]:.2f}]  fixed {f['after']:.2f} [{f['after_ci'][0]:.2f}, "
            f"{f['after_ci'][1]:.2f}]  x{f['ratio']:.2f}  ceiling {f['before_ceiling']:.2f}"
            f" -> {f['after_ceiling']:.2f}  round-trip failures {f['after_roundtrip_failures']}"
        )
    print(
        f"  sampling budget {budget or 'all training characters'} (--budget {args.budget}): "
        "share of its training text each language got: "
        + ", ".join(f"{g} x{v['repeat']:.2f}" for g, v in result["sampling"].items())
    )
    print(
        f"  held-out Bengali words never seen in training: "
        f"{result['bn_heldout_words_unseen_in_training']:.0%}"
    )
    for name, row in result["heldout_by_file"].items():
        unseen = row.get("words_unseen_in_training")
        print(
            f"    {name:<32} {row['lines']:>3} lines: naive {row['naive']:.2f}, fixed "
            f"{row['fixed']:.2f}" + (f", words unseen {unseen:.0%}" if unseen is not None else "")
        )
    rt = result["heldout_round_trip"]
    print(
        f"  round trip (tokenizers library): {rt['round_trip']} of {rt['lines']} held-out lines "
        f"decode to themselves; of the {rt['lines_with_u09df']} with U+09DF, "
        f"{rt['u09df_round_trip']}"
    )
    print(f"  gate on the fixed tokenizer: {'PASS' if result['gate_passed'] else 'FAIL'}")
    for line in result["gate_failures"]:
        print(f"    {line}")
    for s in result["sweep"]:
        print(
            f"  vocabulary {s['vocab_size']} (naive used {s['naive_vocab_size']}, fixed "
            f"{s['fixed_vocab_size']}): bn {s['language:bn']['before']:.2f} -> "
            f"{s['language:bn']['after']:.2f}, en {s['language:en']['before']:.2f} -> "
            f"{s['language:en']['after']:.2f} (x{s['language:en']['ratio']:.3f})"
        )
    print(f"wrote {out / 'walkthrough.json'}")


if __name__ == "__main__":
    main()
