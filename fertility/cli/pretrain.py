"""`fertility pretrain`: train a small model on a gated tokenizer (torch imported when run)."""

from __future__ import annotations

import json

import click

from fertility.cli.options import corpus_options, corpus_settings, need_torch


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-t",
    "--tokenizer",
    "tokenizer",
    required=True,
    metavar="[LABEL=]SPEC",
    help="Tokenizer to train with (tokenizer.json, .model, rank file, ...).",
)
@click.option("--out", "out_dir", required=True, help="Run folder (created).")
@click.option("--preset", default=None, help="Model size: tiny, small, base, 0.4b.")
@click.option("--config", "config_path", default=None, help="TrainConfig TOML.")
@click.option("--steps", type=click.IntRange(1), default=None)
@click.option("--tokens", type=click.IntRange(1), default=None, help="Train for N tokens.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None)
@click.option("--resume", is_flag=True, help="Continue from the newest valid checkpoint.")
@click.option(
    "--force",
    is_flag=True,
    help="Train even when the tokenizer fails the gate (recorded in run.json).",
)
@click.option("--policy", default=None, help="Gate policy TOML.")
@click.option(
    "--mix",
    "mix",
    default=None,
    metavar="LANG=SHARE,...",
    help="Each language's share of the training stream in characters, e.g. "
    "bn=0.6,en=0.4 (default: the corpus's own proportions).",
)
@click.option(
    "--mix-temperature",
    type=float,
    default=None,
    metavar="T",
    help="Instead of --mix: shares ∝ characters(lang)^T (mT5, XLM-R: 0.3).",
)
@click.option(
    "--init-from",
    "init_from",
    default=None,
    metavar="MODEL_DIR",
    help="Continue pretraining this Llama-architecture Hugging Face folder "
    "(config.json + model.safetensors); -t is its tokenizer or an extension.",
)
@corpus_options
def pretrain(
    paths,
    tokenizer,
    out_dir,
    preset,
    config_path,
    steps,
    tokens,
    device,
    resume,
    force,
    policy,
    mix,
    mix_temperature,
    init_from,
    **kw,
) -> None:
    """Gate the tokenizer, then pretrain a decoder-only model on PATHS into --out."""
    if steps and tokens:
        raise click.UsageError("give --steps or --tokens, not both")
    if mix and mix_temperature is not None:
        raise click.UsageError("give --mix or --mix-temperature, not both")
    need_torch("pretrain")
    # deferred: the library loads when a command runs (fast --help)
    from trainer.mix import parse_mix
    from trainer.run import pretrain as run_pretrain

    opts = corpus_settings(kw)
    over = {
        "mix": parse_mix(mix) if mix else None,
        "mix_temperature": mix_temperature,
        "init_from": init_from,
    }
    summary = run_pretrain(
        paths,
        tokenizer,
        out_dir,
        preset=preset,
        config_path=config_path,
        steps=steps,
        tokens=tokens,
        device=device,
        resume=resume,
        force=force,
        quiet=kw["quiet"],
        corpus_options=opts,
        policy=policy,
        overrides=over,
        allow_output_in_corpus=kw.pop("allow_output_in_corpus"),
    )
    click.echo(json.dumps(summary, indent=2, default=str))
