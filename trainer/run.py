"""`pretrain`: gate the tokenizer, tokenize the corpus once, train, leave a self-contained run.

    RUN_DIR/run.json            what was trained with what (schema fertility.run/1); a
                                resume must match its tokenizer fingerprint, its copy's
                                sha256 and its absolute corpus paths (`corpus_paths`)
    RUN_DIR/tokenizer/<file>    a copy of the tokenizer file
    RUN_DIR/data/               token shards, heldout.jsonl, index.json (trainer.data)
    RUN_DIR/checkpoints/        step-NNNNNNNN folders (trainer.checkpoint)
    RUN_DIR/metrics.jsonl       one line per step (trainer.loop)

Also runnable without the CLI (and under torchrun):
    python -m trainer.run CORPUS... -t TOKENIZER --out RUN_DIR [--steps N] [--resume] ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fertility.cli import Terminated
from fertility.corpus import Corpus, shown
from fertility.errors import FertilityError, TrainingError
from fertility.gate import gate_corpus
from fertility.outputs import Inputs, claim_folder, read_manifest, record
from fertility.report.gate import gate_text
from fertility.tokenizers import load_tokenizer_arg
from fertility.tokenizers.spec import split_pattern_suffix
from trainer import distributed as D
from trainer import init as base_model
from trainer.checkpoint import list_checkpoints, sha256
from trainer.config import TrainConfig, load_config
from trainer.data import TokenData, build_shards, choose_separator, read_index
from trainer.mix import parse_mix, plan_for_run, record_consumed
from trainer.model import config_from_preset
from trainer.rundir import OUTPUTS, RUN_SCHEMA, RunDir


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _gate_reason(result: Any) -> str:
    lines = [l.strip() for l in gate_text(result).splitlines() if l.strip()]
    verdict = [l for l in lines if l.startswith("verdict:")]
    return (verdict or lines or ["no details"])[0]


def _tokenizer_file(tok: Any) -> Path | None:
    """The file a tokenizer was loaded from, when it was a local file."""

    path = getattr(tok, "path", None)
    if path is None:
        base = Path(split_pattern_suffix(tok.spec)[0])
        if base.is_dir():
            base = next(
                (base / n for n in ("tokenizer.json", "tokenizer.model") if (base / n).is_file()),
                base,
            )
        path = base if base.is_file() else None
    return Path(path) if path is not None else None


def _copy_tokenizer(tok: Any, run_dir: Path) -> dict[str, Any]:

    info = {
        "spec": tok.spec,
        "kind": tok.kind,
        "fingerprint": tok.fingerprint,
        "vocab_size": int(tok.vocab_size),
        "path": None,
        "pattern": split_pattern_suffix(tok.spec)[1],
    }
    src = _tokenizer_file(tok)
    if src is not None:
        dest, info["path"] = RunDir(run_dir).tokenizer_copy(src.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        info["sha256"] = sha256(dest)
    return info


def _claim(run_dir: Path, paths, tokenizer_spec, config_path, policy, over, allow: bool) -> None:
    """The output policy for the run folder (fertility.outputs), before anything is written.
    A run folder of a version before the manifest (its run.json of this schema) is adopted:
    its files are the run's layout."""
    if read_manifest(run_dir) is None:
        try:
            legacy = RunDir(run_dir).read_run_json().get("schema") == RUN_SCHEMA
        except (OSError, ValueError, AttributeError):
            legacy = False
        if legacy:
            record(run_dir, list(OUTPUTS), made_by="pretrain", error=TrainingError)
    init = (over or {}).get("init_from")
    inputs = Inputs.of(
        corpus=paths,
        tokenizers=[str(tokenizer_spec)],
        files=[config_path, policy if isinstance(policy, (str, os.PathLike)) else None],
        folders=[init],
    )
    claim_folder(run_dir, "pretrain", OUTPUTS, inputs, allow_in_corpus=allow, error=TrainingError)


def _check_resume(
    run_json: dict, run_json_path: Path, run_dir: Path, paths: list[str], tok: Any
) -> None:
    """A resume continues the same run: the same tokenizer (given and the run's copy, which
    eval and export load) and the same corpus arguments as run.json records."""

    recorded = run_json["tokenizer"]
    if recorded["fingerprint"] != tok.fingerprint:
        raise TrainingError(
            f"{run_json_path}: the run was made with tokenizer "
            f"{recorded['fingerprint']}, {tok.spec} is {tok.fingerprint}"
        )
    copy = run_dir / recorded["path"] if recorded.get("path") else None
    if copy is not None and recorded.get("sha256"):  # runs before the checksum have none
        if not copy.is_file():
            raise TrainingError(f"{copy}: the run's tokenizer copy is missing")
        if sha256(copy) != recorded["sha256"]:
            raise TrainingError(
                f"{copy}: not the tokenizer file {run_json_path.name} records "
                "(replaced after the run started)"
            )
    corpus = run_json.get("corpus_paths")  # absolute: a resume may start in another folder
    given = _corpus_paths(paths)
    if corpus is not None and given != corpus:
        raise TrainingError(
            f"{run_json_path}: the run was made from corpus "
            f"{' '.join(corpus)}, not {' '.join(given)}; give the same paths "
            "to --resume or choose another --out"
        )


def _corpus_paths(paths: list[str]) -> list[str]:
    return [shown(os.path.abspath(p)) for p in paths]


def _default_gate(policy: Any, corpus_options: dict | None, quiet: bool) -> Callable:
    def gate(paths: list[str], tokenizer: Any) -> Any:
        return gate_corpus(
            paths, tokenizer, policy=policy, corpus_options=corpus_options, quiet=quiet
        )

    return gate


def _resolve_config(
    run_json: dict | None,
    config_path: Any,
    preset: str | None,
    overrides: dict[str, Any],
    env: D.DistEnv,
) -> TrainConfig:
    if run_json is None:
        return load_config(config_path, {"preset": preset, **overrides})
    if config_path is not None or preset is not None:
        D.log(
            env,
            "warning: resuming: the run's stored configuration is used; --config/--preset ignored",
        )
    base = TrainConfig.from_dict(run_json["train"], "run.json").to_dict()
    base.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig.from_dict(base, "run.json")


def pretrain(
    corpus_paths: Sequence[str | Path],
    tokenizer_spec: str,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    config_path: str | Path | None = None,
    steps: int | None = None,
    tokens: int | None = None,
    device: str | None = None,
    resume: bool = False,
    force: bool = False,
    quiet: bool = False,
    gate: Callable | None = None,
    corpus_options: dict | None = None,
    policy: Any = None,
    overrides: dict[str, Any] | None = None,
    callbacks: Any = None,
    allow_output_in_corpus: bool = False,
) -> dict[str, Any]:
    """Train a model on `corpus_paths` with the tokenizer `tokenizer_spec` into `out_dir`.

    `preset`/`config_path`/`steps`/`tokens`/`device`/`overrides` override TrainConfig's
    defaults in that order of precedence (explicit arguments win; None means "not given").
    `gate(paths, tokenizer) -> GateResult` defaults to fertility.gate.gate_corpus with
    `policy` and `corpus_options`. With `resume` the run's stored config and gate verdict
    are reused and training continues from the newest valid checkpoint.
    `out_dir` must be new, empty or a run folder (fertility.outputs: nothing the run did not
    write is replaced or deleted), and outside the corpus unless `allow_output_in_corpus`.
    Returns {"run_dir", "steps", "tokens", "final_loss", "forced", ...}.
    """
    # deferred: looked up when called, so a test can replace it
    from trainer.loop import train

    run_dir = Path(out_dir)
    layout = RunDir(run_dir)
    run_json_path = layout.run_json
    paths = (
        [str(corpus_paths)]
        if isinstance(corpus_paths, (str, Path))
        else [str(p) for p in corpus_paths]
    )
    run_json = None
    if run_json_path.is_file() and not _has_checkpoint(run_dir):
        # It failed before its first checkpoint: nothing to continue, nothing to protect.
        D.log(
            D.DistEnv(rank=int(os.environ.get("RANK", 0))),
            f"warning: {run_dir} holds a run that never reached a checkpoint; starting afresh",
        )
    elif run_json_path.is_file():
        if not resume:
            raise TrainingError(
                f"{run_json_path}: {run_dir} already holds a run; pass --resume "
                "to continue it or choose another --out"
            )
        run_json = layout.read_run_json()
    over = {"steps": steps, "tokens": tokens, "device": device, **(overrides or {})}
    cfg = _resolve_config(
        run_json, config_path, preset, over, D.DistEnv(rank=int(os.environ.get("RANK", 0)))
    )

    tok = load_tokenizer_arg(str(tokenizer_spec))
    # The model config before anything is written: a config that cannot run stops here.
    separator = choose_separator(dict(tok.special_tokens), cfg.separator, int(tok.vocab_size))
    n_ids = int(tok.vocab_size) + (separator == int(tok.vocab_size))
    model_cfg = config_from_preset(cfg.preset, n_ids, cfg.model)
    init = None
    if cfg.init_from:  # continued pretraining: the base model's shapes and weights
        model_cfg = base_model.model_config(cfg.init_from, n_ids)
        init = base_model.plan(cfg.init_from, tok)
    if cfg.seq_len > model_cfg.max_seq_len:
        raise TrainingError(
            f"seq_len {cfg.seq_len} exceeds the model's max_seq_len "
            f"{model_cfg.max_seq_len} (preset {cfg.preset})"
        )
    if int(os.environ.get("RANK", 0)) == 0:  # the one writer of the run folder, before it writes
        _claim(
            run_dir, paths, tokenizer_spec, config_path, policy, overrides, allow_output_in_corpus
        )
    env = D.init_distributed(cfg.device)
    try:
        if run_json is not None:
            _check_resume(run_json, run_json_path, run_dir, paths, tok)
        gate_dict, forced = (run_json or {}).get("gate"), bool((run_json or {}).get("forced"))
        if run_json is None:
            gate_dict, forced = _run_gate(
                gate or _default_gate(policy, corpus_options, quiet),
                paths,
                tok,
                tok.spec,
                force,
                quiet,
                env,
            )
        index = _prepare_data(
            paths, tok, run_dir, cfg, corpus_options, quiet, env, separator, fresh=run_json is None
        )
        mix_plan = plan_for_run(
            index,
            cfg,
            cfg.step_tokens(env.world_size)
            * cfg.total_steps(sum(s["tokens"] for s in index["train"]), env.world_size),
            say=(lambda m: None) if quiet else (lambda m: D.log(env, m)),
            warn=lambda m: D.log(env, f"warning: {m}"),
        )
        if mix_plan is not None and (run_json or {}).get("mix"):  # a resume keeps, until its
            mix_plan["consumed"] = run_json["mix"].get("consumed")  # first save, the last one
        if env.is_main:
            record = {
                "schema": RUN_SCHEMA,
                "tokenizer": _copy_tokenizer(tok, run_dir),
                "model": model_cfg.to_dict(),
                "train": cfg.to_dict(),
                "gate": gate_dict,
                "forced": forced,
                "corpus": index.get("corpus"),
                "corpus_paths": _corpus_paths(paths),
                "data": {
                    "separator": index["separator"],
                    "separator_reserved": index["separator"] == int(tok.vocab_size),
                    "dtype": index["dtype"],
                    "train_tokens": sum(s["tokens"] for s in index["train"]),
                    "heldout_tokens": sum(s["tokens"] for s in index["heldout"]),
                    "heldout_documents": sum(s["docs"] for s in index["heldout"]),
                },
                "world_size": env.world_size,
                "mix": mix_plan,
                "init": base_model.public(init) if init else None,
                "created": (run_json or {}).get("created") or _now(),
            }
            layout.write_run_json(record, TrainingError)
        D.barrier(env)
        data = TokenData.from_dir(
            layout.data, "train", fingerprint=tok.fingerprint, vocab_size=model_cfg.vocab_size
        )
        heldout = (
            TokenData.from_dir(
                layout.data,
                "heldout",
                fingerprint=tok.fingerprint,
                vocab_size=model_cfg.vocab_size,
            )
            if index["heldout"]
            else None
        )
        specials = dict(tok.special_tokens)
        if index["separator"] is not None:
            specials["<separator>"] = index["separator"]
        summary = train(
            run_dir,
            cfg,
            model_cfg,
            data,
            fingerprint=tok.fingerprint,
            special_ids=specials,
            env=env,
            quiet=quiet,
            callbacks=callbacks,
            resume=resume and run_json is not None,
            heldout=heldout,
            init=(lambda m: base_model.load_into(m, init)) if init else None,
        )
        if env.is_main and mix_plan is not None:
            record_consumed(run_json_path, summary["languages"])
    finally:
        D.shutdown(env)
    return {
        **summary,
        "forced": forced,
        "preset": cfg.preset,
        "tokenizer": tok.spec,
        "vocab_size": model_cfg.vocab_size,
    }


def _run_gate(
    gate: Callable, paths: list[str], tok: Any, spec: str, force: bool, quiet: bool, env: D.DistEnv
) -> tuple[dict | None, bool]:
    """(gate.to_dict(), forced). Rank 0 gates; a refusal stops every rank."""
    result, ok, message = None, True, ""
    if env.is_main:
        result = gate(paths, tok)
        if not result.passed:
            if force:
                D.log(
                    env,
                    f"warning: tokenizer {spec} failed the gate; training anyway "
                    f"(--force, recorded in run.json)\n{gate_text(result)}",
                )
            else:
                ok = False
                message = (
                    f"tokenizer {spec} failed the gate ({_gate_reason(result)}); "
                    "fix it with `fertility fix` or pass --force"
                )
        elif not quiet:
            D.log(env, _gate_reason(result))
    D.agree(ok, message, env)
    if result is None:  # other ranks: run.json is written by rank 0
        return None, False
    return result.to_dict(), not result.passed


def _has_checkpoint(run_dir: Path) -> bool:
    return bool(list_checkpoints(run_dir))


def _prepare_data(
    paths: list[str],
    tok: Any,
    run_dir: Path,
    cfg: TrainConfig,
    corpus_options: dict | None,
    quiet: bool,
    env: D.DistEnv,
    separator: int | None,
    fresh: bool,
) -> dict[str, Any]:
    """Reuse the run's shards when they exist (they must match the tokenizer), else build.
    A fresh start rebuilds shards made with another separator, seed or held-out share."""
    data_dir = RunDir(run_dir).data
    ok, message = True, ""
    if env.is_main:
        try:
            index = read_index(data_dir)
            if (
                index is not None
                and fresh
                and (index["separator"], index["seed"], index["heldout_fraction"])
                != (separator, cfg.seed, cfg.heldout_fraction)
            ):
                index = None
            if index is None:
                run_dir.mkdir(parents=True, exist_ok=True)
                corpus = Corpus(paths, **(corpus_options or {}))
                build_shards(
                    corpus.documents(),
                    tok,
                    data_dir,
                    seed=cfg.seed,
                    heldout_fraction=cfg.heldout_fraction,
                    separator=cfg.separator,
                    shard_tokens=cfg.shard_tokens,
                    batch_size=cfg.tokenize_batch,
                    workers=cfg.tokenize_workers,
                    quiet=quiet,
                    summary=corpus.summary,
                )
            elif index["fingerprint"] != tok.fingerprint:
                first = data_dir / index["train"][0]["file"]
                raise TrainingError(
                    f"{first}: shard was made by tokenizer "
                    f"{index['fingerprint']}, this run's tokenizer is "
                    f"{tok.fingerprint}; use a new --out"
                )
        except FertilityError as e:
            ok, message = False, str(e)
    D.agree(ok, message, env)
    index = read_index(data_dir)
    assert index is not None
    return index


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.run", description=__doc__.splitlines()[0])
    p.add_argument("corpus", nargs="+")
    p.add_argument("-t", "--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--preset")
    p.add_argument("--config")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int)
    length.add_argument("--tokens", type=int)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--resume", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--quiet", action="store_true")
    mix = p.add_mutually_exclusive_group()
    mix.add_argument("--mix", help="each language's share in characters: bn=0.6,en=0.4")
    mix.add_argument("--mix-temperature", type=float, help="shares ∝ characters**T")
    a = p.parse_args(argv)
    try:
        over = {"mix": parse_mix(a.mix) if a.mix else None, "mix_temperature": a.mix_temperature}
        summary = pretrain(
            a.corpus,
            a.tokenizer,
            a.out,
            preset=a.preset,
            config_path=a.config,
            steps=a.steps,
            tokens=a.tokens,
            device=a.device,
            resume=a.resume,
            force=a.force,
            quiet=a.quiet,
            overrides=over,
        )
    except FertilityError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except BaseException as e:  # the trainer's SIGTERM stop (checkpoint written): 143
        if not isinstance(e, Terminated):
            raise
        print("terminated", file=sys.stderr)
        return 143
    if not D.launched_by_torchrun() or os.environ.get("RANK") == "0":
        print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
