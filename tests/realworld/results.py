"""docs/RESULTS.md: every real tokenizer file of the test fixtures on the fixtures' real text.

    python tests/realworld/results.py [OUT]    (make results; OUT: docs/RESULTS.md)
    python tests/realworld/results.py --fresh  (make test, before pytest)

Reads ROOT (tests/realworld/build.py assembles it: `make fixtures`) and measures each tokenizer
of ROOT/tokenizers on ROOT/text (13 languages) with fertility's own Python API, as `fertility
report ROOT/text -t LABEL=SPEC` does under the built-in policy: one row per tokenizer with the
gate's verdict, the script furthest below (or closest to) its floor, the Gini coefficient over
languages, Rényi efficiency, and characters per token in each script. The sources and their
versions come from ROOT/SOURCES.json.

The fresh build: the table is written first to ROOT/results/RESULTS.<KEY>.md, KEY a hash of
everything the table is a function of (`key`), and built again only when KEY changes; OUT is
a copy of it. The build takes a minute or two, too long for the suite, so `make test` makes it
before pytest and tests/realworld/test_results_doc.py compares the committed file with it, byte
for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script (as build.py is): `tests` importable

from tests.realworld.layout import BUILD_VERSION, root  # noqa: E402

# label -> spec under ROOT/tokenizers: every tokenizer file build.py writes (a #NAME gives a
# bare rank file or a tokenizer.model its split pattern, as the tests load them)
TOKENIZERS = {
    "r50k": "r50k_base.tiktoken#gpt2",
    "cl100k": "cl100k_base.tiktoken",
    "o200k": "o200k_base.tiktoken",
    "whisper": "whisper-multilingual.tiktoken#gpt2",
    "llama3": "llama3/tokenizer.model#llama3",
    "llama4": "llama4/tokenizer.model#llama4",
    "mistral-v1": "mistral/tokenizer.model.v1",
    "mistral-v3": "mistral/mistral_instruct_tokenizer_240323.model.v3",
    "tekken": "tekken/tekken_240911.json",
    "minilm": "minilm/tokenizer.json",
    "bpe-gpt2": "bpe-gpt2/tokenizer.json",
    "bpe-o200k": "bpe-o200k/tokenizer.json",
}
POLICY = REPO / "fertility" / "default_policy.toml"  # the built-in one, named: no local config
HEAD = """# Results on real text

Every real tokenizer file of the test fixtures, measured on the fixtures' real text: 13
languages (ar, bn, el, en, he, hi, ja, ko, ru, ta, te, th, zh), about 5.1 million characters of
user-interface strings, language names and (Russian) jokes from the Debian packages under
Sources. Use it to place a tokenizer you measure yourself: `fertility report` on your own text
gives the same columns.

Rebuilt by `make results` (tests/realworld/results.py: fertility's own Python API, the
built-in policy), from the fixtures `make fixtures` assembles; tests/realworld/test_results_doc.py
checks this file, byte for byte, against the fresh build `make test` makes. A row is what

    fertility report ~/.cache/fertility/realworld/text -t LABEL=SPEC

says of that tokenizer (SPEC: the file under ROOT/tokenizers, and the split pattern a bare
rank file or tokenizer.model is read with: `#gpt2`, `#llama3`, `#llama4`).

- **Verdict**: `fertility gate`'s under the built-in policy (docs/GATE.md), and what fails it:
  each check or error finding, with the number of scripts (or languages) it fails on.
- **Worst script / floor**: the script whose running text has the lowest characters per token
  in proportion to its floor (docs/GATE.md): chars/token / floor.
- **Gini**: over the 13 languages' tokens per character (0: every language costs the same).
- **Rényi eff.**: Rényi efficiency (order 2.5) of the token-id distribution over all the text
  (docs/METRICS.md).
- **Characters per token** of each script's running text, the figure the floors judge.

bpe-gpt2 and bpe-o200k are 8,000-token byte-level BPEs that tests/realworld/build.py trains on
this same text (GPT-2's and o200k's split): their figures are in-sample, so better than they
would be on text they did not see. All verdicts are FAIL: no tokenizer here reaches every
script's floor on this text; read the columns for how far each falls short, and where.

"""
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
KEEP = 20  # fresh builds kept (other checkouts of other sources share the folder)
# What the table is a function of, hashed into KEY (besides the fixtures and the installed
# packages, see `key`): the package as measured (its default_policy.toml included) and this
# generator. trainer/ and eval/ (installed as fertility.trainer and fertility.eval) are left
# out, as the build never imports them: `build` checks that, so a change there costs no
# rebuild, and the day the table needs one of them the build stops instead of going stale.
KEYED = ("fertility", "tests/realworld/results.py", "tests/realworld/layout.py")
UNKEYED = ("fertility.trainer", "fertility.eval")


class BuildError(Exception):
    """The fresh build cannot be trusted: main() says why in one line, exit 2."""


def _files(top: Path) -> Iterator[Path]:
    if top.is_file():
        yield top
        return
    for p in sorted(top.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            yield p


def key(rw: Path) -> str:
    """A hash of every file the table reads or runs (KEYED; the fixtures' text, tokenizer files
    and SOURCES.json: their content, not their dates, so a fresh clone finds the same KEY),
    and of the Python and the versions of the packages installed beside fertility (a new
    tokenizers or numpy may change a figure)."""
    h = hashlib.sha256()
    tops = [(REPO, REPO / k) for k in KEYED]
    tops += [(rw, rw / "SOURCES.json"), (rw, rw / "text"), (rw, rw / "tokenizers")]
    for base, top in tops:
        for p in _files(top):
            data = p.read_bytes()
            h.update(f"{p.relative_to(base).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    # the environment's own site-packages only: the repository's fertility.egg-info, on
    # sys.path when run from the checkout, would otherwise count twice or not at all
    where = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    dists = {
        f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions(path=where)
    }
    env = [sys.version, platform.machine(), *sorted(dists)]
    h.update("\n".join(env).encode())
    return h.hexdigest()[:16]


def fresh_path(rw: Path, k: str) -> Path:
    """Beside the fixtures it is measured on, so every checkout of the same sources on this
    machine (a CI clone too) finds it: KEY tells them apart."""
    return rw / "results" / f"RESULTS.{k}.md"


def build(rw: Path) -> str:
    """The whole file, measured now."""
    # workers on every core from the start: the result is the same with any number (analyze's
    # contract), and the switch's probe would spend its first seconds on one core
    from fertility.threads import usable_cores

    text = render(rw, measure(rw, list(TOKENIZERS), workers=usable_cores()))
    imported = sorted(m for m in sys.modules if m.startswith(UNKEYED))
    if imported:
        raise BuildError(f"the table now imports {imported[0]}: add its folder to KEYED")
    return text


def fresh(rw: Path, say=print) -> Path:
    """The fresh build for the sources as they are: ROOT/results/RESULTS.<KEY>.md, built only
    when no file of that KEY is there. An interrupted build leaves no file, nor does one whose
    sources changed while it measured (KEY before and after differ)."""
    k = key(rw)
    path = fresh_path(rw, k)
    if path.is_file():
        say(f"{path}: up to date")
        return path
    say(f"building {path} (every tokenizer of the fixtures: a minute or two)")
    text = build(rw)
    if key(rw) != k:
        raise BuildError(f"{path}: the sources changed while they were measured: run it again")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    builds = sorted(path.parent.glob("RESULTS.*.md"), key=lambda p: p.stat().st_mtime)
    for old in builds[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


def measure(rw: Path, labels: list[str], workers: int | None = None) -> dict[str, dict]:
    """label -> the figures of its row, measured on rw/text."""
    import fertility  # deferred: numpy and pandas only when measuring
    from fertility.gate import evaluate

    specs = [f"{lab}={rw / 'tokenizers' / TOKENIZERS[lab]}" for lab in labels]
    report = fertility.analyze([str(rw / "text")], specs, policy=str(POLICY), workers=workers)
    entries = {t["label"]: t for t in report.to_dict()["tokenizers"]}
    out = {}
    for lab in labels:
        # every floor check the gate made (the JSON lists only the failing ones)
        result = evaluate(report, report.policy, label=lab, findings=report.findings)
        out[lab] = _row(entries[lab], result)
    return out


def _row(entry: dict, result: Any) -> dict:
    floors = [
        c
        for c in result.checks
        if c.name == "chars_per_token" and c.group == "script" and c.value is not None
    ]
    worst = min(floors, key=lambda c: c.value / c.threshold)
    rows = entry["rows"]
    total = next(r for r in rows if r["group"] == "all")
    failed = [c for c in result.checks if c.verdict != "pass"]
    reasons: dict[str, list[str]] = {}
    for c in failed:
        reasons.setdefault(c.name if c.verdict == "fail" else f"{c.name} ({c.verdict})", []).append(
            c.key
        )
    for f in result.blocking:
        reasons.setdefault(f"{f.rule} ({f.severity})", []).append(f.key)
    return {
        "vocab_size": entry["vocab_size"],
        "passed": result.passed,
        "reasons": reasons,
        "worst": (worst.key, worst.value, worst.threshold),
        "gini": entry["gini"]["value"],
        "renyi": total["renyi_efficiency"],
        # the running text of each script: what the gate judges against its floor
        "cpt": {r["key"]: r["chars_per_token"] for r in rows if r["group"] == "running"},
    }


def summary_line(label: str, r: dict, source: str) -> str:
    verdict = "PASS" if r["passed"] else "FAIL"
    why = ", ".join(f"{name} {len(keys)}" for name, keys in r["reasons"].items())
    script, value, floor = r["worst"]
    return (
        f"| {label} | {source} | {r['vocab_size']:,} | {verdict} | {why or '-'} | "
        f"{script} {value:.2f} / {floor:g} | {r['gini']:.3f} | {r['renyi']:.3f} |"
    )


def scripts_line(label: str, r: dict, scripts: list[str]) -> str:
    cells = [f"{r['cpt'][s]:.2f}" if s in r["cpt"] else "-" for s in scripts]
    return f"| {label} | {' | '.join(cells)} |"


def sources(rw: Path) -> list[str]:
    """The Sources section: each package and version of SOURCES.json, with what it gave."""
    data = json.loads((rw / "SOURCES.json").read_text(encoding="utf-8"))
    lines = [
        f"Fixtures of tests/realworld/build.py, BUILD_VERSION {data['build_version']}:",
        "",
        "| Package | Registry | Version | Licence | Used for |",
        "|---|---|---|---|---|",
    ]
    for s in data["sources"]:
        used = ", ".join(s["used_for"])
        lines.append(
            f"| {s['package']} | {s['registry']} | {s['version']} | {s['licence']} | {used} |"
        )
    return lines


def origins(rw: Path) -> dict[str, str]:
    """label -> the package and version its file comes from (SOURCES.json), or build.py."""
    data = json.loads((rw / "SOURCES.json").read_text(encoding="utf-8"))
    shipped = {
        used.removeprefix("tokenizers/"): f"{s['package']} {s['version']}"
        for s in data["sources"]
        for used in s["used_for"]
    }
    return {
        lab: shipped.get(spec.split("#")[0], "trained by build.py")
        for lab, spec in TOKENIZERS.items()
    }


def tables(rw: Path, results: dict[str, dict], scripts: list[str]) -> list[str]:
    source = origins(rw)
    lines = [
        "| Tokenizer | Source | Vocabulary | Verdict | Fails on | Worst script / floor | Gini "
        "| Rényi eff. |",
        "|---|---|---:|---|---|---|---:|---:|",
        *(summary_line(lab, r, source[lab]) for lab, r in results.items()),
        "",
        "Characters per token in each script's running text:",
        "",
        f"| Tokenizer | {' | '.join(scripts)} |",
        f"|---|{'---:|' * len(scripts)}",
        *(scripts_line(lab, r, scripts) for lab, r in results.items()),
    ]
    return lines


def render(rw: Path, results: dict[str, dict]) -> str:
    scripts = sorted({s for r in results.values() for s in r["cpt"]})
    head = HEAD.format(build_version=BUILD_VERSION)
    body = [BEGIN, *tables(rw, results, scripts), "", "## Sources", "", *sources(rw), END]
    return head + "\n".join(body) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "RESULTS.md"))
    ap.add_argument("--fresh", action="store_true", help="only the fresh build: OUT untouched")
    args = ap.parse_args(argv)
    rw = root()
    if not (rw / "READY").is_file():
        print(f"error: no fixtures at {rw}: run make fixtures", file=sys.stderr)
        return 2
    try:
        path = fresh(rw)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.fresh:
        shutil.copyfile(path, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
