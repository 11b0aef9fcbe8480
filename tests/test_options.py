"""Options are declared once (fertility.options, trainer.options): the command line is built
from the declarations, the library takes the same objects, and nothing lists an option, its
type or its default a second time."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click
import pytest
from click.testing import CliRunner

from fertility import options as O
from fertility.cli import cli
from fertility.cli.options import corpus_options, corpus_settings, from_params, options_of
from fertility.corpus import Corpus, CorpusOptions
from fertility.errors import FertilityError, TrainingError
from fertility.trainer.options import PretrainOptions, config_fields, option_names

REPO = Path(__file__).resolve().parents[1]
# The options every corpus command adds besides CorpusOptions' own fields.
SHARED = {"quiet", "allow_output_in_corpus"}


def params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name != "help"}


def declared(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f, _ in O.flags(cls)}


def test_corpus_options_on_the_command_line_are_corpus_options_fields():
    command = corpus_options(click.command()(lambda **kw: None))
    got = params(command)
    fields = declared(CorpusOptions)
    assert set(got) == set(fields) | SHARED
    # everything but the callback is an option, with the dataclass's own default
    assert set(fields) == {f.name for f in dataclasses.fields(CorpusOptions)} - {"on_warning"}
    for name, f in fields.items():
        assert got[name].default == f.default, name
        assert not got[name].required
    assert got["max_doc_chars"].default == O.MAX_DOC_CHARS == 1_000_000
    assert got["max_invalid_utf8"].default == O.MAX_INVALID_SHARE


def test_every_corpus_command_takes_the_same_corpus_options():
    for name in ("report", "gate", "fix", "extend", "pretrain", "eval"):
        assert set(declared(CorpusOptions)) | SHARED <= set(params(cli.commands[name])), name


def test_corpus_settings_builds_one_corpus_options_from_what_click_parsed():
    seen = {}

    @click.command()
    @corpus_options
    def cmd(**kw):
        seen["opts"] = corpus_settings(kw)
        seen["rest"] = kw

    result = CliRunner().invoke(
        cmd, ["--text-field", "body", "--sample", "0.5", "--seed", "7", "--strict", "-q"]
    )
    assert result.exit_code == 0, result.output
    opts = seen["opts"]
    assert isinstance(opts, CorpusOptions) and opts.on_warning is not None
    assert (opts.text_field, opts.sample, opts.seed, opts.strict) == ("body", 0.5, 7, True)
    assert set(seen["rest"]) == SHARED  # the corpus options taken out, the shared ones left


def test_corpus_options_is_a_value_not_a_mapping(tmp_path):
    (tmp_path / "en.txt").write_text("one\ntwo\nthree\n")
    assert not isinstance(CorpusOptions(), Mapping)
    with pytest.raises(TypeError, match="CorpusOptions"):
        Corpus([str(tmp_path)], {"strict": True})
    # Corpus's keywords are CorpusOptions' fields: each accepted, over the options given
    opts = CorpusOptions(max_docs=2, seed=3)
    corpus = Corpus([str(tmp_path)], opts, strict=True)
    assert corpus.options == dataclasses.replace(opts, strict=True)
    assert len(list(corpus.documents())) == 2
    for f in dataclasses.fields(CorpusOptions):
        Corpus([str(tmp_path)], **{f.name: getattr(opts, f.name)})
    with pytest.raises(TypeError):
        Corpus([str(tmp_path)], text_feild="x")


def test_the_pretrain_command_is_pretrain_options():
    got = params(cli.commands["pretrain"])
    fields = declared(PretrainOptions)
    assert set(got) == set(fields) | set(declared(CorpusOptions)) | SHARED
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING
        assert got[name].required is required, name
        if not required and not isinstance(got[name], click.Argument):
            assert got[name].default == f.default, name
    # the fields that are not options: the corpus's, the two shared ones, the API's settings
    others = {f.name for f in dataclasses.fields(PretrainOptions)} - set(fields)
    assert others == {"corpus", "settings"} | SHARED
    assert list(got["device"].type.choices) == list(typing.get_args(O.Device))


def test_trainer_config_names_options_from_the_declarations():
    from fertility.trainer.config import OPTIONS, TrainConfig

    keys = {f.name for f in dataclasses.fields(TrainConfig)}
    assert {f.name for f in config_fields()} <= keys  # a config field is a TrainConfig key
    assert OPTIONS == {f.name: option_names()[f.name] for f in config_fields()}
    assert OPTIONS["init_from"] == "--init-from" and OPTIONS["mix_temperature"] == (
        "--mix-temperature"
    )


def test_pretrain_options_reach_pretrain_as_one_object(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from fertility import trainer

    seen = []
    monkeypatch.setattr(trainer.run, "pretrain", lambda options, **kw: seen.append(options) or {})
    (tmp_path / "en.txt").write_text("text\n")
    args = ["pretrain", str(tmp_path), "-t", "tok.json", "--out", str(tmp_path / "run")]
    more = ["--steps", "3", "--mix", "de=0.5,fr=0.5", "--init-from", "m", "--sample", "0.5", "-q"]
    result = CliRunner().invoke(cli, args + more)
    assert result.exit_code == 0, result.output
    (opts,) = seen
    assert isinstance(opts, PretrainOptions)
    assert opts.paths == (str(tmp_path),) and opts.out == str(tmp_path / "run") and opts.quiet
    assert opts.corpus.sample == 0.5 and opts.corpus.on_warning is not None
    assert opts.config_overrides() == {
        "steps": 3,
        "mix": {"de": 0.5, "fr": 0.5},
        "init_from": "m",
    }


def test_pretrain_options_refuse_what_cannot_go_together():
    with pytest.raises(TrainingError, match="give --steps or --tokens, not both"):
        PretrainOptions(["c"], "t", "o", steps=1, tokens=5)
    with pytest.raises(TrainingError, match="--mix or --mix-temperature"):
        PretrainOptions(["c"], "t", "o", mix={"bn": 1.0}, mix_temperature=0.3)
    opts = PretrainOptions(Path("c"), Path("t.json"), Path("o"), settings={"seq_len": 64})
    assert (opts.paths, opts.tokenizer, opts.out) == (("c",), "t.json", "o")
    assert opts.config_overrides() == {"seq_len": 64}
    # a field given wins over the same key in settings
    assert PretrainOptions(["c"], "t", "o", steps=2, settings={"steps": 9}).config_overrides() == {
        "steps": 2
    }


def test_fixed_sets_are_one_literal_each():
    choices = {
        ("report", "fmt"): O.ReportFormat,
        ("gate", "fmt"): O.GateFormat,
        ("eval", "fmt"): O.EvalFormat,
        ("export", "target"): O.ExportTarget,
        ("fix", "model"): O.FixModel,
        ("fix", "backend"): O.FixBackend,
    }
    for (command, name), values in choices.items():
        param = params(cli.commands[command])[name]
        assert list(param.type.choices) == list(typing.get_args(values)), (command, name)


def test_a_declared_option_of_each_type_becomes_its_click_option():
    """What a newcomer's new field gets: its type, range, choices, default and help."""

    @dataclass(frozen=True)
    class Toy:
        name: str = O.option(help="A name.")
        count: int | None = O.option(None, min=1, help="How many.")
        share: float = O.option(0.5, min=0, max=1, max_open=True, show_default=True)
        loud: bool = O.option(False, decls=("-l", "--loud"))
        kind: Literal["a", "b"] = O.option("a")
        tags: tuple[str, ...] = O.option(())
        pairs: dict | None = O.option(None, parse=lambda t: dict([t.split("=")]))
        hidden: int = 0  # not an option

    seen = {}

    @click.command()
    @options_of(Toy)
    def cmd(**kw):
        seen["toy"] = from_params(Toy, kw)

    got = params(cmd)
    assert set(got) == {"name", "count", "share", "loud", "kind", "tags", "pairs"}
    assert got["name"].required and got["name"].help == "A name."
    assert isinstance(got["count"].type, click.IntRange) and got["count"].type.min == 1
    assert got["loud"].is_flag and got["loud"].opts == ["-l", "--loud"]
    assert list(got["kind"].type.choices) == ["a", "b"] and got["tags"].multiple
    runner = CliRunner()
    ok = runner.invoke(cmd, ["--name", "x", "--share", "0.25", "-l", "--kind", "b"])
    assert ok.exit_code == 0, ok.output
    ok = runner.invoke(cmd, ["--name", "x", "--tags", "p", "--tags", "q", "--pairs", "k=v"])
    assert ok.exit_code == 0, ok.output
    assert seen["toy"] == Toy("x", None, 0.5, False, "a", ("p", "q"), {"k": "v"})
    assert runner.invoke(cmd, ["--name", "x", "--share", "1"]).exit_code == 2  # max_open
    assert runner.invoke(cmd, ["--name", "x", "--kind", "c"]).exit_code == 2


def test_terminated_and_extend_error_live_in_errors():
    import fertility.cli
    import fertility.extend
    from fertility import errors

    assert issubclass(errors.ExtendError, FertilityError)
    assert fertility.extend.ExtendError is errors.ExtendError
    assert not issubclass(errors.Terminated, Exception)
    assert not hasattr(fertility.cli, "Terminated") or fertility.cli.Terminated is errors.Terminated


def test_batch_sources_share_one_cursor_protocol():
    from fertility.trainer.data import Batches, BatchSource
    from fertility.trainer.mix import CountedBatches, MixBatches

    for cls in (Batches, CountedBatches, MixBatches):
        assert issubclass(cls, BatchSource), cls


def test_python_dash_m_fertility_is_the_command():
    """What `torchrun -m fertility pretrain` runs."""
    proc = subprocess.run(
        [sys.executable, "-m", "fertility", "pretrain", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--init-from" in proc.stdout and "--policy" in proc.stdout
    assert "--text-field" in proc.stdout
