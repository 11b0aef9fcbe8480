"""The HTML report: self-contained, every piece of corpus text escaped, token boundaries drawn,
several tokenizers side by side, and (with Debian's chromium installed) it renders in a
headless browser without a JavaScript error."""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import regex

from fertility.findings import Finding, diagnose
from fertility.gate import evaluate
from fertility.measure import TokenizerInfo, analyze
from fertility.policy import default_policy
from fertility.report import html as html_mod
from fertility.report.html import render_html, tokens_html

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
INJECT_BN = (
    "বাংলা ভাষা <script>alert(1)</script> আর \"onerror=alert(2) x='<img src=x onerror=alert(3)>'"
)
EVIL_LABEL = "<img src=x onerror=alert(4)>"


class Tags(HTMLParser):
    """Every start tag with its attributes, the contents of each <script>, and the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.scripts, self.text, self._in_script = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = (dict(attrs), [])

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            attrs, parts = self._in_script
            self.scripts.append((attrs, "".join(parts)))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._in_script[1].append(data)
        else:
            self.text.append(data)


@pytest.fixture(scope="module")
def evil_report(tmp_path_factory):
    """Two pre-tokenizer families on 14 languages (Bengali and English among them), one
    document carrying markup, and one "tokenizer" renamed to a label that is itself markup."""
    tmp = tmp_path_factory.mktemp("evil")
    bn = (ROOT / "examples/corpus/bn.txt").read_text(encoding="utf-8").splitlines()[:12]
    evil = f"{bn[0]} {INJECT_BN} {bn[1]}"  # mostly Bengali, so a Bengali sample
    # three Bengali documents: all of them samples (three per script), the markup one too
    (tmp / "bn.txt").write_text("\n".join([evil] + bn[2:4]) + "\n", encoding="utf-8")
    en = (ROOT / "examples/corpus/en.txt").read_text(encoding="utf-8").splitlines()[:12]
    (tmp / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    # twelve more languages of real text (tests/realworld/excerpt's eleven, the examples'
    # Spanish): charts of 14 languages
    more = sorted((ROOT / "tests/realworld/excerpt").glob("*.txt"))
    for src in more + [ROOT / "examples/corpus/es.txt"]:
        if src.stem not in ("bn", "en"):
            lines = src.read_text(encoding="utf-8").splitlines()[:12]
            (tmp / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = analyze([tmp], [], pretokenizers=["gpt2", "o200k"])
    rename = {"gpt2": EVIL_LABEL}
    rep.frame["tokenizer"] = rep.frame["tokenizer"].replace(rename)
    # the table too: the findings section reads its values there (Report.table)
    rep.table = [{**r, "tokenizer": rename.get(r["tokenizer"], r["tokenizer"])} for r in rep.table]
    rep.docs["tokenizer"] = rep.docs["tokenizer"].replace(rename)
    rep.samples = {(rename.get(a, a), s): v for (a, s), v in rep.samples.items()}
    for d in rep.tokenizers:
        d.label = rename.get(d.label, d.label)
    findings = diagnose(rep)
    return rep, findings, render_html(rep, findings)


def test_corpus_text_and_labels_are_escaped(evil_report):
    _, _, html = evil_report
    p = Tags()
    p.feed(html)
    # no attribute of any element is an event handler, no element loads anything
    assert not [(t, a) for t, a in p.tags for name in a if name.lower().startswith("on")]
    assert not [(t, a) for t, a in p.tags if "src" in a or "href" in a]
    assert {t for t, _ in p.tags} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "script",
        "body",
        "h1",
        "h2",
        "h3",
        "h4",
        "p",
        "div",
        "span",
        "table",
        "tr",
        "th",
        "td",
        "b",
        "br",
        "details",
        "summary",
    }
    # our scripts only: plotly.js, one JSON block per chart, the initialiser
    kinds = [a.get("type", "js") for a, _ in p.scripts]
    assert kinds.count("application/json") == 3 and kinds.count("js") == 2
    for attrs, body in p.scripts:
        if attrs.get("type") == "application/json":
            assert "<" not in body and ">" not in body  # cannot close its element
            json.loads(body)  # escaped, still valid JSON
    plotly_js = p.scripts[0][1]
    assert "alert(1)" not in plotly_js and "onerror=alert" not in plotly_js
    # the markup shows as text, character for character
    text = "".join(p.text)
    assert "<script>alert(1)</script>" in text and EVIL_LABEL in text
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html


def test_report_is_self_contained(evil_report):
    _, _, html = evil_report
    import plotly.offline

    head = plotly.offline.get_plotlyjs()[:60]
    assert html.count(head) == 1  # plotly.js embedded once
    assert "<link" not in html and "<script src" not in html


def test_token_boundaries_are_drawn():
    # "বাংলা" under the GPT-2 split: ব | াং | ল | া  (by hand); UTF-8 of U+09AC is e0 a6 ac
    out = tokens_html("বাংলা", [(0, 1), (1, 3), (3, 4), (4, 5)])
    assert out == (
        '<span class="t0" title="bytes e0 a6 ac">ব</span>'
        '<span class="t1 mi" title="bytes e0 a6 be e0 a6 82">াং</span>'
        '<span class="t0" title="bytes e0 a6 b2">ল</span>'
        '<span class="t1 mi" title="bytes e0 a6 be">া</span>'
    )
    # byte pieces: two tokens share the first character and are drawn as one span with both
    # ids (half a character cannot be drawn); a gap is left as plain text
    out = tokens_html("ক খ", [(0, 1), (0, 1), (2, 3)], [5, 6, 7])
    assert out == (
        '<span class="t0 bp" title="tokens 5, 6; text bytes e0 a6 95">ক</span> '
        '<span class="t1" title="token 7; text bytes e0 a6 96">খ</span>'
    )
    pieces = {5: b"\xe0\xa6", 6: b"\x95", 7: b"\xe0\xa6\x96"}
    out = tokens_html("ক খ", [(0, 1), (0, 1), (2, 3)], [5, 6, 7], pieces.__getitem__)
    assert 'title="token 5: bytes e0 a6; token 6: bytes 95"' in out
    assert (
        tokens_html("<b>", [(0, 3)]) == '<span class="t0" title="bytes 3c 62 3e">&lt;b&gt;</span>'
    )


def test_tokenizers_side_by_side_with_interval_bars(evil_report):
    rep, findings, html = evil_report
    assert any(f.key == "Beng" for f in findings)  # Bengali is flagged: its samples show
    p = Tags()
    p.feed(html)
    grids = [a for t, a in p.tags if t == "div" and a.get("class") == "cmp"]
    assert grids and all("repeat(2," in a["style"] for a in grids)  # two tokenizers
    figs = {a["data-plot"]: json.loads(b) for a, b in p.scripts if "data-plot" in a}
    bars = figs["plot-cpt"]["data"]
    assert len(bars) == 2
    f = rep.frame
    for trace in bars:
        label = EVIL_LABEL if "img" in trace["name"] else trace["name"]
        for x, y, up, down in zip(
            trace["x"], trace["y"], trace["error_y"]["array"], trace["error_y"]["arrayminus"]
        ):
            r = f[(f.tokenizer == label) & (f.group == "script") & (f.key == x)].iloc[0]
            # y is one correctly rounded float64 division of the same integers, and JSON keeps
            # a float's every bit: exact. The error bars are (hi - y) and (y - lo), so adding
            # y back rounds twice: approx's default rel=1e-6 is only that (a bar drawn to the
            # wrong bound is off by the interval's width).
            assert y == r.chars / r.tokens
            assert y + up == pytest.approx(r.chars_per_token_hi)
            assert y - down == pytest.approx(r.chars_per_token_lo)


def test_gate_verdict_summary_first_and_findings_grouped():
    from tests.findings.test_diagnose import GPT2_CONFIG, make_report, row

    rep = make_report([row("t", "Beng", mark=600, pre_mark=500)], configs={"t": GPT2_CONFIG})
    res = evaluate(rep, default_policy())
    assert not res.passed  # mark-split is an error
    extra = [
        Finding(
            "grapheme-split",
            "warning",
            "t",
            "script",
            key,
            {"grapheme_split_rate": r},
            f"cuts <vowel> signs in {key}",
            "use \\p{M}",
        )
        for key, r in (("Beng", 0.3), ("Deva", 0.4))
    ]
    html = render_html(rep, res.findings + extra, res)
    p = Tags()
    p.feed(html)
    text = "".join(p.text)
    assert "cuts <vowel> signs in Deva" in text and "Gate FAIL" in text
    # the heading's badge, one per tokenizer in the summary, then one per check
    badges = [a["class"] for t, a in p.tags if t == "span" and "verdict" in a.get("class", "")]
    assert badges == ["verdict fail", "verdict fail"] + [f"verdict {c.verdict}" for c in res.checks]
    assert html.index("<h2>Gate ") < html.index('id="plot-') < html.index("<h2>Findings")
    # one collapsible group per (severity, rule, tokenizer), errors first, every finding inside
    summaries = [x for x in re.findall(r"<summary>(.*?)</summary>", html) if "class=sev" in x]
    assert len(summaries) == 2 and ">error<" in summaries[0] and "grapheme-split" in summaries[1]
    # each script once with its value, worst first, and what the values are
    assert "2: Deva 40.0%, Beng 30.0%" in summaries[1]
    assert "(N% of boundaries inside a grapheme)" in summaries[1]


def test_lossy_tokenizer_is_not_a_plain_pass():
    from tests.findings.test_diagnose import make_report, row

    rep = make_report(
        [
            row("t", "Latn", tokens=1500),
            row("t", "en", group="language", tokens=1500, rt_checked=10, rt_fail=3),
        ]
    )
    res = evaluate(rep, dataclasses.replace(default_policy(), allow_lossy=True))
    html = render_html(rep, res.findings, res)
    assert res.passed and 'Gate <span class="verdict lossy">PASS, LOSSY</span>' in html


# ---------------------------------------------------------------- headless chromium

HOOK = """<script>
window.__errors = [];
function __note(kind, msg) {
  var el = document.getElementById('__js_errors');
  if (!el) { el = document.createElement('pre'); el.id = '__js_errors';
             (document.body || document.documentElement).appendChild(el); }
  el.textContent += kind + ': ' + msg + '\\n';
}
window.addEventListener('error', function (e) { __note('error', e.message); });
window.addEventListener('unhandledrejection', function (e) { __note('rejection', e.reason); });
var __ce = console.error;
console.error = function () { __note('console.error', Array.from(arguments).join(' '));
                              __ce.apply(console, arguments); };
window.alert = function (m) { __note('alert', m); };
</script>"""


# Runs after the charts are drawn: where the first chart and the first finding sit, and for
# each sample the width of its text drawn as token spans against the same text drawn plain.
# Equal widths mean the spans left shaping alone (a broken Bengali syllable is wider: its
# vowel sign sits on a dotted circle).
PROBE = """<script>
(function () {
  var y = function (el) { return el ? el.getBoundingClientRect().top + window.scrollY : -1; };
  var widths = [], styles = [];
  document.querySelectorAll('.toks').forEach(function (el) {
    var spans = document.createElement('span'), plain = document.createElement('span');
    spans.innerHTML = el.innerHTML; plain.textContent = el.textContent;
    [spans, plain].forEach(function (x) { x.style.whiteSpace = 'nowrap'; el.appendChild(x); });
    widths.push([spans.getBoundingClientRect().width, plain.getBoundingClientRect().width,
                 el.getAttribute('dir'), el.textContent.slice(0, 20)]);
    spans.remove(); plain.remove();
    el.querySelectorAll('span').forEach(function (t) {
      var c = getComputedStyle(t);
      styles.push([c.display, c.paddingLeft, c.borderLeftWidth, c.marginLeft].join(' '));
    });
  });
  // each chart's x labels as drawn: [left, right, text]
  var ticks = {};
  document.querySelectorAll('.plot').forEach(function (p) {
    ticks[p.id] = Array.from(p.querySelectorAll('.xtick text')).map(function (t) {
      var r = t.getBoundingClientRect(); return [r.left, r.right, t.textContent]; });
  });
  var out = document.createElement('pre'); out.id = '__probe';
  out.textContent = JSON.stringify({chart: y(document.getElementById('plot-cpt')), ticks: ticks,
    finding: y(document.querySelector('details')), widths: widths,
    styles: Array.from(new Set(styles))});
  document.body.appendChild(out);
})();
</script>"""


def png_pixels_vary(path: Path) -> int:
    """Distinct byte values in the decompressed image data (a blank page has very few)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


def chromium(args, tmp: Path):
    base = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2000",
        "--virtual-time-budget=5000",
    ]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed")
def test_report_renders_in_headless_chromium(evil_report, tmp_path):
    rep, _, html = evil_report
    # the report with an error hook that runs before any other script
    page = tmp_path / "report.html"
    page.write_text(
        html.replace("<head>", "<head>" + HOOK, 1).replace("</body>", PROBE + "</body>"),
        encoding="utf-8",
    )
    shot = tmp_path / "shot.png"
    run = chromium(["--dump-dom", f"--screenshot={shot}", page.as_uri()], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    p = Tags()
    p.feed(run.stdout)
    errors = [t for t, a in p.tags if a.get("id") == "__js_errors"]
    assert not errors, run.stdout[run.stdout.find('id="__js_errors"') :][:2000]
    assert "Uncaught" not in run.stderr
    # the charts really ran: plotly drew its SVG into each plot div
    assert run.stdout.count('class="main-svg"') >= 3
    assert shot.exists() and shot.stat().st_size > 20_000 and png_pixels_vary(shot) > 50
    probe = json.loads(
        re.search(r'<pre id="__probe">(.*?)</pre>', run.stdout, re.DOTALL)
        .group(1)
        .replace("&quot;", '"')
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
    )
    assert 0 < probe["chart"] < probe["finding"]  # the first chart above the first finding
    # every chart labels every one of its 14 languages or scripts, no two labels overlapping
    langs = sorted(str(k) for k in rep.frame.loc[rep.frame.group == "language", "key"].unique())
    assert len(langs) == 14 and sorted(t[2] for t in probe["ticks"]["plot-share"]) == langs
    for plot, ticks in probe["ticks"].items():
        assert len(ticks) >= 13, plot
        ticks.sort()
        assert all(a[1] <= b[0] for a, b in zip(ticks, ticks[1:])), (plot, ticks)
    # tokens are plain inline spans: no box, padding, border or margin around any of them
    assert probe["styles"] == ["inline 0px 0px 0px"]
    bengali = [w for w in probe["widths"] if regex.search(r"\p{Bengali}", w[3])]
    # (sub-pixel kerning across spans moves a line by under a pixel; one dotted circle is ~10 px)
    widths = probe["widths"]
    assert bengali and all(abs(a - b) < 1 + b / 1000 for a, b, _, _ in widths), widths


def test_right_to_left_samples_and_token_ids_on_hover():
    from types import SimpleNamespace

    samples = {
        ("t", "Arab"): [{"text": "سلام عليكم", "spans": [[0, 4], [4, 10]], "ids": [11, 12]}],
        ("t", "Latn"): [{"text": "hello", "spans": [[0, 5]], "ids": [13]}],
    }
    rep = SimpleNamespace(samples=samples, tokenizers=[TokenizerInfo("t", "t", "hf")])
    found = [
        Finding("byte-fallback", "warning", "t", "script", k, {}, "c", "f")
        for k in ("Arab", "Latn")
    ]
    out = html_mod._samples_section(rep, found, ["t"])
    arab, latn = out.index('id="sample-Arab"'), out.index('id="sample-Latn"')
    assert '<div class=toks dir="rtl">' in out[arab:latn]
    assert '<div class=toks dir="ltr">' in out[latn:]
    assert 'title="token 11; text bytes d8 b3 d9 84 d8 a7 d9 85"' in out  # UTF-8 of سلام


def test_share_chart_and_intervals_say_what_they_measure(evil_report):
    rep, _, html = evil_report
    p = Tags()
    p.feed(html)
    figs = {a["data-plot"]: json.loads(b) for a, b in p.scripts if "data-plot" in a}
    f = rep.frame
    for trace in figs["plot-share"]["data"]:
        if trace.get("type") != "bar":
            continue
        label = EVIL_LABEL if "img" in trace["name"] else trace["name"]
        rows = f[f.tokenizer == label]
        total = rows[rows.group == "all"].iloc[0]
        for lang, y in zip(trace["x"], trace["y"]):
            r = rows[(rows.group == "language") & (rows.key == lang)].iloc[0]
            # from the counts: this language's tokens per character over the rest's
            rest = (total.tokens - r.tokens) / (total.chars - r.chars)
            assert y == pytest.approx((r.tokens / r.chars) / rest, rel=1e-9)  # 4 roundings
    # the ceiling chart is on a log scale (ceilings of 15-25 for Thai and Kana would flatten
    # every other script's bars)
    assert figs["plot-ceiling"]["layout"]["yaxis"]["type"] == "log"
    # an interval is printed, or said to be missing: never "[, ]" (in the page's text)
    assert "[, ]" not in "".join(p.text)
    gone = rep.frame.copy()
    gone.loc[gone.group == "script", ["chars_per_token_lo", "chars_per_token_hi"]] = None
    section = html_mod._table_section(gone, ["o200k"], ["Beng"])
    assert "(no interval)" in section and "[, ]" not in section


def test_samples_are_the_documents_that_show_the_trouble(tmp_path):
    """Per script, the samples are the in-script documents of 80+ characters with the most
    tokens per character, counted here by the tokenizers library itself; a repeated text is
    shown once."""
    from tests.bpe import byte_level_bpe

    bn = (ROOT / "examples/corpus/bn.txt").read_text(encoding="utf-8").splitlines()
    en = (ROOT / "examples/corpus/en.txt").read_text(encoding="utf-8").splitlines()
    tok = byte_level_bpe(en + bn[:10], 400, path=tmp_path / "tok.json")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # placeholders around Bengali words: more Latin code points than Bengali (so a Latin
    # document), but under nine in ten of its letters Latin: no Latin sample, though its
    # braces and Bengali bytes give it the most tokens per character of the Latin ones
    mixed = "{count} {name} {total} বাংলা ভাষা " * 3
    assert len(regex.findall(r"\p{Latin}", mixed)) > len(regex.findall(r"\p{Bengali}", mixed))
    (corpus / "bn.txt").write_text("\n".join(bn + [bn[5]] * 2) + "\n", encoding="utf-8")
    (corpus / "en.txt").write_text("\n".join(en + [mixed]) + "\n", encoding="utf-8")
    rep = analyze([corpus], [f"bpe={tmp_path / 'tok.json'}"])
    got = [d["text"] for d in rep.samples[("bpe", "Beng")]]

    def tpc(line):
        return len(tok.encode(line).ids) / len(line)

    best = sorted((x for x in bn if len(x) >= 80), key=tpc, reverse=True)
    assert len(set(got)) == len(got) or got.count(bn[5]) > 1  # (a repeat may rank twice)
    assert set(got) <= set(best[:3]) | {bn[5]}
    assert got[0] == best[0]
    assert mixed[:600] not in [d["text"] for d in rep.samples[("bpe", "Latn")]]
    findings = [Finding("byte-fallback", "warning", "bpe", "script", "Beng", {}, "c", "f")]
    html = html_mod._samples_section(rep, findings, ["bpe"])
    for text in set(got):
        shown = html.count(f">{html_mod.esc(text[:1])}")  # (every sample starts a token)
        assert shown >= 1
    assert len(re.findall(r"<div class=cmp ", html)) == len(set(got))  # each text once
