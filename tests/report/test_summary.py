"""The terminal report a person reads: the verdicts first, a side-by-side table that fits the
terminal without cutting a number, small scripts folded, findings one line per rule and
tokenizer (every one of them with -v)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from fertility.findings import Finding
from fertility.measure import analyze
from fertility.report.summary import group_findings, group_line
from fertility.report.text import render_table, table_lines
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ["gpt2", "cl100k", "o200k", "whitespace"]


@pytest.fixture(scope="module")
def profile():
    return analyze([ROOT / "examples/corpus"], [], pretokenizers=FAMILIES)


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_table_fits_the_width_and_keeps_every_number(profile, width):
    lines = table_lines(profile, width=width)
    assert max(len(x) for x in lines) <= width
    text = "\n".join(lines)
    f = profile.frame
    for r in f[f.group != "all"].itertuples():
        # each label's chars/token, summed counts divided by hand, whole in the table
        assert re.search(rf"(?m)^{r.group}:{r.key}\s.*\b{r.chars / r.tokens:.2f}\b", text)
        assert f"{r.chars_per_token_lo:.2f}-{r.chars_per_token_hi:.2f}" in text
    # four families of two essential columns need about 130 columns: further tables
    headers = [x for x in lines if x.startswith("group ")]
    assert (len(headers) > 1) == (width <= 120)
    for fam in FAMILIES:
        assert fam in text


def test_wide_terminal_shows_more_columns(profile):
    narrow = table_lines(profile, width=120)
    wide = table_lines(profile, width=400)
    head = next(x for x in wide if x.startswith("group "))
    assert head.count("chars/tok") == 4 and head.count("rt fail") == 4
    assert "rt fail" not in next(x for x in narrow if x.startswith("group "))
    # -v: every column of every family, wrapped onto further tables within the width
    full = table_lines(profile, width=80, verbose=True)
    heads = " ".join(x for x in full if x.startswith("group "))
    assert max(len(x) for x in full) <= 80
    assert heads.count("chars/tok") == 4 and heads.count("unk") == 4


def test_scripts_under_min_share_fold_into_one_line(tmp_path):
    en = (ROOT / "examples/corpus/en.txt").read_text(encoding="utf-8").splitlines()
    cherokee = "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"
    (tmp_path / "en.txt").write_text("\n".join(en + [f"Hello {cherokee}"]) + "\n", encoding="utf-8")
    text = (tmp_path / "en.txt").read_text(encoding="utf-8")
    assert len(regex.findall(r"\p{Cherokee}", text)) / len(regex.findall(r"\p{L}", text)) < 0.01
    rep = analyze([tmp_path], [], pretokenizers=["o200k"])
    lines = table_lines(rep, min_share=0.01, width=120)
    assert not [x for x in lines if x.startswith("script:Cher")]
    assert [x for x in lines if x.startswith("script:Latn")]
    (other,) = [x for x in lines if x.startswith("other scripts (")]
    assert re.search(r"^other scripts: .*\bCher\b", lines[-1])
    # the folded row: its counts summed and divided (one script here: its own ratio)
    cher = rep.frame[(rep.frame.group == "script") & (rep.frame.key == "Cher")].iloc[0]
    assert f"{cher.chars / cher.tokens:.2f}" in other.split()
    # JSON keeps the row
    assert any(r["key"] == "Cher" for t in rep.to_dict()["pretokenizers"] for r in t["rows"])
    assert any(x.startswith("script:Cher") for x in table_lines(rep, min_share=0.0, width=120))


def _finding(severity, rule, tok, key, **ev):
    return Finding(
        rule, severity, tok, "script", key, ev, f"cause of {rule} {key}", f"fix of {rule} {key}"
    )


def test_findings_grouped_errors_first_with_the_worst_value():
    fs = [
        _finding("warning", "byte-fallback", "a", "Beng", byte_fallback_rate=0.2),
        _finding("warning", "byte-fallback", "a", "Deva", byte_fallback_rate=0.5),
        _finding("warning", "byte-fallback", "b", "Hani", byte_fallback_rate=0.1),
        _finding("error", "mark-split", "b", "Beng", pretoken_mark_initial_rate=0.6),
        _finding("warning", "merge-starvation", "a", "Taml", graphemes_per_token=0.9),
        _finding("warning", "merge-starvation", "a", "Telu", graphemes_per_token=0.3),
    ]
    groups = group_findings(fs, ["a", "b"])
    assert [(g.severity, g.rule, g.tokenizer) for g in groups] == [
        ("error", "mark-split", "b"),
        ("warning", "merge-starvation", "a"),
        ("warning", "byte-fallback", "a"),
        ("warning", "byte-fallback", "b"),
    ]
    assert (groups[2].keys, groups[2].worst_key) == (["Beng", "Deva"], "Deva")
    assert groups[1].worst_key == "Telu"  # fewest graphemes per token is the worst
    assert "50.0%" in group_line(groups[2], 120)
    # many keys: the list is shortened to the width, never the worst value
    many = group_findings(
        [_finding("warning", "unk", "a", f"K{i:02d}", unk_rate=i / 1000) for i in range(30)]
    )[0]
    line = group_line(many, 80)
    assert len(line) <= 80 and line.endswith("(worst K29: 2.90% UNK)")
    shown, more = re.search(r"30: (.*) \+(\d+) more", line).groups()
    assert len(shown.split()) + int(more) == 30


def test_verbose_prints_every_finding(profile):
    profile.findings = [
        _finding("warning", "byte-fallback", "gpt2", "Beng", byte_fallback_rate=0.2),
        _finding("warning", "byte-fallback", "gpt2", "Deva", byte_fallback_rate=0.5),
    ]
    short = render_table(profile, width=120)
    full = render_table(profile, width=120, verbose=True)
    assert "cause of byte-fallback Beng" not in short and "2: Beng Deva" in short
    for key in ("Beng", "Deva"):
        assert f"cause of byte-fallback {key}" in full and f"fix of byte-fallback {key}" in full
    assert "byte_fallback_rate=0.5" in full
    profile.findings = []


# ---------------------------------------------------------------- real tokenizers, real text


def _tiktoken(root: Path, name: str) -> tiktoken.Encoding:
    """tiktoken's own encoding (its own split pattern) over the ranks file, offline."""
    ranks = tiktoken.load.load_tiktoken_bpe(str(root / "tokenizers" / f"{name}.tiktoken"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
        ctor = openai_public.ENCODING_CONSTRUCTORS[name]()
    ctor["special_tokens"] = {}
    return tiktoken.Encoding(**ctor)


@pytest.mark.realworld
def test_two_real_tokenizers_on_14_languages_fit_one_screen(rw, run, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COLUMNS", "120")
    excerpt = ROOT / "tests/realworld/excerpt"
    code, out, _ = run(
        "report",
        excerpt,
        rw / "parallel",
        "-q",
        "-t",
        rw / "tokenizers/o200k_base.tiktoken",
        "-t",
        rw / "tokenizers/cl100k_base.tiktoken",
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) <= 60 and max(len(x) for x in lines) <= 120
    at = {
        k: next(i for i, x in enumerate(lines) if x.startswith(k))
        for k in ("verdict ", "group ", "findings:")
    }
    assert at["verdict "] < at["group "] < at["findings:"]  # the answer first
    verdict = {x.split()[1]: x.split()[0] for x in lines[at["verdict "] + 2 : at["verdict "] + 4]}
    assert verdict["cl100k_base"] == "FAIL"  # its split cuts Brahmic vowel signs: an error
    assert any(x.startswith("prefer o200k_base:") for x in lines)
    assert any(re.match(r"error\s+mark-split\s+cl100k_base\s", x) for x in lines)
    # Telugu chars/token of each tokenizer, from tiktoken itself over the same lines
    te = [
        ln
        for p in (excerpt / "te.txt", rw / "parallel/te.txt")
        for ln in p.read_text(encoding="utf-8").splitlines()
        if ln.strip()
    ]
    (row,) = [x for x in lines if x.startswith("language:te ")]
    for name in ("o200k_base", "cl100k_base"):
        enc = _tiktoken(rw, name)
        cpt = sum(map(len, te)) / sum(len(enc.encode_ordinary(t)) for t in te)
        assert f"{cpt:.2f}" in row.split()
