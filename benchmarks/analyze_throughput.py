"""`fertility report` against the raw tokenizer, both timed as whole processes as a user runs them.

    python benchmarks/analyze_throughput.py                  # real text, 25 MB, one tokenizer
    python benchmarks/analyze_throughput.py --mb 250 --tokenizers 2
    python benchmarks/analyze_throughput.py --synthetic      # the corpus generated from examples/corpus
    python benchmarks/analyze_throughput.py --join 50        # long documents: 50 lines each (~2.8 KB)
    python benchmarks/analyze_throughput.py --peers          # also tokscope / toksight, own venvs
    python benchmarks/analyze_throughput.py --floor          # and (b) with the measuring taken out
    python benchmarks/analyze_throughput.py --workers-sweep 16,48   # 1 against 2 processes

Real text: the fixtures' ROOT/text/<lang>.txt (tests/realworld/build.py; ROOT is
$FERTILITY_REALWORLD or ~/.cache/fertility/realworld), every language repeated to the size
asked, one document per line. Tokenizer: a 32,000-token byte-level BPE with the o200k split
trained on that text (cached under /tmp/fertility-bench). Both sides read the same lines:
  (a) raw:  a fresh `python` that reads every file line by line and calls
      `tokenizers.Tokenizer.encode_batch` on batches of 1,000 (one per tokenizer);
  (b) ours: `fertility report DIR -t tok.json [-t tok2.json] --format json -o r.json`, every
      metric on (the defaults).
Runs alternate a, b, a, b (`--rounds`); each line printed is one run; the ratio uses the best
of each, and then the median of each round's (its a against its b). Wall time, CPU time and
peak RSS come from os.wait4 of the process (ru_maxrss is the largest of the process and the
measuring processes it waited for). "Where the time goes" is one more run of (b) with
--workers 1 and a CPU profile per thread, as a table of stages (benchmarks/tokenize_profile.py
report), and `python -X importtime` of the CLI. --floor times a third process each round,
(b) with `fertility.measure.passes.measure_batch` made a no-op (floor_cmd): reading, loading,
encoding with the spans, and the report's end remain, only the measuring is gone. Its ratio is
the most that work on the measuring alone could reach.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import steal_text, timed  # benchmarks/timing.py: a whole process's wall, CPU, RSS

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
FERTILITY = str(Path(PY).with_name("fertility"))
CACHE = Path(os.environ.get("FERTILITY_BENCH_CACHE", "/tmp/fertility-bench"))

# How every raw side reads the corpus (real_corpus: *.txt, one document per line), as code
# the raw script starts with: lines in batches of 1,000, file by file in name order.
RAW_BATCHES = r"""
def batches(folder, size=1000):
    from pathlib import Path
    for path in sorted(Path(folder).glob("*.txt")):
        with open(path, encoding="utf-8") as fh:
            buf = []
            for line in fh:
                buf.append(line[:-1])
                if len(buf) == size:
                    yield buf
                    buf = []
            if buf:
                yield buf
"""

RAW = (
    RAW_BATCHES
    + r"""
import sys
from tokenizers import Tokenizer
toks = [Tokenizer.from_file(p) for p in sys.argv[2:]]
docs = 0
for buf in batches(sys.argv[1]):
    for t in toks:
        t.encode_batch(buf, add_special_tokens=False)
    docs += len(buf)
print(docs)
"""
)


def realworld_root() -> Path:
    root = Path(os.environ.get("FERTILITY_REALWORLD", Path.home() / ".cache/fertility/realworld"))
    if not (root / "READY").exists():
        sys.exit(f"error: {root}: no real-world fixtures (python tests/realworld/build.py)")
    return root


def real_corpus(out: Path, megabytes: float, join: int = 1) -> int:
    """Every fixture language repeated to `megabytes` in all, in the fixtures' proportions;
    blank lines dropped so both sides see exactly the documents the corpus reader yields.
    join > 1: every `join` lines become one document (joined by a space), for long documents
    (the fixtures' lines are short UI strings and sentences, about 26 characters)."""
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        p.stem: [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln and not ln.isspace()]
        for p in sorted((realworld_root() / "text").glob("*.txt"))
    }
    sizes = {k: sum(len(ln.encode()) + 1 for ln in v) for k, v in texts.items()}
    scale = megabytes * 1e6 / sum(sizes.values())
    docs = 0
    for lang, lines in texts.items():
        target, written = sizes[lang] * scale, 0
        with open(out / f"{lang}.txt", "w", encoding="utf-8") as fh:
            while written < target:
                for i in range(0, len(lines), join):
                    ln = " ".join(lines[i : i + join])
                    fh.write(ln + "\n")
                    written += len(ln.encode()) + 1
                    docs += 1
                    if written >= target:
                        break
    return docs


def synthetic_corpus(out: Path, megabytes: float, seed: int = 0) -> int:
    """Lines of examples/corpus shuffled and recombined (seeded): the earlier benchmark's text."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    sources = {
        p.stem: p.read_text(encoding="utf-8").splitlines()
        for p in sorted((ROOT / "examples" / "corpus").glob("*.txt"))
    }
    per_lang, docs = megabytes * 1e6 / len(sources), 0
    for lang, lines in sources.items():
        written = 0
        with open(out / f"{lang}.txt", "w", encoding="utf-8") as fh:
            while written < per_lang:
                words = (rng.choice(lines) + " " + rng.choice(lines)).split(" ")
                rng.shuffle(words)
                line = " ".join(words) + "\n"
                fh.write(line)
                written += len(line.encode("utf-8"))
                docs += 1
    return docs


def corpus_and_bpe(megabytes: float) -> tuple[Path, Path]:
    """The real corpus of `megabytes` (cached as tokenize-real-<MB>mb) and the 32,000-token
    o200k-split BPE trained on the benchmark's text: the inputs of the scripts that time one
    tokenizer over one corpus (tokenize_throughput.py, tasks_vs_workers.py,
    encode_threads.py)."""
    corpus = CACHE / f"tokenize-real-{megabytes:g}mb"
    if not corpus.exists():
        real_corpus(corpus, megabytes)
    return corpus, trained_bpe(32000, "o200k", synthetic=False)


def trained_bpe(vocab: int, family: str, synthetic: bool) -> Path:
    """A byte-level BPE with `family`'s split trained on the benchmark's text, cached."""
    name = f"{'synthetic' if synthetic else 'real'}-{family}-{vocab}"
    path = CACHE / name / "tokenizer.json"
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT))
    from tokenizers import Regex, pre_tokenizers

    from fertility.tokenizers.patterns import FAMILIES
    from tests.bpe import byte_level_bpe

    folder = (ROOT / "examples" / "corpus") if synthetic else realworld_root() / "text"
    lines = [
        ln
        for p in sorted(folder.glob("*.txt"))
        for ln in p.read_text(encoding="utf-8").splitlines()
        if ln.strip()
    ]
    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(FAMILIES[family]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    t0 = time.perf_counter()
    byte_level_bpe(lines, vocab, pre_tokenizer=split, path=path)
    print(f"trained {name} in {time.perf_counter() - t0:.1f} s -> {path}", flush=True)
    return path


def raw_cmd(corpus: Path, toks: list[Path]) -> list[str]:
    return [PY, "-c", RAW, str(corpus), *map(str, toks)]


def ours_cmd(corpus: Path, toks: list[Path], out: Path, extra=()) -> list[str]:
    cmd = [FERTILITY, "report", str(corpus), "--format", "json", "-o", str(out), "-q", *extra]
    for i, t in enumerate(toks):
        cmd += ["-t", f"t{i}={t}"]
    return cmd


# `fertility ARGS` with the measuring of each batch taken out (--floor)
FLOOR = (
    "import sys, fertility.measure.passes as p; p.measure_batch = lambda *a, **k: None; "
    "from fertility.cli import main; main(sys.argv[1:])"
)


def floor_cmd(ours: list[str]) -> list[str]:
    """`ours` (FERTILITY and its arguments) with the measuring taken out."""
    return [PY, "-c", FLOOR, *ours[1:]]


def line(name: str, r: dict, megabytes: float) -> str:
    return (
        f"{name}: {r['wall']:7.2f} s  {megabytes / r['wall']:6.2f} MB/s  "
        f"cpu {r['cpu']:6.2f} s  peak RSS {r['rss']:6.0f} MiB{steal_text(r)}"
    )


def where_time_goes(corpus: Path, toks: list[Path], tmp: Path) -> None:
    """One more run of (b) in one process (--workers 1) with a CPU profile per thread, and its
    table of stages (benchmarks/tokenize_profile.py report), then the start-up's figures."""
    here = Path(__file__).resolve().parent
    cmd = [PY, str(here / "tokenize_profile.py"), "report", str(corpus), str(tmp / "p.json")]
    print("\nwhere the time goes: one process (--workers 1), a CPU profile per thread:")
    subprocess.run([*cmd, *map(str, toks)], check=True)
    for label, args in (("fertility --help", ["--help"]),):
        t = min(timed([FERTILITY, *args])["wall"] for _ in range(3))
        print(f"start-up: `{label}` {t:.2f} s")
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    (empty / "en.txt").write_text("hello world\n", encoding="utf-8")
    t = min(timed(ours_cmd(empty, toks, tmp / "e.json"))["wall"] for _ in range(3))
    print(f"start-up: `fertility report` on one line {t:.2f} s")
    imp = subprocess.run(
        [
            PY,
            "-X",
            "importtime",
            FERTILITY,
            "report",
            str(empty),
            "-t",
            str(toks[0]),
            "--format",
            "json",
            "-o",
            str(tmp / "e.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stderr
    heavy = {}
    for ln in imp.splitlines():
        parts = ln.split("|")
        if len(parts) == 3 and parts[2].strip().split(".")[0] in (
            "pandas",
            "plotly",
            "torch",
            "numpy",
            "tokenizers",
        ):
            name = parts[2].strip()
            if name.count(".") == 0:  # top-level package: its cumulative time
                heavy[name] = int(parts[1]) / 1e6
    print(
        "imports on that run (cumulative s): "
        + (
            ", ".join(f"{k} {v:.2f}" for k, v in sorted(heavy.items()))
            or "none of pandas/plotly/torch"
        )
    )


PEER_TOKSIGHT = r"""
import sys
from toksight.compression import compute_compression
from toksight.loader import load_huggingface
tok = load_huggingface(sys.argv[1])
texts = [ln.strip() for p in sys.argv[2:] for ln in open(p, encoding="utf-8") if ln.strip()]
s = compute_compression(tok, texts)
print(s.total_tokens, round(s.chars_per_token, 4))
"""


def peers(corpus: Path, toks: list[Path], tmp: Path, megabytes: float, raw_wall: float) -> None:
    """tokscope and toksight from PyPI, each in its own venv (/tmp/peer-NAME), offline, on the
    same text and the first tokenizer (a folder transformers' AutoTokenizer can open)."""
    folder = tmp / "peer-tokenizer"
    folder.mkdir(exist_ok=True)
    shutil.copy(toks[0], folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8"
    )
    files = sorted(str(p) for p in corpus.glob("*.txt"))
    one = tmp / "corpus.txt"  # tokscope reads one file
    with open(one, "wb") as out:
        out.writelines(Path(f).read_bytes() for f in files)
    runs = {
        "tokscope": [
            "bin/tokscope",
            str(one),
            "-t",
            f"hf:{folder}",
            "--max-chars",
            str(10**12),
            "--json",
            str(tmp / "tokscope.json"),
        ],
        "toksight": ["bin/python", "-c", PEER_TOKSIGHT, str(folder), *files],
    }
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    for name, cmd in runs.items():
        venv = Path(f"/tmp/peer-{name}")
        if not (venv / "bin" / "python").exists():
            subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
            pip = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", name, "tokenizers", "transformers"],
                capture_output=True,
                text=True,
                check=False,
            )
            if pip.returncode != 0:
                why = (pip.stderr.strip().splitlines() or ["pip failed"])[-1]
                print(f"peer {name}: not run: pip install failed: {why}")
                continue
        try:
            r = timed([str(venv / cmd[0]), *cmd[1:]], env=offline)
        except SystemExit as e:
            print(f"peer {name}: did not run offline: {e}")
            continue
        print(line(f"peer {name}", r, megabytes) + f"  ({raw_wall / r['wall']:.3f} of raw)")


def workers_sweep(sizes: list[float], toks: list[Path], tmp: Path) -> None:
    """`fertility report --workers 1` against `--workers 2` on real text of each size, one run
    each, alternated: whether a second process pays on this machine; beside it what the
    default run's own switch (fertility.measure.parallel.Switch) decided on the same corpus."""
    for mb in sizes:
        corpus = tmp / f"sweep{mb:g}"
        real_corpus(corpus, mb)
        one = timed(ours_cmd(corpus, toks, tmp / "s.json", ["--workers", "1"]))
        two = timed(ours_cmd(corpus, toks, tmp / "s.json", ["--workers", "2"]))
        auto = timed(ours_cmd(corpus, toks, tmp / "s.json"))
        print(
            line(f"{mb:5g} MB --workers 1", one, mb)
            + "\n"
            + line(f"{mb:5g} MB --workers 2", two, mb)
            + f"   two/one wall {two['wall'] / one['wall']:.2f}\n"
            + line(f"{mb:5g} MB default", auto, mb)
            + f"   switch: {switch_of(tmp / 's.json')}",
            flush=True,
        )
        shutil.rmtree(corpus)


def switch_of(report: Path) -> str:
    """What the run's switch to worker processes decided (settings.switch of its JSON)."""
    settings = json.loads(report.read_text(encoding="utf-8"))["settings"]
    return f"{settings.get('switch')} -> {settings.get('workers')} process(es)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=25)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--tokenizers",
        type=int,
        default=1,
        choices=(1, 2),
        help="2: also an 8,000-token GPT-2-split BPE, measured in the same run",
    )
    ap.add_argument(
        "--synthetic",
        action="store_true",
        help="examples/corpus recombined and an 8,000-token BPE (the old corpus)",
    )
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--floor", action="store_true", help="and (b) with the measuring taken out")
    ap.add_argument(
        "--ours-only", action="store_true", help="time only fertility report (peak RSS at 1 GB)"
    )
    ap.add_argument("--keep", help="folder to keep the corpus in (reused if present)")
    ap.add_argument("--join", type=int, default=1, help="real text: lines per document (default 1)")
    ap.add_argument(
        "--workers-sweep",
        metavar="MB,MB,...",
        help="only time --workers 1 against 2 at these corpus sizes",
    )
    args = ap.parse_args()
    if args.synthetic and args.join != 1:
        ap.error("--join: real text only (the synthetic corpus's lines are made whole)")
    if args.synthetic:
        toks = [trained_bpe(8000, "o200k", True)]
        if args.tokenizers == 2:
            toks.append(trained_bpe(8000, "gpt2", True))
    else:
        toks = [trained_bpe(32000, "o200k", False)]
        if args.tokenizers == 2:
            toks.append(trained_bpe(8000, "gpt2", False))
    tmp = Path(tempfile.mkdtemp(prefix="fert-bench-"))
    try:
        if args.workers_sweep:
            workers_sweep([float(x) for x in args.workers_sweep.split(",")], toks, tmp)
            return
        corpus = Path(args.keep) if args.keep else tmp / "corpus"
        if not corpus.exists():
            if args.synthetic:
                synthetic_corpus(corpus, args.mb)
            else:
                real_corpus(corpus, args.mb, join=args.join)
        size = sum(p.stat().st_size for p in corpus.glob("*.txt")) / 1e6
        langs = len(list(corpus.glob("*.txt")))
        print(
            f"corpus: {size:.1f} MB, {langs} languages, "
            f"{'synthetic' if args.synthetic else 'real text'}; tokenizers: "
            + ", ".join(str(t) for t in toks)
            + f"; {os.cpu_count()} cores",
            flush=True,
        )
        raw, ours, floors = [], [], []
        for i in range(args.rounds):
            if not args.ours_only:
                raw.append(timed(raw_cmd(corpus, toks)))
                print(line(f"(a) raw encode_batch, run {i + 1}", raw[-1], size), flush=True)
            ours.append(timed(ours_cmd(corpus, toks, tmp / "r.json")))
            print(line(f"(b) fertility report, run {i + 1}", ours[-1], size), flush=True)
            print(f"    switch: {switch_of(tmp / 'r.json')}", flush=True)
            if args.floor:
                floors.append(timed(floor_cmd(ours_cmd(corpus, toks, tmp / "f.json"))))
                print(line(f"    (b) no measuring, run {i + 1}", floors[-1], size), flush=True)
        if args.ours_only:
            return
        a = min(r["wall"] for r in raw)
        b = min(r["wall"] for r in ours)
        ca, cb = min(r["cpu"] for r in raw), min(r["cpu"] for r in ours)
        print(
            f"ratio (b)/(a) throughput, best wall of each: {a / b:.3f}   (goal >= 0.95, #36); "
            f"by CPU seconds: {ca / cb:.3f} (steadier when other jobs share the cores); "
            f"peak RSS (b) {max(r['rss'] for r in ours):.0f} MiB"
        )
        # Each round ran (a) then (b): the ratio of each round, whose two runs shared the host's
        # state of that minute, is not moved by one side catching a quiet one alone.
        pairs = sorted(r["wall"] / o["wall"] for r, o in zip(raw, ours))
        print(
            f"the same, round by round: median {statistics.median(pairs):.3f} "
            f"({pairs[0]:.3f}-{pairs[-1]:.3f})"
        )
        if floors:
            fl = sorted(r["wall"] / f["wall"] for r, f in zip(raw, floors))
            print(
                f"(a) against (b) with no measuring, round by round: median "
                f"{statistics.median(fl):.3f} ({fl[0]:.3f}-{fl[-1]:.3f}): the most that work on "
                "the measuring alone could reach"
            )
        if not args.no_profile:
            where_time_goes(corpus, toks, tmp)
        if args.peers:
            peers(corpus, toks, tmp, size, a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
