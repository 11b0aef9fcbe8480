"""Whether this machine can hold a document of --max-doc-chars characters while it is measured,
decided before anything is read.

Measuring one document holds the tokenizers' offsets and the per-character arrays of that
document at once: its memory grows with its length (docs/RELIABILITY.md, "Corpus input", gives
the measurements). A limit the machine cannot hold let a 300 MB line be read whole and measured
until the kernel's out-of-memory killer ended the run at 23.4 GB (or, under an address-space
limit, the interpreter aborted): such a limit is refused instead, in one line.
"""

from __future__ import annotations

import os

from fertility.errors import CorpusError
from fertility.options import MIN_BYTES_PER_CHAR


def available_memory() -> tuple[int, str] | None:
    """(bytes, what bounds them) this process may still take: the least of the memory the
    system has available, the cgroup's limit less its use (a container's), and the
    address-space limit (`ulimit -v`) less what this process has mapped. None when the
    system says nothing (not Linux, and no sysconf figure)."""
    bounds = [b for b in (_system(), _cgroup(), _address_space()) if b is not None]
    return min(bounds) if bounds else None


def check_document_limit(max_doc_chars: int) -> None:
    """Refuse a --max-doc-chars whose document needs more memory than `available_memory()`,
    at the least a document can need (MIN_BYTES_PER_CHAR a character)."""
    need = max_doc_chars * MIN_BYTES_PER_CHAR
    have = available_memory()
    if have is None or need <= have[0]:
        return
    raise CorpusError(
        f"--max-doc-chars {max_doc_chars:,}: measuring a document that long needs at least "
        f"{_size(need)} ({MIN_BYTES_PER_CHAR} bytes a character, several times more with most "
        f"text and tokenizers), more than the {_size(have[0])} {have[1]}; lower the limit "
        "or split the documents"
    )


def _size(n: int) -> str:
    return f"{n / (1 << 30):,.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):,.0f} MiB"


def _system() -> tuple[int, str] | None:
    try:  # Linux: what can be allocated without swapping, page cache that can be dropped too
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "this machine has available"
    except (OSError, ValueError, IndexError):
        pass
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES")
        return pages * os.sysconf("SC_PAGE_SIZE"), "this machine has free"
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup() -> tuple[int, str] | None:
    """cgroup v2: memory.max less memory.current of this process's group."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            group = next(line.split(":", 2)[2].strip() for line in fh if line.startswith("0::"))
        folder = os.path.join("/sys/fs/cgroup", group.lstrip("/"))
        with open(os.path.join(folder, "memory.max"), encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(folder, "memory.current"), encoding="ascii") as fh:
            used = int(fh.read())
        return max(int(limit) - used, 0), "this process's cgroup has left"
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def _address_space() -> tuple[int, str] | None:
    """The soft RLIMIT_AS less this process's mapped size (/proc/self/statm)."""
    try:
        import resource  # not on Windows
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(soft - mapped, 0), "the address-space limit (ulimit -v) leaves"


__all__ = ["available_memory", "check_document_limit"]
