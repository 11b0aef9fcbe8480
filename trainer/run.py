"""`pretrain`: gate the tokenizer, tokenize the corpus once, train, leave a self-contained run.

    RUN_DIR/run.json            what was trained with what (schema fertility.run/1); a
                                resume must match its tokenizer fingerprint, its copy's
                                sha256 and its absolute corpus paths (`corpus_paths`)
    RUN_DIR/tokenizer/<file>    a copy of the tokenizer file
    RUN_DIR/data/               token shards, heldout.jsonl, index.json (trainer.data); with
                                --shards SHARDS none: the folder `fertility tokenize` wrote is
                                read in place, and the gate reads its counts
    RUN_DIR/checkpoints/        step-NNNNNNNN folders (trainer.checkpoint)
    RUN_DIR/metrics.jsonl       one line per step (trainer.loop)

The command line is `fertility pretrain`, under torchrun too (`torchrun --nproc-per-node N
-m fertility pretrain ...`); its options are trainer.options.PretrainOptions, what
`pretrain()` takes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fertility.corpus import Corpus, CorpusOptions, shown
from fertility.errors import FertilityError, TrainingError
from fertility.gate import gate_corpus
from fertility.outputs import (
    Inputs,
    claim_folder,
    inside,
    make_inside,
    open_inside,
    read_manifest,
    record,
)
from fertility.report.gate import gate_text
from fertility.report.summary import verdict_line
from fertility.shards.parts import shard_meta
from fertility.tokenizers import load_tokenizer_arg
from fertility.tokenizers.spec import split_pattern_suffix
from fertility.trainer import distributed as D
from fertility.trainer import init as base_model
from fertility.trainer.checkpoint import list_checkpoints, sha256
from fertility.trainer.config import TrainConfig, load_config, resumed_config
from fertility.trainer.data import TokenData, build_shards, read_index
from fertility.trainer.mix import plan_for_run, record_consumed
from fertility.trainer.model import config_from_preset
from fertility.trainer.options import PretrainOptions
from fertility.trainer.rundir import CHECKPOINTS, OUTPUTS, RUN_SCHEMA, TOKENIZER_DIR, RunDir

if TYPE_CHECKING:  # the run.json record (fertility/schemas/run.py), for mypy only
    from fertility.schemas.run import Mix, Run, RunGate, RunTokenizer
    from fertility.schemas.shards import Shards


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _gate_reason(result: Any) -> str:
    """The gate's verdict line, `verdict: FAIL (N failed, ...)`, read from the GateResult."""
    return verdict_line(result)


def _tokenizer_file(tok: Any) -> Path | None:
    """The file a tokenizer was loaded from, when it was a local file."""

    path = tok.path
    if path is None:
        base = Path(split_pattern_suffix(tok.spec)[0])
        if base.is_dir():
            base = next(
                (base / n for n in ("tokenizer.json", "tokenizer.model") if (base / n).is_file()),
                base,
            )
        path = base if base.is_file() else None
    return Path(path) if path is not None else None


def _copy_tokenizer(tok: Any, run_dir: Path) -> RunTokenizer:

    info: RunTokenizer = {
        "spec": tok.spec,
        "kind": tok.kind,
        "fingerprint": tok.fingerprint,
        "vocab_size": int(tok.vocab_size),
        "path": None,
        "pattern": split_pattern_suffix(tok.spec)[1],
    }
    src = _tokenizer_file(tok)
    if src is not None:
        dest, path = RunDir(run_dir).tokenizer_copy(src.name)
        info["path"] = path
        make_inside(run_dir, TOKENIZER_DIR, TrainingError)  # no link followed (outputs)
        with open(src, "rb") as f, open_inside(run_dir, path, True, TrainingError) as d:
            shutil.copyfileobj(f, d)
        info["sha256"] = sha256(dest)
    return info


def _claim(run_dir: Path, opts: PretrainOptions, init_from: str | None) -> None:
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
    inputs = Inputs.of(
        corpus=list(opts.paths),
        tokenizers=[opts.tokenizer],
        files=[opts.config, opts.policy if isinstance(opts.policy, (str, os.PathLike)) else None],
        folders=[init_from, opts.shards],
    )
    claim_folder(
        run_dir,
        "pretrain",
        OUTPUTS,
        inputs,
        allow_in_corpus=opts.allow_output_in_corpus,
        error=TrainingError,
    )


def _check_resume(
    run_json: dict,
    run_json_path: Path,
    run_dir: Path,
    paths: list[str],
    tok: Any,
    shards: str | None,
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
    recorded_shards = (run_json.get("data") or {}).get("shards")
    if recorded_shards != _shards_path(shards):
        raise TrainingError(
            f"{run_json_path}: the run was made from "
            + (f"--shards {recorded_shards}" if recorded_shards else "a corpus")
            + ", not "
            + (f"--shards {_shards_path(shards)}" if shards else "a corpus")
            + "; give the same to --resume or choose another --out"
        )
    if shards:
        return
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


def _shards_path(shards: str | None) -> str | None:
    return shown(os.path.abspath(shards)) if shards else None


def _read_shards(folder: str, tok: Any) -> Shards:
    """The index of the finished shards in `folder`, made by `tok` (fingerprint checked)."""
    index = read_index(folder)
    if index is None:
        raise TrainingError(
            f"{folder}: no finished shards (index.json missing); run or relaunch "
            "`fertility tokenize` into it first"
        )
    if index["fingerprint"] != tok.fingerprint:
        raise TrainingError(
            f"{folder}: the shards were made by tokenizer {index['fingerprint'][:12]}, "
            f"{tok.spec} is {tok.fingerprint[:12]}; tokenize again with this tokenizer"
        )
    # every shard opened and checked now, before the gate (a minute on a large corpus) and
    # before the run folder is made: bad shards used to fail only when training began
    for split in ("train", "heldout"):
        TokenData.from_dir(
            folder, split, fingerprint=tok.fingerprint, vocab_size=int(index["vocab_size"])
        )
    return index


def _shards_gate(folder: str, index: Shards, policy: Any) -> Callable:
    """The gate on the counts `fertility tokenize` measured in the pass that wrote the
    shards: no second pass over the corpus."""

    def gate(paths: list[str], tokenizer: Any) -> Any:
        # deferred: datatrove (the datatrove extra) only for --shards
        from fertility.engine.tokenize import shards_report
        from fertility.gate import evaluate
        from fertility.policy import Policy, load_policy

        pol = policy if isinstance(policy, Policy) else load_policy(policy)
        return evaluate(shards_report(folder, tokenizer, index), pol, label=tokenizer.label)

    return gate


def _default_gate(
    policy: Any, corpus_options: CorpusOptions, quiet: bool, corpus: _OneCorpus
) -> Callable:
    def gate(paths: list[str], tokenizer: Any) -> Any:
        return gate_corpus(
            paths,
            tokenizer,
            policy=policy,
            corpus_options=corpus_options,
            quiet=quiet,
            on_corpus=corpus.offer,
        )

    return gate


class _OneCorpus:
    """The command's one Corpus, handed from the gate to tokenizing: the one the gate measured
    (fertility.measure.analyze makes it, with its workers and --precision, and hands it over:
    `offer`), else one made from the paths when tokenizing first needs it (`get`: an injected
    gate, or the gate on --shards' counts). The paths are resolved once per command."""

    def __init__(self, paths: list[str], options: CorpusOptions) -> None:
        self.paths, self.options = paths, options
        self.corpus: Corpus | None = None

    def offer(self, corpus: Corpus) -> None:
        self.corpus = corpus

    def get(self) -> Corpus:
        if self.corpus is None:
            self.corpus = Corpus(self.paths, self.options)
        return self.corpus


def _resolve_config(run_json: dict | None, opts: PretrainOptions, env: D.DistEnv) -> TrainConfig:
    """The run's TrainConfig: the config file (or the defaults) with the options over it; on
    a resume, the run's stored one with the options over it (--config/--preset ignored)."""
    over = opts.config_overrides()
    if run_json is None:
        return load_config(opts.config, over)
    if opts.config is not None or opts.preset is not None:
        D.log(
            env,
            "warning: resuming: the run's stored configuration is used; --config/--preset ignored",
        )
    over.pop("preset", None)
    return resumed_config(run_json["train"], over, "run.json")


def pretrain(
    options: PretrainOptions, *, gate: Callable | None = None, callbacks: Any = None
) -> dict[str, Any]:
    """Train a model on `options.paths` with `options.tokenizer` into `options.out`.

    TrainConfig comes from `options.config` (or the defaults) with the options that are
    config keys (preset, steps, tokens, device, mix, ...; `options.settings` for any other)
    over it. `gate(paths, tokenizer) -> GateResult` defaults to fertility.gate.gate_corpus
    with `options.policy` and `options.corpus`; `callbacks` (tests) see every step
    (trainer.loop). With `options.resume` the run's stored config and gate verdict are
    reused and training continues from the newest valid checkpoint.
    `options.out` must be new, empty or a run folder (fertility.outputs: nothing the run did
    not write is replaced or deleted), and outside the corpus unless
    `options.allow_output_in_corpus`.
    Returns {"run_dir", "steps", "tokens", "final_loss", "forced", ...}.

    The stages, in order: what the folder already holds (_existing_run), the config, the
    tokenizer and the shards given (checked before anything is written), the model
    (_model_plan), the claim of the folder, then under the process group: the gate
    (_gate_stage), the data and its mix (_data_stage), run.json (_record_run), training
    (_train_stage).
    """
    opts = options
    run_dir = Path(opts.out)
    run_json = _existing_run(opts, run_dir)
    cfg = _resolve_config(run_json, opts, D.DistEnv(rank=int(os.environ.get("RANK", 0))))
    tok = load_tokenizer_arg(opts.tokenizer)
    shards = _read_shards(opts.shards, tok) if opts.shards else None
    unjudged = shards is not None and shards.get("counts") is None and gate is None
    if unjudged and not opts.force and run_json is None:  # before anything is written
        raise TrainingError(
            f"{opts.shards}: shards without the gate's counts (`fertility tokenize "
            "--no-counts`); tokenize again without it, or pass --force to train on an "
            "ungated tokenizer (recorded in run.json)"
        )
    model_cfg, init, separator = _model_plan(cfg, tok, shards)
    if int(os.environ.get("RANK", 0)) == 0:  # the one writer of the run folder, before it writes
        _claim(run_dir, opts, cfg.init_from)
    env = D.init_distributed(cfg.device)
    try:
        if run_json is not None:
            _check_resume(
                run_json, RunDir(run_dir).run_json, run_dir, list(opts.paths), tok, opts.shards
            )
        corpus = _OneCorpus(list(opts.paths), opts.corpus)  # made when first read
        gate_dict, forced = _gate_stage(opts, gate, run_json, tok, shards, unjudged, env, corpus)
        index, data_dir, mix_plan = _data_stage(
            opts, run_json, tok, shards, cfg, separator, env, corpus
        )
        if env.is_main:
            _record_run(
                opts,
                run_json,
                tok,
                shards,
                cfg,
                model_cfg,
                init,
                index,
                mix_plan,
                env,
                gate_dict,
                forced,
            )
        D.barrier(env)
        summary = _train_stage(
            opts, run_json, tok, cfg, model_cfg, init, index, data_dir, env, callbacks
        )
        if env.is_main and mix_plan is not None:
            record_consumed(RunDir(run_dir).run_json, summary["languages"])
    finally:
        D.shutdown(env)
    return {
        **summary,
        "forced": forced,
        "preset": cfg.preset,
        "tokenizer": tok.spec,
        "vocab_size": model_cfg.vocab_size,
    }


def _existing_run(opts: PretrainOptions, run_dir: Path) -> dict | None:
    """The run.json of the run to continue (--resume), None for a fresh run; a run folder
    without --resume is refused, one that never reached a checkpoint starts afresh."""
    layout = RunDir(run_dir)
    if not layout.run_json.is_file():
        return None
    if not _has_checkpoint(run_dir):
        # It failed before its first checkpoint: nothing to continue, nothing to protect.
        D.log(
            D.DistEnv(rank=int(os.environ.get("RANK", 0))),
            f"warning: {run_dir} holds a run that never reached a checkpoint; starting afresh",
        )
        return None
    if not opts.resume:
        raise TrainingError(
            f"{layout.run_json}: {run_dir} already holds a run; pass --resume "
            "to continue it or choose another --out"
        )
    return layout.read_run_json()


def _model_plan(cfg: TrainConfig, tok: Any, shards: Shards | None) -> tuple[Any, Any, int | None]:
    """(model config, the --init-from plan or None, the separator id), before anything is
    written: a config that cannot run stops here. The ids are the shards' with --shards,
    else the separator setting's (checked)."""
    meta = shards if shards is not None else shard_meta(tok, cfg.separator)
    separator, n_ids = meta["separator"], int(meta["vocab_size"])
    model_cfg = config_from_preset(cfg.preset, n_ids, cfg.model)
    init = None
    if cfg.init_from:  # continued pretraining: the base model's shapes and weights
        model_cfg = base_model.model_config(cfg.init_from, n_ids)
        init = base_model.plan(cfg.init_from, tok, cfg.new_rows_init)
        # (a preset's or [model]'s max_seq_len: checked with the config, trainer/config.py)
        if cfg.resolved_seq_len > model_cfg.max_seq_len:
            raise TrainingError(
                f"seq_len {cfg.seq_len} exceeds the model's max_seq_len "
                f"{model_cfg.max_seq_len} ({cfg.init_from}/config.json)"
            )
    return model_cfg, init, separator


def _gate_stage(
    opts: PretrainOptions,
    gate: Callable | None,
    run_json: dict | None,
    tok: Any,
    shards: Shards | None,
    unjudged: bool,
    env: D.DistEnv,
    corpus: _OneCorpus,
) -> tuple[RunGate | None, bool]:
    """(the gate's record, forced): a resumed run's stored verdict; shards without counts
    train forced; else the gate on the shards' counts or on the corpus."""
    gate_dict, forced = (run_json or {}).get("gate"), bool((run_json or {}).get("forced"))
    if run_json is None and unjudged:  # `tokenize --no-counts`: nothing to gate on
        D.log(env, f"warning: {opts.shards}: no counts to gate on; training (--force)")
        return None, True
    if run_json is None:
        default = (
            _shards_gate(opts.shards, shards, opts.policy)
            if opts.shards and shards is not None
            else _default_gate(opts.policy, opts.corpus, opts.quiet, corpus)
        )
        gate_dict, forced = _run_gate(
            gate or default, list(opts.paths), tok, tok.spec, opts.force, opts.quiet, env
        )
    return gate_dict, forced


def _data_stage(
    opts: PretrainOptions,
    run_json: dict | None,
    tok: Any,
    shards: Shards | None,
    cfg: TrainConfig,
    separator: int | None,
    env: D.DistEnv,
    corpus: _OneCorpus,
) -> tuple[Shards, Path, Mix | None]:
    """(the shards' index, their folder, the language mix plan): the shards given, or the
    corpus tokenized into the run folder (a resume reuses what is there)."""
    run_dir = Path(opts.out)
    if opts.shards and shards is not None:
        index, data_dir = shards, Path(opts.shards)
    else:
        index = _prepare_data(
            corpus,
            tok,
            run_dir,
            cfg,
            opts.quiet,
            env,
            separator,
            fresh=run_json is None,
        )
        data_dir = RunDir(run_dir).data
    mix_plan = plan_for_run(
        index,
        cfg,
        cfg.step_tokens(env.world_size)
        * cfg.total_steps(sum(s["tokens"] for s in index["train"]), env.world_size),
        say=(lambda m: None) if opts.quiet else (lambda m: D.log(env, m)),
        warn=lambda m: D.log(env, f"warning: {m}"),
    )
    # a resume keeps, until its first save, the last one
    if mix_plan is not None and run_json is not None and run_json.get("mix"):
        mix_plan["consumed"] = run_json["mix"].get("consumed")
    return index, data_dir, mix_plan


def _record_run(
    opts: PretrainOptions,
    run_json: dict | None,
    tok: Any,
    shards: Shards | None,
    cfg: TrainConfig,
    model_cfg: Any,
    init: Any,
    index: Shards,
    mix_plan: Mix | None,
    env: D.DistEnv,
    gate_dict: RunGate | None,
    forced: bool,
) -> None:
    """run.json: what the run is, before its first step (the main process writes it)."""
    run_dir = Path(opts.out)
    record: Run = {
        "schema": RUN_SCHEMA,
        "tokenizer": _copy_tokenizer(tok, run_dir),
        "model": model_cfg.to_dict(),
        "train": cfg.to_dict(),
        "gate": gate_dict,
        "forced": forced,
        "corpus": index.get("corpus"),
        "corpus_paths": _corpus_paths(list(opts.paths)) if shards is None else None,
        "data": {
            "shards": _shards_path(opts.shards),
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
    RunDir(run_dir).write_run_json(record, TrainingError)


def _train_stage(
    opts: PretrainOptions,
    run_json: dict | None,
    tok: Any,
    cfg: TrainConfig,
    model_cfg: Any,
    init: Any,
    index: Shards,
    data_dir: Path,
    env: D.DistEnv,
    callbacks: Any,
) -> dict[str, Any]:
    """The training loop on the shards (trainer.loop.train); its summary."""
    # deferred: looked up when called, so a test can replace it
    from fertility.trainer.loop import train

    def shards_of(split: str) -> TokenData:
        return TokenData.from_dir(
            data_dir, split, fingerprint=tok.fingerprint, vocab_size=model_cfg.vocab_size
        )

    specials = dict(tok.special_tokens)
    if index["separator"] is not None:
        specials["<separator>"] = index["separator"]
    return train(
        Path(opts.out),
        cfg,
        model_cfg,
        shards_of("train"),
        fingerprint=tok.fingerprint,
        special_ids=specials,
        env=env,
        quiet=opts.quiet,
        callbacks=callbacks,
        resume=opts.resume and run_json is not None,
        heldout=shards_of("heldout") if index["heldout"] else None,
        init=(lambda m: base_model.load_into(m, init)) if init else None,
    )


def _run_gate(
    gate: Callable, paths: list[str], tok: Any, spec: str, force: bool, quiet: bool, env: D.DistEnv
) -> tuple[RunGate | None, bool]:
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
    # a link at checkpoints/ is refused (the claim would refuse it) before it is read
    inside(run_dir, CHECKPOINTS, TrainingError)
    return bool(list_checkpoints(run_dir))


def _prepare_data(
    one: _OneCorpus,
    tok: Any,
    run_dir: Path,
    cfg: TrainConfig,
    quiet: bool,
    env: D.DistEnv,
    separator: int | None,
    fresh: bool,
) -> Shards:
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
                corpus = one.get()  # the gate's, read again: the paths are not resolved again
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
                    file_keys=corpus.file_keys(),
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
