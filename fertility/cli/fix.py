"""The commands that train or evaluate: fix, pretrain, eval, export (registered on the
`fertility` group in fertility/cli.py). Each parses options and calls one library function."""

from __future__ import annotations

import json

import click

from fertility.cli import cli, corpus_kwargs, corpus_options, write_output
from fertility.errors import FertilityError


def _need_torch(command: str) -> None:
    """torch is an optional extra: say how to get it instead of raising ImportError."""
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError:
        raise FertilityError(f"`fertility {command}` needs PyTorch and safetensors: "
                             "pip install 'fertility[train]'") from None


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--vocab-size", type=click.IntRange(1), required=True)
@click.option("--out", "out_dir", required=True, help="Folder for tokenizer.json, "
              "fix-report.json, report.html and the held-out documents.")
@click.option("--from", "from_tok", default=None, metavar="[LABEL=]SPEC",
              help="The tokenizer being replaced: its special tokens (and ids where they fit) "
                   "are kept, and it is measured beside the new one.")
@click.option("--model", type=click.Choice(["bpe", "unigram"]), default="bpe",
              show_default=True)
@click.option("--backend", type=click.Choice(["tokenizers", "sentencepiece"]),
              default="tokenizers", show_default=True)
@click.option("--nfc", "normalization", flag_value="nfc", help="Normalise to NFC (lossy: "
              "the report lists what it changes; without it the text is kept as written).")
@click.option("--nfkc", "normalization", flag_value="nfkc", help="Normalise to NFKC (lossy).")
@click.option("--no-normalize", "normalization", flag_value="none", hidden=True,
              help="Deprecated: no normaliser is the default.")
@click.option("--temperature", type=click.FloatRange(0), default=0.3, show_default=True,
              help="Language sampling: p(lang) ∝ chars(lang)^T (0: uniform, 1: as found).")
@click.option("--heldout", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.1, show_default=True, help="Share of each language held out.")
@click.option("--heldout-max", type=click.IntRange(1), default=1000, show_default=True,
              help="At most N held-out documents per language.")
@click.option("--max-train-chars", type=click.IntRange(1), default=None,
              help="Training-text budget of the sampler (default: all training text).")
@click.option("--special-token", "special_tokens", multiple=True,
              help="Special token to add (repeatable; default <|endoftext|>, or --from's).")
@click.option("--policy", default=None, help="Gate policy TOML for the new tokenizer.")
@corpus_options
def fix(paths, vocab_size, out_dir, from_tok, model, backend, normalization, temperature,
        heldout, heldout_max, max_train_chars, special_tokens, policy, **kw) -> None:
    """Train a corrected vocabulary and prove it on held-out text (exit 1: the gate said no)."""
    import sys

    from fertility.fix import FixConfig
    from fertility.fix import fix as run_fix

    opts = corpus_kwargs(kw)
    config = FixConfig(vocab_size=vocab_size, model=model, backend=backend,
                       normalization=normalization or "none", temperature=temperature,
                       heldout_fraction=heldout, heldout_max_docs=heldout_max,
                       seed=kw["seed"], max_train_chars=max_train_chars,
                       special_tokens=tuple(special_tokens) or None)
    say = None if kw["quiet"] or not sys.stderr.isatty() else \
        (lambda msg: click.echo(msg, err=True))
    result = run_fix(paths, out_dir, config, from_tokenizer=from_tok, corpus_options=opts,
                     policy=policy, progress=say)
    click.echo(result.format_text())
    sys.exit(result.gate.exit_code)


@cli.command()
@click.argument("base")
@click.argument("paths", nargs=-1, required=True)
@click.option("--add", type=click.IntRange(1), required=True, help="New tokens to learn.")
@click.option("--out", "out_dir", required=True, help="Folder for tokenizer.json, "
              "ids-map.json, extend-report.json and the held-out documents.")
@click.option("--langs", default=None, metavar="bn,hi",
              help="Languages to learn the new tokens on (default: those the gate fails).")
@click.option("--heldout", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.1, show_default=True, help="Share of each language held out.")
@click.option("--heldout-max", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--policy", default=None, help="Gate policy TOML.")
@corpus_options
def extend(base, paths, add, out_dir, langs, heldout, heldout_max, policy, **kw) -> None:
    """Add tokens for a script to BASE, keeping every id (exit 1: the gate said no)."""
    import sys

    from fertility.extend import extend as run_extend

    opts = corpus_kwargs(kw)
    say = None if kw["quiet"] or not sys.stderr.isatty() else \
        (lambda msg: click.echo(msg, err=True))
    wanted = [x.strip() for x in langs.split(",") if x.strip()] if langs else None
    result = run_extend(base, paths, out_dir, add, langs=wanted, policy=policy,
                        corpus_options=opts, heldout_fraction=heldout,
                        heldout_max_docs=heldout_max, seed=kw["seed"], progress=say)
    click.echo(result.format_text())
    sys.exit(result.gate.exit_code)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-t", "--tokenizer", "tokenizer", required=True, metavar="[LABEL=]SPEC",
              help="Tokenizer to train with (tokenizer.json, .model, rank file, ...).")
@click.option("--out", "out_dir", required=True, help="Run folder (created).")
@click.option("--preset", default=None, help="Model size: tiny, small, base, 0.4b.")
@click.option("--config", "config_path", default=None, help="TrainConfig TOML.")
@click.option("--steps", type=click.IntRange(1), default=None)
@click.option("--tokens", type=click.IntRange(1), default=None, help="Train for N tokens.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None)
@click.option("--resume", is_flag=True, help="Continue from the newest valid checkpoint.")
@click.option("--force", is_flag=True, help="Train even when the tokenizer fails the gate "
              "(recorded in run.json).")
@click.option("--policy", default=None, help="Gate policy TOML.")
@click.option("--mix", "mix", default=None, metavar="LANG=SHARE,...",
              help="Each language's share of the training stream in characters, e.g. "
                   "bn=0.6,en=0.4 (default: the corpus's own proportions).")
@click.option("--mix-temperature", type=float, default=None, metavar="T",
              help="Instead of --mix: shares ∝ characters(lang)^T (mT5, XLM-R: 0.3).")
@click.option("--init-from", "init_from", default=None, metavar="MODEL_DIR",
              help="Continue pretraining this Llama-architecture Hugging Face folder "
                   "(config.json + model.safetensors); -t is its tokenizer or an extension.")
@corpus_options
def pretrain(paths, tokenizer, out_dir, preset, config_path, steps, tokens, device, resume,
             force, policy, mix, mix_temperature, init_from, **kw) -> None:
    """Gate the tokenizer, then pretrain a decoder-only model on PATHS into --out."""
    if steps and tokens:
        raise click.UsageError("give --steps or --tokens, not both")
    if mix and mix_temperature is not None:
        raise click.UsageError("give --mix or --mix-temperature, not both")
    _need_torch("pretrain")
    from trainer.mix import parse_mix
    from trainer.run import pretrain as run_pretrain

    opts = corpus_kwargs(kw)
    over = {"mix": parse_mix(mix) if mix else None, "mix_temperature": mix_temperature,
            "init_from": init_from}
    summary = run_pretrain(paths, tokenizer, out_dir, preset=preset, config_path=config_path,
                           steps=steps, tokens=tokens, device=device, resume=resume,
                           force=force, quiet=kw["quiet"], corpus_options=opts, policy=policy,
                           overrides=over)
    click.echo(json.dumps(summary, indent=2, default=str))


@cli.command("eval")
@click.argument("run_dir")
@click.option("--corpus", multiple=True, metavar="PATH",
              help="Held-out text to score instead of the run's own held-out split.")
@click.option("--tasks", multiple=True, metavar="FILE.jsonl", help="Multiple-choice task "
              "files (docs/EVAL.md).")
@click.option("--no-lm", is_flag=True, help="Tasks only, no language-modelling scores.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@click.option("-o", "--output", default=None)
@click.option("--step", type=int, default=None, help="Checkpoint step (default: newest).")
@click.option("--device", default="auto", show_default=True)
@click.option("--context", type=click.IntRange(1), default=None,
              help="Window length (default: the training sequence length).")
@click.option("--twin-seed", type=int, default=0, show_default=True)
@click.option("--bootstrap", type=click.IntRange(0), default=1000, show_default=True)
@corpus_options
def eval_cmd(run_dir, corpus, tasks, no_lm, fmt, output, step, device, context, twin_seed,
             bootstrap, **kw) -> None:
    """Per-token NLL and bits per byte against a random-init twin; multiple-choice accuracy."""
    _need_torch("eval")
    from eval.run import evaluate, render_json, render_text
    from fertility.progress import StatusLine

    opts = corpus_kwargs(kw)
    status = StatusLine(kw["quiet"])
    try:
        result = evaluate(run_dir, corpus=list(corpus) or None, tasks=tasks, step=step,
                          device=device, context=context, lm=not no_lm, twin_seed=twin_seed,
                          bootstrap=bootstrap, seed=kw["seed"], max_docs=opts.pop("max_docs"),
                          corpus_options=opts, progress=status.update)
    finally:
        status.close()
    write_output(render_json(result) if fmt == "json" else render_text(result), output)


@cli.command()
@click.argument("run_dir")
@click.argument("out_dir")
@click.option("--to", "target", type=click.Choice(["hf"]), required=True,
              help="hf: a Llama-architecture folder transformers loads.")
@click.option("--step", type=int, default=None)
@click.option("--overwrite", is_flag=True,
              help="Replace a previous export's files in OUT_DIR (other files are kept).")
def export(run_dir, out_dir, target, step, overwrite) -> None:
    """Write RUN_DIR's model and tokenizer as a Hugging Face Llama folder."""
    _need_torch("export")
    from eval.export import export_hf

    s = export_hf(run_dir, out_dir, step=step, overwrite=overwrite)
    click.echo(f"wrote {s['out_dir']} (step {s['step']}): {', '.join(s['files'])}")
    click.echo(f"tokenizer: {s['tokenizer']}")
