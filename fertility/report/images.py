"""The HTML report's charts as image files (`fertility report --plots DIR`): DIR/NAME.png and
DIR/NAME.svg for each chart, for papers and READMEs.

Drawn by plotly's own static export, kaleido (the `images` extra), which runs plotly.js in a
Chrome or Chromium it finds on the machine (choreographer looks on the PATH; BROWSER_PATH names
one elsewhere): the same drawing as the page, without downloading a browser. One browser
serves every image of a run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fertility.errors import OutputError, one_line
from fertility.outputs import Inputs, check_folder, claim_folder, write_inside
from fertility.report.html import charts

FORMATS = ("png", "svg")
WIDTH = 1100  # pixels: room for the x labels of a dozen languages or scripts side by side
SCALE = 2  # PNG pixels per layout pixel: sharp in print and on high-density screens


MADE_BY = "report --plots"  # the folder's manifest: a later run may replace what it lists


def write_plots(
    report: Any, folder: str | os.PathLike, inputs: Inputs | None = None, **claim
) -> list[Path]:
    """Write every chart of `report` into `folder` as PNG and SVG; the paths written. The
    folder follows fertility.outputs' rule for output folders (new, empty or one an earlier
    `--plots` wrote; not an input of the run: `inputs`, `claim` is claim_folder's keywords)."""
    figs = charts(report)
    names = [f"{name}.{ext}" for name, _, _ in figs for ext in FORMATS]
    check_folder(folder, MADE_BY, names, inputs or Inputs.of(), **claim)
    images = _render([fig for _, _, fig in figs])  # before the folder: a failed export makes none
    out = claim_folder(folder, MADE_BY, names, inputs or Inputs.of(), **claim)
    return [write_inside(out, n, data, OutputError) for n, data in zip(names, images)]


def _render(figs: list) -> list[bytes]:
    """Each figure as PNG then SVG, from one browser session."""
    try:
        # deferred: the optional extra, loaded only for --plots
        import kaleido
    except ImportError:
        raise OutputError(
            "--plots: needs kaleido, plotly's image export: pip install 'fertility[images]' "
            "(it draws in a Chrome or Chromium installed on this machine)"
        ) from None

    async def run() -> list[bytes]:
        # kaleido's own session, not its sync server: that one runs in a thread and a
        # browser it cannot find leaves the caller waiting forever
        out = []
        async with kaleido.Kaleido(n=1) as k:
            for fig in figs:
                size = {"width": fig.layout.width or WIDTH, "height": fig.layout.height or 460}
                for ext in FORMATS:
                    opts = {"format": ext, **size, "scale": SCALE if ext == "png" else 1}
                    out.append(await k.calc_fig(fig, opts=opts))
        return out

    try:
        return asyncio.run(run())
    except Exception as e:  # choreographer's (no browser, it would not start) or plotly.js's
        raise OutputError(
            f"--plots: the image export failed ({one_line(e)[:240]}); it needs a Chrome or "
            "Chromium (Debian: apt-get install chromium; elsewhere name it in BROWSER_PATH)"
        ) from None
