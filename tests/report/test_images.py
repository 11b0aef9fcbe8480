"""`fertility report --plots DIR`: the HTML's charts as PNG and SVG files (kaleido, drawing in the
machine's Chromium), the language-overlap heatmap and the Rényi efficiency in the HTML."""

from __future__ import annotations

import dataclasses
import re
import shutil
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fertility.measure import analyze
from fertility.report import images
from fertility.report.html import charts, render_html
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld

GPT2 = "tokenizers/bpe-gpt2/tokenizer.json"
LANGS = ("bn", "en", "ru", "zh")
# choreographer's own search finds these names on the PATH (CI installs Debian's chromium)
BROWSER = next(
    (shutil.which(n) for n in ("chromium", "google-chrome", "chrome") if shutil.which(n)), None
)


@pytest.fixture(scope="module")
def corpus(rw, tmp_path_factory) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("corpus")
    for lang in LANGS:
        keep = (rw / "text" / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[:80]
        (folder / f"{lang}.txt").write_text("\n".join(keep) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def report(rw, corpus):  # noqa: F811
    return analyze([corpus], [f"gpt2={rw / GPT2}"])


def test_html_has_the_overlap_heatmap_and_renyi_efficiency(report):
    page = render_html(report, [])
    assert 'id="plot-overlap-1"' in page and "Jensen-Shannon" in page
    heat = dict((n, f) for n, _, f in charts(report))["overlap-1"].data[0]
    assert list(heat.x) == sorted(LANGS) and heat.type == "heatmap"
    assert heat.z[0][0] == 1.0  # a language against itself
    # the table shows the frame's value in the registry's format (3 decimals)
    rows = report.frame[(report.frame.group == "script") & (report.frame.key == "Beng")]
    assert f"renyi eff {float(rows['renyi_efficiency'].iloc[0]):.3f}" in page


def test_a_frame_without_the_column_shows_no_renyi(report):
    table = [{k: v for k, v in r.items() if k != "renyi_efficiency"} for r in report.table]
    bare = dataclasses.replace(report, table=table)
    assert "renyi eff" not in render_html(bare, [])


@pytest.mark.skipif(BROWSER is None, reason="no Chrome or Chromium on the PATH for kaleido")
def test_plots_are_valid_png_and_svg(report, tmp_path):
    written = images.write_plots(report, tmp_path / "plots")
    figs = {n: f for n, _, f in charts(report)}
    names = sorted(p.name for p in written)
    expect = sorted(
        f"{n}.{e}" for n in ("cpt", "share", "ceiling", "overlap-1") for e in ("png", "svg")
    )
    assert names == expect
    for p in written:
        data = p.read_bytes()
        if p.suffix == ".png":
            # the PNG signature, then IHDR's width and height: the layout's size times SCALE
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
            w, h = struct.unpack(">II", data[16:24])
            lay = figs[p.stem].layout
            assert (w, h) == ((lay.width or images.WIDTH) * images.SCALE, lay.height * images.SCALE)
            assert len(data) > 10_000  # drawn, not a blank page
        else:
            root = ET.fromstring(data)
            assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # the heatmap's cells carry the overlap values of the report (its JSON's matrix)
    svg = (tmp_path / "plots/overlap-1.svg").read_text(encoding="utf-8")
    m = report.overlap["gpt2"]["matrix"]
    shown = set(re.findall(r">(\d\.\d\d)<", svg))
    assert {f"{v:.2f}" for row in m for v in row} <= shown


def test_a_folder_that_is_not_ours_is_refused_before_measuring(rw, corpus, tmp_path, run):  # noqa: F811
    (tmp_path / "mine.txt").write_text("a user's file\n", encoding="utf-8")
    code, out, err = run("report", corpus, "-t", rw / GPT2, "--plots", tmp_path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "was not made by `fertility report --plots`" in err


def test_no_browser_is_one_error_and_no_folder(report, tmp_path, monkeypatch):
    from fertility.errors import OutputError

    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chrome"))
    with pytest.raises(OutputError, match=r"^--plots: the image export failed .*Chromium"):
        images.write_plots(report, tmp_path / "plots")
    assert not (tmp_path / "plots").exists()
