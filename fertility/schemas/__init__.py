"""The versioned JSON outputs as typed records, and their JSON Schemas generated from them.

Each `*.schema.json` beside these modules is written by `make schemas`
(`python -m fertility.schemas.generate`) from a `typing.TypedDict` here, never by hand:
tests/test_schemas.py checks that the committed files are what the records generate and that
real outputs of the code validate against them.

The code that writes an output builds it as its record, and so do the functions that build
its parts: each names the record as its type (imported under `if TYPE_CHECKING:`; nothing
imports these modules at run time), so mypy (`make typecheck`) refuses a key written without
its record, or a record's key left unwritten. So are built: the report (Report.to_dict), the
gate's to_dict, fix-report.json (FixResult), extend-report.json (ExtendResult) and
ids-map.json, eval's result and its stages, the shard index (pretrain's build_shards,
tokenize's index) and tokenize's JSON, run.json, fertility_export.json, the manifest, the mix.
A part a function adds to a bigger record is a record of its own, unpacked into it
(report.Card, extend.BaseParts, shards.ShardParts, eval.TaskScores). Where a value arrives
untyped (a pandas row, json_safe's output, dataclasses.asdict, Corpus.summary()'s counters,
JSON read back, nll.summarize's per-model columns), one `cast` at that boundary names its
record. tests/test_schemas.py validates real outputs against the schemas, checks that each
builder names its record, and has mypy refuse a record built without a key.

Constraints and descriptions are `Annotated[..., msgspec.Meta(...)]`, a record's docstring its
description: msgspec, a test dependency, turns the records into JSON Schema.

verdicts.py   Check, Finding, Verdict: the gate's checks and the findings (report and gate)
corpus.py     CorpusSummary: the `corpus` object (report, fix, extend, run, shards)
report.py     Report (fertility.report/1); TokenizerId and the compared rows fix and extend share
gate.py       Gate (fertility.gate/1), which fix, extend, tokenize and run.json embed
fix.py        Fix (fertility.fix/1)
extend.py     Extend (fertility.extend/1) and ExtendIds (fertility.extend-ids/1, ids-map.json)
shards.py     Shards (fertility.shards/1, a shard folder's index.json) and Tokenize
              (fertility.tokenize/1)
run.py        Run (fertility.run/1, run.json)
eval.py       Eval (fertility.eval/1) and Export (fertility.export/1, fertility_export.json)
manifest.py   Manifest (fertility.manifest/1, .fertility-manifest.json)
generate.py   the generator: one schema file per output, from the table OUTPUTS
"""
