"""`fertility eval`'s output: the JSON document and the text table."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from fertility.files import json_safe
from fertility.report.table import grid
from fertility.trainer.mix import mix_summary


def render_json(result: Mapping[str, Any]) -> str:  # an Eval record
    return json.dumps(json_safe(result), indent=1, ensure_ascii=False) + "\n"


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _ci(ci: list[float] | None, digits: int = 3) -> str:
    return "" if not ci else f"[{_f(ci[0], digits)}, {_f(ci[1], digits)}]"


def render_text(result: Mapping[str, Any]) -> str:
    run, ref, sc = result["run"], result["reference"], result["scoring"]
    tok = run["tokenizer"]
    out = [
        f"run {run['dir']}  step {run['step']}  tokenizer {tok.get('spec')} "
        f"({tok.get('kind')}, {ref['vocab_size']:,} ids)"
        + ("  [trained on a tokenizer that failed the gate: --force]" if run["forced"] else "")
    ]
    if run.get("mix"):
        out.append(mix_summary(run["mix"]))
    held = result.get("heldout")
    if held:
        out.append(
            f"held-out: {held['documents']:,} documents from {held['source']}, "
            f"{held['tokens']:,} tokens scored; context {sc['context']} tokens; "
            f"{held['windowed_documents']:,} documents longer than the context scored "
            f"in rolling windows; {sc['first_token']}"
        )
        if held["unscored_documents"]:
            out.append(f"  {held['unscored_documents']:,} documents had no token to score")
        out.append("")
        out.append(
            f"language modelling  (NLL in nats per token; ln V = {ref['ln_vocab']:.3f}; "
            f"twin = same model, fresh weights, seed {held['twin_seed']}; "
            "[95% interval over documents])"
        )
        rows = []
        for r in result["lm"]:
            rows.append(
                [
                    r["group"],
                    r["key"],
                    f"{r['documents']:,}",
                    f"{r['tokens']:,}",
                    _f(r["nll_per_token"]),
                    _ci(r["nll_per_token_ci95"]),
                    _f(r["twin_nll_per_token"]),
                    _f(r["perplexity"], 1),
                    _f(r["bits_per_byte"]),
                    _ci(r["bits_per_byte_ci95"]),
                    _f(r["bits_per_char"]),
                    _f(r["twin_bits_per_byte"]),
                ]
            )
        out += grid(
            [
                "group",
                "key",
                "docs",
                "tokens",
                "nll/tok",
                "95%",
                "twin",
                "ppl",
                "bits/byte",
                "95%",
                "bits/char",
                "twin b/B",
            ],
            rows,
            left=2,
        )
        out += _gap_lines(result["lm"])
        if result.get("base"):
            out += _base_lines(result["base"])
        for fl in result["flags"]:
            out.append(f"! {fl['message']}")
    if result["tasks"]:
        out.append("")
        out.append(
            "multiple choice  (acc_norm_chars: log-likelihood per character; "
            "acc_norm_bytes: per UTF-8 byte; 95% Wilson interval of acc)"
        )
        rows = [
            [
                t["task"],
                ",".join(t.get("langs") or []) or "-",
                str(t["n"]),
                _f(t["acc"]),
                _ci(t["ci95"]),
                _f(t["acc_norm_chars"]),
                _f(t["acc_norm_bytes"]),
                _f(t["chance"]),
                t["verdict"],
            ]
            for t in result["tasks"]
        ]
        out += grid(
            ["task", "lang", "n", "acc", "95%", "norm_chars", "norm_bytes", "chance", "verdict"],
            rows,
            left=2,
        )
        for t in result["tasks"]:
            if t.get("truncated"):
                out.append(
                    f"  {t['task']}: {t['truncated']} choices cut to the last "
                    f"{sc['context'] + 1} tokens"
                )
    return "\n".join(out) + "\n"


def _gap_lines(lm: list[dict[str, Any]]) -> list[str]:
    """How far each row's model is below its random twin, per token and per byte."""
    rows = [
        [
            r["group"],
            r["key"],
            _f(r["twin_minus_model"]),
            _ci(r["twin_minus_model_ci95"]),
            _f(r["twin_minus_model_bits_per_byte"]),
            _ci(r["twin_minus_model_bits_per_byte_ci95"]),
        ]
        for r in lm
        if "twin_minus_model" in r
    ]
    if not rows:
        return []
    head = (
        "gap to the twin  (twin - model, in nats per token and bits per byte; [95% interval "
        "over documents, paired]: wholly above 0 = below the twin beyond the sampling noise)"
    )
    grid_rows = grid(["group", "key", "nats/tok", "95%", "bits/byte", "95%"], rows, left=2)
    return ["", head, *grid_rows]


def _base_lines(base: dict[str, Any]) -> list[str]:
    """The run against the model it continued (eval/base.py): bits per byte of each."""
    out = [
        "",
        f"against the base model {base['model_dir']}  (bits per byte on the same documents, "
        f"context {base['context']}; run / base: below 1 is better, above 1 a loss; "
        "for the base's own languages it is the retention)",
    ]
    rows = [
        [
            r["key"],
            f"{r['documents']:,}",
            _f(r["base_bits_per_byte"]),
            _ci(r["base_bits_per_byte_ci95"]),
            _f(r["bits_per_byte"]),
            _ci(r["bits_per_byte_ci95"]),
            _f(r["ratio"], 4),
            "-" if r["ratio"] is None else f"{r['ratio'] - 1:+.1%}",
        ]
        for r in base["rows"]
    ]
    return out + grid(
        ["language", "docs", "base b/B", "95%", "run b/B", "95%", "run/base", "change"],
        rows,
        left=2,
    )
