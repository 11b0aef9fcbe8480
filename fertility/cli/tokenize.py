"""`fertility tokenize`: the trainer's token shards, written by datatrove tasks and measured
in the same pass (fertility.engine.tokenize); `pretrain --shards OUT` trains on them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from fertility.cli.options import command_options, options_of, slurm_pending
from fertility.options import TokenizeOptions

if TYPE_CHECKING:  # the JSON's records (fertility/schemas/shards.py), for mypy only
    from fertility.schemas.shards import Tokenize


@click.command(short_help="Tokenize a corpus into the trainer's shards (datatrove tasks).")
@options_of(TokenizeOptions)
def tokenize(**kw) -> None:
    """Tokenize PATHS into --out: shards `fertility pretrain --shards OUT` trains on, with the
    counts its gate reads (no second pass over the corpus)."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import Inputs

    o: TokenizeOptions = command_options(TokenizeOptions, kw)
    if o.executor == "slurm" and not o.slurm_partition:
        raise click.UsageError("--executor slurm: give --slurm-partition")
    try:
        from fertility.engine.tokenize import shards_report
        from fertility.engine.tokenize import tokenize as run_tokenize
    except ImportError:
        raise click.UsageError(
            "tokenize: needs datatrove (pip install 'fertility[datatrove]')"
        ) from None
    from fertility.gate import evaluate
    from fertility.policy import load_policy
    from fertility.report.summary import verdict_line
    from fertility.tokenizers import load_tokenizer_arg

    policy = load_policy(o.policy)  # a bad policy fails before any task runs
    tok = load_tokenizer_arg(o.tokenizer)
    index = run_tokenize(
        o.paths,
        tok,
        o.out,
        tasks=o.tasks,
        executor=o.executor,
        workers=o.workers,
        corpus_options=o.corpus,
        seed=o.corpus.seed,
        heldout_fraction=o.heldout_fraction,
        separator=o.separator,
        shard_tokens=o.shard_tokens,
        batch_size=o.batch_docs,
        quiet=o.quiet,
        counts=not o.no_counts,
        inputs=Inputs.of(corpus=o.paths, tokenizers=[o.tokenizer], files=[o.policy]),
        allow_in_corpus=o.allow_output_in_corpus,
        slurm={"partition": o.slurm_partition, "time": o.slurm_time, "env_command": o.slurm_env},
    )
    if index is None:
        slurm_pending(o.out)
        return
    result = None
    if index["counts"] is not None:
        result = evaluate(shards_report(o.out, tok, index), policy, label=tok.label)
    if o.fmt == "json":
        gate = result.to_dict() if result is not None else None
        doc: Tokenize = {"schema": "fertility.tokenize/1", "index": index, "gate": gate}
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(summary_text(index, o.out))
    if result is None:
        click.echo(
            "no gate: --no-counts measured nothing; `pretrain --shards` trains on these "
            "shards only with --force"
        )
        return
    click.echo(f"gate, on this pass's counts: {verdict_line(result)}")
    if not result.passed:
        click.echo(
            f"  `fertility gate` on the same corpus prints every check; `pretrain --shards "
            f"{o.out}` refuses these shards unless --force"
        )


def summary_text(index: Mapping[str, Any], out: str) -> str:  # a Shards record
    """What was written, for a person: totals, then one line per language."""
    train = sum(s["tokens"] for s in index["train"])
    held = sum(s["tokens"] for s in index["heldout"])
    docs = sum(s["docs"] for s in index["train"])
    lines = [
        f"tokenized into {out}: {docs:,} training documents, {train:,} tokens in "
        f"{len(index['train'])} shards; {held:,} tokens held out "
        f"({sum(s['docs'] for s in index['heldout']):,} documents)"
    ]
    for lang in index["languages"]:
        per = lang["chars"] / lang["tokens"] if lang["tokens"] else float("nan")
        lines.append(
            f"  {lang['lang']:<8} {lang['docs']:>10,} documents {lang['chars']:>14,} characters "
            f"{lang['tokens']:>13,} tokens ({per:.2f} characters per token, separators included)"
        )
    return "\n".join(lines)
