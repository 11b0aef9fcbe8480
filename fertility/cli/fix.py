"""`fertility fix`: train a corrected vocabulary and prove it on held-out text."""

from __future__ import annotations

import sys

import click

from fertility.cli.options import choice, corpus_options, corpus_settings
from fertility.options import FixBackend, FixModel


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--vocab-size", type=click.IntRange(1), required=True)
@click.option(
    "--out",
    "out_dir",
    required=True,
    help="Folder for tokenizer.json, fix-report.json, report.html and the held-out documents.",
)
@click.option(
    "--from",
    "from_tok",
    default=None,
    metavar="[LABEL=]SPEC",
    help="The tokenizer being replaced: its special tokens (and ids where they fit) "
    "are kept, and it is measured beside the new one.",
)
@click.option("--model", type=choice(FixModel), default="bpe", show_default=True)
@click.option(
    "--backend",
    type=choice(FixBackend),
    default="tokenizers",
    show_default=True,
)
@click.option(
    "--nfc",
    "normalization",
    flag_value="nfc",
    help="Normalise to NFC (lossy: "
    "the report lists what it changes; without it the text is kept as written).",
)
@click.option("--nfkc", "normalization", flag_value="nfkc", help="Normalise to NFKC (lossy).")
@click.option(
    "--no-normalize",
    "normalization",
    flag_value="none",
    hidden=True,
    help="Deprecated: no normaliser is the default.",
)
@click.option(
    "--temperature",
    type=click.FloatRange(0),
    default=0.3,
    show_default=True,
    help="Language sampling: p(lang) ∝ chars(lang)^T (0: uniform, 1: as found).",
)
@click.option(
    "--heldout",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.1,
    show_default=True,
    help="Share of each language held out.",
)
@click.option(
    "--heldout-max",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="At most N held-out documents per language.",
)
@click.option(
    "--max-train-chars",
    type=click.IntRange(1),
    default=None,
    help="Training-text budget of the sampler (default: all training text).",
)
@click.option(
    "--special-token",
    "special_tokens",
    multiple=True,
    help="Special token to add (repeatable; default <|endoftext|>, or --from's).",
)
@click.option("--policy", default=None, help="Gate policy TOML for the new tokenizer.")
@corpus_options
def fix(
    paths,
    vocab_size,
    out_dir,
    from_tok,
    model,
    backend,
    normalization,
    temperature,
    heldout,
    heldout_max,
    max_train_chars,
    special_tokens,
    policy,
    **kw,
) -> None:
    """Train a corrected vocabulary and prove it on held-out text (exit 1: the gate said no)."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.fix import fix as run_fix
    from fertility.fix.config import FixConfig

    opts = corpus_settings(kw)
    config = FixConfig(
        vocab_size=vocab_size,
        model=model,
        backend=backend,
        normalization=normalization or "none",
        temperature=temperature,
        heldout_fraction=heldout,
        heldout_max_docs=heldout_max,
        seed=opts.seed,
        max_train_chars=max_train_chars,
        special_tokens=tuple(special_tokens) or None,
    )
    say = (
        None if kw["quiet"] or not sys.stderr.isatty() else (lambda msg: click.echo(msg, err=True))
    )
    result = run_fix(
        paths,
        out_dir,
        config,
        from_tokenizer=from_tok,
        corpus_options=opts,
        policy=policy,
        progress=say,
        allow_output_in_corpus=kw.pop("allow_output_in_corpus"),
    )
    # deferred: the library loads when a command runs (fast --help)
    from fertility.report.fix import fix_text

    click.echo(fix_text(result))
    sys.exit(result.gate.exit_code)
