"""The NCCL stub library: the functions a consumer needs that the library under test lacks (pure).

A PyTorch build references NCCL functions newer than the library under test: PyTorch 2.11's
`libtorch_cuda.so` needs `ncclCommShrink`, `ncclAlltoAll`, `ncclCommWindowRegister`... which
NCCL 2.23.4 (R-2CCL, vanilla) lacks, so `LD_PRELOAD` of that library fails at `import torch` with
`undefined symbol`. A small library preloaded beside it, defining each missing function to return
`ncclInvalidUsage`, lets the job load and train; a job that calls one of them gets an NCCL error
it reports, never a silent fallback.

The list of functions is never kept by hand: it is the consumer's undefined dynamic symbols
(`nm -D --undefined-only`) minus the provider's defined ones (`nm -D --defined-only`), kept to
names NCCL's API would have (`nccl` or `pnccl`, the profiling aliases, then a capital letter).
A weak reference (`w`, `v`) is left alone: it loads without a definition, and the consumer tests it
for null, so a stub would turn "absent" into "present and failing".

Every stub, the first time it is called, writes one line on stderr, in this exact format
(matched by :data:`CALLED_LINE`, read back by :func:`called_stubs`)::

    r2bench-nccl-stub: NAME called: the NCCL under test (PROVIDER) lacks it

where NAME is the function and PROVIDER the path of the library whose symbols were read. A
launcher may put a prefix before it (`[1,0]<stderr>:`): the reader searches, it does not anchor.

This module renders the C source; `r2bench.setup.stubbuild` reads the symbol tables and compiles
it. Wiring it into `setup` and the preload is a later step (docs/setup.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

STUB_LIBRARY_NAME = "libr2bench-nccl-stubs.so"
STUB_SOURCE_NAME = "libr2bench-nccl-stubs.c"
STUB_MARK = "r2bench-nccl-stub:"
"""The fixed prefix of the line a called stub writes on stderr."""
NCCL_INVALID_USAGE = 5
"""`ncclInvalidUsage` in `ncclResult_t`: what every stub returns."""

_NCCL_NAME = re.compile(r"p?nccl[A-Z]\w*")
CALLED_LINE = re.compile(
    re.escape(STUB_MARK)
    + r" (?P<name>p?nccl[A-Z]\w*) called: the NCCL under test \((?P<provider>.*)\) lacks it"
)
"""A called stub's stderr line (see the module docstring)."""

# One line of `nm -D`: an address (absent for undefined symbols), the type letter, the name with
# an optional version (`@NCCL_2`, `@@NCCL_2`) and, in some binutils, a version index in parentheses.
_NM_LINE = re.compile(r"^(?:[0-9a-fA-F]+)?\s+(?P<kind>[A-Za-z?-])\s+(?P<name>[^\s@]+)(?:@\S*)?")
_STRONG_UNDEFINED = "U"
_UNDEFINED = "Uwv"


@dataclass(frozen=True)
class NmSymbol:
    """One dynamic symbol as `nm -D` lists it, its version stripped."""

    name: str
    kind: str
    """nm's type letter: `U` undefined, `w`/`v` weak undefined, `T`, `W`, `i`, ... defined."""

    @property
    def defined(self) -> bool:
        """Whether the file defines it (any letter but the undefined ones)."""
        return self.kind not in _UNDEFINED


@dataclass(frozen=True)
class StubLibrary:
    """What to stub for one consumer on one provider, and the C source that does it."""

    names: tuple[str, ...]
    """The missing functions, sorted, each once; empty: nothing to stub, nothing to preload."""
    source: str
    """The C source of the stub library (renders even when `names` is empty)."""
    consumer: str
    """The file whose undefined symbols were read (e.g. `libtorch_cuda.so`), as given."""
    provider: str
    """The library under test whose defined symbols were read (its `libnccl.so.2`), as given."""


def parse_nm(text: str) -> list[NmSymbol]:
    """The symbols of `nm -D` output; lines that are not symbols (file headers, notes) are skipped."""
    symbols = []
    for line in text.splitlines():
        match = _NM_LINE.match(line)
        if match:
            symbols.append(NmSymbol(name=match["name"], kind=match["kind"]))
    return symbols


def is_nccl_name(name: str) -> bool:
    """Whether `name` is one NCCL's API would have: `ncclX...` or its profiling alias `pncclX...`."""
    return _NCCL_NAME.fullmatch(name) is not None


def missing_functions(
    consumer: Iterable[NmSymbol], provider: Iterable[NmSymbol]
) -> tuple[str, ...]:
    """NCCL names the consumer needs (strongly undefined) that the provider does not define."""
    defined = {symbol.name for symbol in provider if symbol.defined}
    needed = {
        symbol.name
        for symbol in consumer
        if symbol.kind == _STRONG_UNDEFINED and is_nccl_name(symbol.name)
    }
    return tuple(sorted(needed - defined))


def stub_library(consumer: str, consumer_nm: str, provider: str, provider_nm: str) -> StubLibrary:
    """The stub library for a consumer on a provider, from their `nm -D` outputs.

    `consumer_nm` is `nm -D --undefined-only CONSUMER`, `provider_nm` is `nm -D --defined-only
    PROVIDER` (unfiltered output works too: each symbol's type letter is read).
    """
    names = missing_functions(parse_nm(consumer_nm), parse_nm(provider_nm))
    return StubLibrary(
        names=names,
        source=render_source(names, consumer, provider),
        consumer=consumer,
        provider=provider,
    )


def render_source(names: Iterable[str], consumer: str, provider: str) -> str:
    """C source defining each name as a stub that says once it was called and returns 5.

    Each stub is declared `int NAME(void)`: on the System V ABIs (x86-64, aarch64) the caller
    passes and cleans up its arguments, so a caller with the real prototype calls it safely, and
    `ncclResult_t` is an int-sized enum.
    """
    names = list(names)
    for name in names:
        if not is_nccl_name(name):
            raise ValueError(
                f"stub name {name!r} is not an NCCL function name (nccl or pnccl, then a capital)"
            )
    header = [
        "/* r2bench NCCL stub library: generated by r2bench.setup.stubs, do not edit.",
        f" * consumer: {_comment_safe(consumer)}",
        f" * provider: {_comment_safe(provider)}",
        f" * functions the consumer needs that the provider lacks ({len(names)}):",
        *(f" *   {name}" for name in names),
        f" * Each returns ncclInvalidUsage ({NCCL_INVALID_USAGE}) and, the first time it is called,",
        f' * says so on stderr in a line that starts with "{STUB_MARK}".',
        " */",
        "#include <stdio.h>",
        "",
    ]
    return "\n".join(header + [_stub(name, provider) for name in names])


def called_stubs(text: str) -> list[str]:
    """The functions whose stubs say in `text` (a run's stderr or log) that they were called.

    In the order of their first line, each once.
    """
    found: dict[str, None] = {}
    for match in CALLED_LINE.finditer(text):
        found.setdefault(match["name"], None)
    return list(found)


def _stub(name: str, provider: str) -> str:
    # fputs, not fprintf: the provider's path is text, never a format (a "%" in it stays a "%").
    # `said` is not atomic: two threads calling at once may both say it, which harms nothing.
    line = f"{STUB_MARK} {name} called: the NCCL under test ({provider}) lacks it\n"
    return (
        f"int {name}(void) {{\n"
        "  static int said;\n"
        "  if (!said) {\n"
        "    said = 1;\n"
        f"    fputs({_c_string(line)}, stderr);\n"
        "  }\n"
        f"  return {NCCL_INVALID_USAGE};\n"
        "}\n"
    )


def _c_string(text: str) -> str:
    """A C string literal for `text` (UTF-8; quotes, backslashes and controls escaped)."""
    parts = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\':
            parts.append("\\" + char)
        elif char == "\n":
            parts.append("\\n")
        elif 0x20 <= byte < 0x7F and char != "?":  # "?" is escaped so no trigraph can form
            parts.append(char)
        else:
            parts.append(f"\\{byte:03o}")
    return '"' + "".join(parts) + '"'


def _comment_safe(text: str) -> str:
    """`text` inside a /* */ comment: no terminator, one line."""
    return text.replace("*/", "* /").replace("\n", " ")
