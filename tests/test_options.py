"""Options are declared once (fertility.options, trainer.options): the command line is built
from the declarations, the library takes the same objects, and nothing lists an option, its
type or its default a second time."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import click
import pytest
from click.testing import CliRunner

from fertility import options as O
from fertility.cli import cli
from fertility.cli.options import command_options, corpus_settings, from_params, options_of
from fertility.corpus import Corpus, CorpusOptions
from fertility.errors import FertilityError, TrainingError
from fertility.trainer.options import PretrainOptions, config_fields, option_names

REPO = Path(__file__).resolve().parents[1]
# The options every corpus command inherits (fertility.options.CorpusCommandOptions).
SHARED = {"quiet", "allow_output_in_corpus"}


def params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name != "help"}


def declared(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f, _ in O.flags(cls)}


@dataclass(frozen=True)
class CorpusCommand(O.CorpusCommandOptions):
    """The least corpus command: its corpus options, and the two it inherits."""

    corpus: CorpusOptions = field(default_factory=CorpusOptions)


def test_corpus_options_on_the_command_line_are_corpus_options_fields():
    command = click.command()(options_of(CorpusCommand)(lambda **kw: None))
    got = params(command)
    fields = declared(CorpusOptions)
    assert set(got) == set(fields) | SHARED
    # the nested options object's fields in its place, the inherited ones after
    assert [p.name for p in command.params] == [*fields, "quiet", "allow_output_in_corpus"]
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
    @options_of(CorpusCommand)
    def cmd(**kw):
        seen["opts"] = corpus_settings(kw)
        seen["rest"] = dict(kw)
        seen["command"] = command_options(CorpusCommand, kw)

    result = CliRunner().invoke(
        cmd, ["--text-field", "body", "--sample", "0.5", "--seed", "7", "--strict", "-q"]
    )
    assert result.exit_code == 0, result.output
    opts = seen["opts"]
    assert isinstance(opts, CorpusOptions) and opts.on_warning is not None
    assert (opts.text_field, opts.sample, opts.seed, opts.strict) == ("body", 0.5, 7, True)
    assert set(seen["rest"]) == SHARED  # the corpus options taken out, the shared ones left
    assert seen["command"].quiet is True and seen["command"].allow_output_in_corpus is False


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
        # PATHS may be left out on the command line (--shards stands in for it; the options
        # object refuses neither or both)
        required = f.default is dataclasses.MISSING and not f.metadata[O.FLAG].optional
        assert got[name].required is required, name
        if not required and not isinstance(got[name], click.Argument):
            assert got[name].default == f.default, name
    # the fields that are not options: the corpus's, the API's settings
    others = {f.name for f in dataclasses.fields(PretrainOptions)} - set(fields)
    assert others == {"corpus", "settings"}
    assert list(got["device"].type.choices) == list(typing.get_args(O.Device))


# The options the corpus commands share, and --detail of report and gate: one declaration each
# (fertility.options), never a second field or a click option written again by hand.
SOURCES = [REPO / "fertility", REPO / "trainer", REPO / "eval"]
ONCE = ("quiet", "allow_output_in_corpus", "detail")
SPELT = {"--quiet", "-q", "--allow-output-in-corpus", "--detail"}


def _source_trees():
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _spelt(call: ast.Call) -> set[str]:
    """The flags a call spells: its own string arguments and its `decls=(...)`."""
    values = list(call.args)
    for kw in call.keywords:
        if kw.arg == "decls" and isinstance(kw.value, (ast.Tuple, ast.List)):
            values += kw.value.elts
    return {v.value for v in values if isinstance(v, ast.Constant)} & SPELT


def test_the_shared_options_and_detail_are_declared_once():
    fields: dict[str, list[str]] = {name: [] for name in ONCE}
    spelt, parsed = [], []
    for path, tree in _source_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    target = getattr(item, "target", None)
                    if isinstance(item, ast.AnnAssign) and isinstance(target, ast.Name):
                        if target.id in ONCE:
                            value = ast.unparse(item.value) if item.value else ""
                            fields[target.id].append(f"{path}:{node.name} = {value}")
            elif isinstance(node, ast.Call):
                if _spelt(node):
                    spelt.append(f"{path}:{node.lineno} {sorted(_spelt(node))}")
                if ast.unparse(node.func).endswith("parse_detail"):
                    parsed.append(f"{path}:{node.lineno}")
    shared = "fertility/options.py:CorpusCommandOptions"
    assert [f.split(" = ")[0] for f in fields["quiet"]] == [shared], fields["quiet"]
    assert [f.split(" = ")[0] for f in fields["allow_output_in_corpus"]] == [shared]
    # --detail: report's and gate's field, each the one declaration _detail() (help, default,
    # parse); the text is parsed there, by no command
    assert sorted(fields["detail"]) == [
        "fertility/options.py:GateOptions = _detail()",
        "fertility/options.py:ReportOptions = _detail()",
    ]
    assert parsed == []
    # the flags spelt once, in fertility/options.py (--allow-output-in-corpus and --detail by
    # their field names), never again as a click option
    assert len(spelt) == 1 and spelt[0].startswith("fertility/options.py:"), spelt
    assert spelt[0].endswith("['--quiet', '-q']")
    for verb in ("report", "gate", "fix", "extend", "tokenize", "pretrain", "eval"):
        got = [p for p in cli.commands[verb].params if p.name in ONCE]
        assert [p.opts for p in got if p.name != "detail"] == [
            ["--quiet", "-q"],
            ["--allow-output-in-corpus"],
        ], verb


def test_detail_reaches_report_and_gate_as_a_number_or_none(tmp_path, monkeypatch):
    """--detail is parsed where it is declared: each command's library call gets the number
    of documents, or None for all, and the default is the library's own."""
    import inspect

    import fertility.engine
    import fertility.gate
    import fertility.measure

    library_default = inspect.signature(fertility.measure.analyze).parameters["detail_docs"]
    assert inspect.signature(fertility.gate.gate_run).parameters["detail_docs"].default == (
        library_default.default
    )
    seen: list = []

    class Stop(Exception):
        pass

    def fake(*args, detail_docs, **kw):
        seen.append(detail_docs)
        raise Stop

    monkeypatch.setattr(fertility.measure, "analyze", fake)
    monkeypatch.setattr(fertility.gate, "gate_run", fake)
    # --tasks: measured by the engine; None is what a Slurm launch returns (nothing to print)
    monkeypatch.setattr(
        fertility.engine, "measure", lambda *a, detail_docs, **kw: seen.append(detail_docs)
    )
    monkeypatch.chdir(tmp_path)  # no fertility.toml or pyproject.toml around
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "en.txt").write_text("text\n")
    commands = [
        ["report", "c"],
        ["gate", "c", "-t", "tok.json"],
        ["report", "c", "--tasks", "2", "--work-dir", "w", "--pretokenizers", "gpt2"],
    ]
    for given, expected in (
        ([], library_default.default),
        (["--detail", "all"], None),
        (["--detail", "0"], 0),
        (["--detail", "015"], 15),
    ):
        seen.clear()
        for args in commands:
            result = CliRunner().invoke(cli, [*args, *given, "-q"])
            assert result.exception is None or isinstance(result.exception, Stop), result.output
        assert seen == [expected] * 3 and {type(v) for v in seen} == {type(expected)}, given


# Every verb and its options object (fertility.options, trainer.options); its field that is no
# command-line option itself, the corpus options, adds CorpusOptions' fields.
VERBS = {
    "report": O.ReportOptions,
    "gate": O.GateOptions,
    "fix": O.FixOptions,
    "extend": O.ExtendOptions,
    "tokenize": O.TokenizeOptions,
    "pretrain": PretrainOptions,
    "eval": O.EvalOptions,
    "export": O.ExportOptions,
}


def _expected_type(tp, flag: O.Flag):
    """What click type the declared type becomes (fertility.cli.options.click_decorator)."""
    args = typing.get_args(tp)
    if type(None) in args:
        (tp,) = [a for a in args if a is not type(None)]
    if flag.parse is not None or flag.argument:
        return "text"
    if typing.get_origin(tp) is Literal:
        return ("choice", list(typing.get_args(tp)))
    if typing.get_origin(tp) is tuple:
        return "text"
    if tp is bool:
        return "boolean"
    if tp in (int, float):
        if flag.min is None and flag.max is None:
            return "integer" if tp is int else "float"
        return ("range", tp, flag.min, flag.max, flag.min_open, flag.max_open)
    return "text"


def _click_type(param: click.Parameter):
    t = param.type
    if isinstance(t, click.Choice):
        return ("choice", list(t.choices))
    if isinstance(t, (click.IntRange, click.FloatRange)):
        kind = int if isinstance(t, click.IntRange) else float
        return ("range", kind, t.min, t.max, t.min_open, t.max_open)
    return t.name


def test_every_verb_is_its_options_object():
    """Each command's options are exactly its object's fields: names, order, defaults,
    required, types, help; and nothing else but the shared corpus options."""
    for verb, cls in VERBS.items():
        command = cli.commands[verb]
        got = params(command)
        fields = declared(cls)
        hints = typing.get_type_hints(cls)
        corpus = set(declared(CorpusOptions)) | SHARED if verb != "export" else set()
        assert set(got) == set(fields) | corpus, verb
        own = [p.name for p in command.params if p.name in fields]
        assert list(dict.fromkeys(own)) == list(fields), verb  # declaration order
        for name, f in fields.items():
            flag = f.metadata[O.FLAG]
            ps = [p for p in command.params if p.name == name]
            assert len(ps) == max(1, len(flag.switches)), (verb, name)
            required = f.default is dataclasses.MISSING and not flag.optional
            for p in ps:
                assert p.required is (required and not flag.switches), (verb, name)
                if isinstance(p, click.Argument):
                    assert flag.argument and p.nargs == (
                        -1 if hints[name] == tuple[str, ...] else 1
                    )
                    continue
                assert not flag.argument, (verb, name)
                assert p.opts == list(flag.names(name)) or flag.switches, (verb, name)
                if flag.switches:
                    switch = next(s for s in flag.switches if p.opts == [s.decl])
                    assert p.flag_value == switch.value and p.hidden is switch.hidden
                    assert switch.value in typing.get_args(typing.get_args(hints[name])[0])
                    continue
                if not required:
                    assert p.default == f.default, (verb, name)
                assert (p.help or "") == flag.help, (verb, name)
                assert p.metavar == flag.metavar, (verb, name)
                assert _click_type(p) == _expected_type(hints[name], flag), (verb, name)
        # the fields that are not options: the corpus's (pretrain's settings too); the two
        # shared ones are options, inherited
        others = {f.name for f in dataclasses.fields(cls)} - set(fields)
        if verb == "export":
            assert others == set() and not issubclass(cls, O.CorpusCommandOptions), verb
        else:
            corpus_field = "corpus_options" if verb == "eval" else "corpus"
            assert {corpus_field} <= others <= {corpus_field, "settings"}, verb
            assert issubclass(cls, O.CorpusCommandOptions) and list(fields)[-2:] == [
                "quiet",
                "allow_output_in_corpus",
            ], verb


def test_a_verb_body_reads_its_options_object(tmp_path, monkeypatch):
    """What click parsed reaches the library through the options object."""
    from fertility import fix as fix_module
    from fertility.gate import GateResult, PolicySummary

    seen = {}

    def fake_fix(paths, out_dir, config, **kw):
        seen.update(paths=paths, out_dir=out_dir, config=config, **kw)
        gate = GateResult([], [], PolicySummary())
        return type("R", (), {"gate": gate})()

    monkeypatch.setattr(fix_module, "fix", fake_fix)
    monkeypatch.setattr("fertility.fix.text.fix_text", lambda result: "ok")
    (tmp_path / "en.txt").write_text("text\n")
    args = ["fix", str(tmp_path), "--vocab-size", "300", "--out", str(tmp_path / "o")]
    more = ["--nfkc", "--special-token", "<a>", "--heldout", "0.2", "--sample", "0.5", "-q"]
    result = CliRunner().invoke(cli, args + more)
    assert result.exit_code == 0, result.output
    assert seen["paths"] == (str(tmp_path),) and seen["out_dir"] == str(tmp_path / "o")
    config = seen["config"]
    assert (config.vocab_size, config.normalization, config.heldout_fraction) == (300, "nfkc", 0.2)
    assert config.special_tokens == ("<a>",)
    assert seen["corpus_options"].sample == 0.5 and seen["allow_output_in_corpus"] is False


def test_policy_summary_is_of_a_policy_not_of_a_mapping():
    from fertility.gate import GateResult, PolicySummary
    from fertility.policy import load_policy

    policy = load_policy(None)
    summary = PolicySummary.of(policy)
    assert (summary.source, summary.uncertain, summary.fail_on) == (
        policy.source,
        policy.uncertain,
        policy.fail_on,
    )
    assert summary.to_dict() == policy.to_dict() and PolicySummary.of(summary) is summary
    assert GateResult([], [], policy).policy == summary
    with pytest.raises(TypeError, match="Policy or a PolicySummary"):
        PolicySummary.of(policy.to_dict())  # type: ignore[arg-type]


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
    from fertility.trainer import run as trainer_run

    seen = []
    monkeypatch.setattr(trainer_run, "pretrain", lambda options, **kw: seen.append(options) or {})
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
    from fertility.findings.finding import Finding
    from fertility.policy import SEVERITIES, Policy

    assert SEVERITIES == typing.get_args(O.Severity)
    hints = typing.get_type_hints(Finding)
    assert (hints["severity"], hints["group"]) == (O.Severity, O.Group)
    assert typing.get_type_hints(Policy)["fail_on"] == tuple[O.Severity, ...]
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


def test_every_option_says_what_it_does_and_its_default():
    """`--help` is complete: every option has a description, an option with a default shows
    it (or its switches say it), and the top-level help lists each command whole."""
    import click

    from fertility.cli import cli

    ctx = click.Context(cli)
    for name, command in cli.commands.items():
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            assert param.help, f"{name} {param.opts[0]}: no help"
            default = param.default
            if param.required:  # no default at all (click 8.3+ shows its UNSET sentinel here)
                continue
            if default not in (None, False, ()) and not param.is_flag:
                assert param.show_default, f"{name} {param.opts[0]}: default {default!r} not shown"
    listing = cli.get_help(ctx)
    assert "..." not in listing.split("Commands:")[1]


def _a_value(param) -> str:
    """A value click accepts for `param` (the test omits one required option at a time)."""
    import click

    if isinstance(param.type, click.types.IntParamType):
        return "5"
    if isinstance(param.type, click.types.FloatParamType):
        return "0.5"
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    return "x"


def _required_cases():
    from fertility.cli import cli

    for name, command in sorted(cli.commands.items()):
        required = [p for p in command.params if p.required]
        for missing in required:
            yield pytest.param(name, command, missing, id=f"{name}-{missing.name}")


@pytest.mark.parametrize("name, command, missing", list(_required_cases()))
def test_a_missing_required_option_is_clicks_one_line_error(name, command, missing, run):
    """Every required option or argument, left out (the others given), is refused by the
    command line itself, naming it, with exit 2: never a default of None reaching the library
    (click 8.3+ took an explicit default=None as a value; 'unexpected AttributeError' was the
    result for `gate DIR` without -t)."""
    import click

    argv = [name]
    for p in command.params:
        if p is missing or not p.required:
            continue
        if isinstance(p, click.Argument):
            argv.append("x")
        else:
            argv += [p.opts[0], _a_value(p)]
    code, out, err = run(*argv)
    kind = "argument" if isinstance(missing, click.Argument) else "option"
    assert code == 2 and err.startswith(f"error: Missing {kind} "), (argv, err)
    assert len(err.strip().splitlines()) == 1
