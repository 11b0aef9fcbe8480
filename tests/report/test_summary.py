"""The terminal report a person reads: the verdicts first, a side-by-side table that fits the
terminal without cutting a number, small scripts folded, findings one line per rule and
tokenizer (every one of them with -v)."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from fertility.findings import Finding, diagnose
from fertility.measure import analyze
from fertility.options import CorpusOptions
from fertility.report.summary import group_findings, group_line, group_lines
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
    for r in f[f.group.isin(["language", "script"]) & (f.tokens > 0)].itertuples():
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
    # (headers wrap to their column's numbers when that shows more: "rt" above "fail")
    above = wide[wide.index(head) - 1]
    assert head.count("chars/tok") == 4 and head.count("fail") == 4 and above.count("rt") == 4
    assert "fail" not in next(x for x in narrow if x.startswith("group "))
    # what is left out is said, with how to see it
    assert any(x.startswith("left out to fit 120 columns: ") for x in narrow)
    assert '"rt fail"' in " ".join(narrow) and "-v shows every column" in " ".join(narrow)
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
    (other,) = [x for x in lines if x.startswith("other (1) ")]
    assert re.search(r"^other: the scripts .*\bCher\b", "\n".join(lines), re.M)
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


def test_findings_grouped_errors_first_each_key_once_with_its_value():
    fs = [
        _finding("warning", "byte-fallback", "a", "Beng", byte_fallback_rate=0.2),
        _finding("warning", "byte-fallback", "a", "Deva", byte_fallback_rate=0.5),
        _finding("warning", "byte-fallback", "b", "Hani", byte_fallback_rate=0.1),
        _finding("error", "mark-split", "b", "Beng", pretoken_mark_initial_rate=0.6),
        _finding("warning", "merge-starvation", "a", "Taml", graphemes_per_token=0.9),
        _finding("warning", "merge-starvation", "a", "Telu", graphemes_per_token=0.3),
        # the same script found twice by one rule (merge-starvation's two tests): once, at
        # its worst value; a finding without the value (its mark test) takes none
        _finding("warning", "merge-starvation", "a", "Telu", mark_initial_rate=0.4),
        _finding("warning", "merge-starvation", "a", "Beng", mark_initial_rate=0.4),
    ]
    groups = group_findings(fs, ["a", "b"])
    assert [(g.severity, g.rule, g.tokenizer) for g in groups] == [
        ("error", "mark-split", "b"),
        ("warning", "merge-starvation", "a"),
        ("warning", "byte-fallback", "a"),
        ("warning", "byte-fallback", "b"),
    ]
    assert (groups[2].keys, groups[2].worst_key) == (["Deva", "Beng"], "Deva")
    # fewest graphemes per token is the worst; Telu once; Beng without a value last
    assert groups[1].keys == ["Telu", "Taml", "Beng"]
    lines = group_lines(groups, 120)
    assert lines[0] == "error mark-split (N% of pre-tokens start at a mark)"
    assert lines[1].split() == ["b", "1:", "Beng", "60.0%"]
    assert lines[2] == "warning merge-starvation (N graphemes/token)"
    assert lines[3].split(None, 2)[2] == "Telu 0.30, Taml 0.90, Beng"
    assert "Deva 50.0%, Beng 20.0%" in lines[5]
    # many keys: the least bad ones give way to "+N more", a value is never cut
    many = group_findings(
        [_finding("warning", "unk", "a", f"K{i:02d}", unk_rate=i / 1000) for i in range(30)]
    )[0]
    line = group_line(many, 80)
    assert len(line) <= 80 and line.split(": ", 1)[1].startswith("K29 2.90%, K28 2.80%")
    shown, more = re.search(r"30: (.*) \+(\d+) more", line).groups()
    assert len(shown.split(", ")) + int(more) == 30
    assert all(re.fullmatch(r"K\d\d \d\.\d\d%", x) for x in shown.split(", "))


def test_verbose_prints_every_finding(profile):
    profile.findings = [
        _finding("warning", "byte-fallback", "gpt2", "Beng", byte_fallback_rate=0.2),
        _finding("warning", "byte-fallback", "gpt2", "Deva", byte_fallback_rate=0.5),
    ]
    short = render_table(profile, width=120)
    full = render_table(profile, width=120, verbose=True)
    assert "cause of byte-fallback Beng" not in short and "2: Deva 50.0%, Beng 20.0%" in short
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


def display_cells(line: str) -> int:
    """Terminal cells by unicodedata alone (the second method to the table's `cells`):
    East Asian wide and fullwidth characters take two, the rest one (no line here carries a
    combining mark: the text itself is never printed)."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in line)


@pytest.fixture(scope="module")
def four(rw, tmp_path_factory):  # noqa: F811
    """Four real tokenizers (two tiktoken rank files, Llama 3's, a SentencePiece model) on
    real text of 13 languages; the Japanese lines labelled 日本語 by a JSON field (in a file
    whose name names no language), so a label
    of wide characters runs through every table."""
    corpus = tmp_path_factory.mktemp("four")
    for src in sorted((ROOT / "tests/realworld/excerpt").glob("*.txt")):
        lines = [x for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
        if src.stem == "ja":
            recs = [json.dumps({"text": x, "lang": "日本語"}, ensure_ascii=False) for x in lines]
            (corpus / "records.jsonl").write_text("\n".join(recs) + "\n", encoding="utf-8")
        else:
            (corpus / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = rw / "tokenizers"
    rep = analyze(
        [corpus],
        [
            str(t / "o200k_base.tiktoken"),
            str(t / "cl100k_base.tiktoken"),
            f"llama3={t / 'llama3/tokenizer.model'}#llama3",
            f"mistral={t / 'mistral/tokenizer.model.v1'}",
        ],
        corpus_options=CorpusOptions(lang_field="lang"),
    )
    rep.findings = diagnose(rep)
    return rep, corpus


@pytest.mark.realworld
@pytest.mark.parametrize("width", [80, 120])
def test_four_real_tokenizers_on_13_languages_fit_the_terminal(four, rw, width):  # noqa: F811
    rep, corpus = four
    lines = render_table(rep, width=width).splitlines()
    wide = [x for x in lines if display_cells(x) > width]
    assert not wide, wide
    assert any("language:日本語" in x for x in lines)  # (the wide label is in the table)
    at = {
        k: next(i for i, x in enumerate(lines) if x.startswith(k))
        for k in ("verdict ", "group ", "findings:")
    }
    assert at["verdict "] < at["group "] < at["findings:"]  # the answer first
    rows = {x.split()[1]: x.split()[0] for x in lines[at["verdict "] + 2 : at["verdict "] + 6]}
    assert set(rows) == {"o200k_base", "cl100k_base", "llama3", "mistral"}
    assert rows["cl100k_base"] == "FAIL"  # its split cuts Brahmic vowel signs: an error
    # a column the width cannot hold is named, with how to see it
    verdict_block = "\n".join(lines[: at["group "]])
    if width == 80:
        assert "left out to fit 80 columns" in verdict_block and "-v shows them" in verdict_block
    assert "checks failed:" in verdict_block and "blocking findings:" in verdict_block
    # every tokenizer's chars/token on every language, in its own table or a further one
    text = "\n".join(lines)
    assert text.count("language:te ") == 2  # two tables: two tokenizers each
    te = [x for x in (corpus / "te.txt").read_text(encoding="utf-8").splitlines() if x.strip()]
    te_rows = " ".join(x for x in lines if x.startswith("language:te "))
    for name in ("o200k_base", "cl100k_base"):
        enc = _tiktoken(rw, name)
        cpt = sum(map(len, te)) / sum(len(enc.encode_ordinary(t)) for t in te)
        assert f"{cpt:.2f}" in te_rows.split()
    # findings: a heading per rule naming what its values are, then one line per tokenizer
    # naming each script or language once, each with a value in that unit
    body = lines[at["findings:"] :]
    for x in body[1:]:
        if not x.startswith("  "):
            if x and not x.startswith("  "):
                continue
        m = re.fullmatch(r"  (\S+) +(\d+): (.*)", x)
        if m is None:
            continue
        items = [i for i in m.group(3).split(", ") if not i.startswith("+")]
        items[-1] = re.sub(r" \+\d+ more$", "", items[-1])
        keys = [i.split()[0] for i in items]
        assert len(keys) == len(set(keys)), x  # each once
    headings = [x for x in body if re.match(r"(error|warning|info) \S+", x)]
    assert headings and all(re.search(r" \(.*N.*\)$", h) for h in headings), headings


def test_a_script_judged_by_its_language_keeps_its_row(tmp_path):
    """English and Russian of examples/corpus (5.6k and 5.3k characters, 60 lines each) and
    a stray Cherokee line: under min_share = 0.6 each script is under it of the corpus, but
    Latin and Cyrillic are their language's whole running text, judged, so keep their rows;
    Cherokee (two words in one English line) folds."""
    for lang in ("en", "ru"):
        lines = (ROOT / f"examples/corpus/{lang}.txt").read_text(encoding="utf-8").splitlines()
        extra = ["Hello ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"] if lang == "en" else []
        (tmp_path / f"{lang}.txt").write_text("\n".join(lines + extra) + "\n", encoding="utf-8")
    rep = analyze([tmp_path], [], pretokenizers=["o200k"])
    scripts = rep.frame[rep.frame.group == "script"].set_index("key")["chars"]
    assert (scripts / scripts.sum() < 0.6).all()  # every script under min_share of the corpus
    lines = table_lines(rep, min_share=0.6, width=120)
    assert [x for x in lines if x.startswith("script:Latn")]
    assert [x for x in lines if x.startswith("script:Cyrl")]
    assert re.search(r"^other: the scripts Cher,? ", "\n".join(lines), re.M)
