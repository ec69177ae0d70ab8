"""The library a log says ran: its family (NCCL, RCCL, R-2CCL, MSCCL, another fork) and
version, line by line (`library_of_line`, `LibraryEvidence`), and the library file a log says
was loaded (`loaded_path`); a run's library from all its
output (`identify_library`) and its R2CC_MODE (`r2cc_mode`), the one reading `parse`, `import`
and the tables share; NCCL_VERSION_CODE as a dotted version."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from r2bench.parse.models import Event, EventKind, ParsedNcclTests


def other_library_loaded(parsed: ParsedNcclTests) -> str | None:
    """Why a run's results are not the library under test's, when the program loaded another
    NCCL than the one it was built against (`nccl-headers` and `nccl-library` differ: an
    LD_LIBRARY_PATH that does not put the library first, and nccl-tests has no RPATH); None
    when they agree or either is unknown (a run that died before its header)."""
    built, loaded = parsed.nccl_headers, parsed.nccl_library
    if built is None or loaded is None or built == loaded:
        return None
    return (
        f"the program loaded NCCL {nccl_version_text(loaded)} (nccl-library={loaded}) but was "
        f"built against {nccl_version_text(built)} (nccl-headers={built}): the results are not "
        "the library under test's; put its lib folder first on LD_LIBRARY_PATH (the recipe's "
        "lib_dir)"
    )


def other_file_loaded(parsed: ParsedNcclTests, library_dir: str | None) -> str | None:
    """Why a run's results are not the library under test's, when its output names the
    libnccl file that was loaded (r2b_verify's banner, a loader's trace) and that file is not
    in the library's folder `library_dir`; None when it is, or either is unknown. A folder
    given relative to the node's home (`.r2bench/...`, `~/...`) is matched as the end of the
    loaded file's folder, which the loader may name absolute."""
    loaded = parsed.library_path
    if not loaded or not library_dir:
        return None
    folder = posixpath.normpath(library_dir.removeprefix("~/"))
    loaded_in = posixpath.dirname(posixpath.normpath(loaded))
    if loaded_in == folder or (
        not posixpath.isabs(folder) and (loaded_in + "/").endswith("/" + folder + "/")
    ):
        return None
    return (
        f"the program loaded {loaded}, not the library under test from {library_dir}: the "
        "results are not that library's; an LD_PRELOAD, an RPATH or an LD_LIBRARY_PATH put the "
        "other file first"
    )


def nccl_version_text(code: int | None) -> str | None:
    """NCCL_VERSION_CODE -> dotted version: 22803 -> '2.28.3' (None stays None)."""
    if code is None or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


LIBRARY_FAMILIES = ("nccl", "rccl", "r2ccl", "msccl", "other")
"""What a log can say ran: NCCL, RCCL, R-2CCL (the NCCL fork under test, which reports NCCL's
version), MSCCL (NCCL with an `.MSCCL.` version suffix) and other vendor forks."""

# `NCCL version 2.19.3+cuda12.2`, `RCCL version : 2.22.3-develop:f5b15f2`, PyTorch's
# `..., NCCL version 2.19.3`; another `<X>CCL version N` names a vendor fork.
_VERSION_LINE_RE = re.compile(
    r"(?<![\w-])(?P<lib>[A-Z][A-Z0-9]{0,7}CCL[A-Z0-9]{0,4}) version\s*:?\s*(?P<version>\d[^\s,;)]*)"
)
# A fork's suffix on NCCL's own version: `2.12.12.MSCCL.0.7.3+cuda11.6`.
_FORK_SUFFIX_RE = re.compile(r"^\d+\.\d+\.\d+\.(?P<fork>[A-Za-z][A-Za-z0-9]*)")
# rccl-tests' own lines: `rccl-tests: Version develop:448c4c7`, `# rccl-tests version 2.17.9 ...`.
# (`rcccl-tests`: how some RCCL builds spell it.)
_RCCL_TESTS_RE = re.compile(r"rc{2,3}l-tests:? [Vv]ersion")
# AMD GPUs (`AMD Instinct MI350X`, `AMD Radeon Graphics`): only RCCL (or a fork of it) drives
# them, whatever NCCL-style lines the output prints.
_AMD_DEVICE_RE = re.compile(r"\bAMD\b|\bInstinct\b|\bMI[1-4]\d{2}[A-Z]{0,2}\b")


def amd_device(names: Iterable[str | None]) -> str | None:
    """The first device name of `names` that is an AMD GPU, or None."""
    return next((n for n in names if n and _AMD_DEVICE_RE.search(n)), None)


# R-2CCL's own log lines: `NCCL INFO R2CC: ...`, `NCCL INFO R2CC_MODE=1 (RECV-CONNECT) ...`, a
# WARN from its `r2cc/` sources (`r2cc/oob/oob_udp.cc:93 NCCL WARN ...`). Stock NCCL prints none
# of them; a command line that sets R2CC_* variables is no proof (it may run stock NCCL).
_R2CC_RE = re.compile(r"NCCL (?:INFO|WARN|TRACE) R2CC|(?:^|[\s/])r2cc/\S+:\d+ NCCL ")


def library_of_line(text: str) -> tuple[str, str | None] | None:
    """(family, version as printed) a line states, or None: `NCCL version 2.19.3+cuda12.2` ->
    ("nccl", "2.19.3+cuda12.2"); `RCCL version : 2.22.3-develop:f5b15f2` (also inside an NCCL
    INFO line) -> ("rccl", ...); `NCCL version 2.12.12.MSCCL.0.7.3+cuda11.6` -> ("msccl", ...);
    another fork's `MCCL version 2.16.5` -> ("other", "MCCL 2.16.5"); rccl-tests' version lines
    -> ("rccl", None); an R-2CCL line (R2CC log lines, a WARN from `r2cc/` sources) ->
    ("r2ccl", None)."""
    if "CCL" in text and (m := _VERSION_LINE_RE.search(text)) is not None:
        lib, version = m.group("lib"), m.group("version")
        if lib == "NCCL":
            fork = _FORK_SUFFIX_RE.match(version)
            name = fork.group("fork").lower() if fork else "nccl"
            return (name if name in LIBRARY_FAMILIES else "other"), version
        if lib == "RCCL":
            return "rccl", version
        return "other", f"{lib} {version}"
    if "ccl-tests" in text and _RCCL_TESTS_RE.search(text):
        return "rccl", None
    if ("R2CC" in text or "r2cc/" in text) and _R2CC_RE.search(text):
        return "r2ccl", None
    return None


# A line that names the libnccl file a process loaded (the training workloads' start line, a
# dynamic loader's trace, a program's own report): `loaded /opt/r2ccl/build/lib/libnccl.so.2`.
_LOADED_PATH_RE = re.compile(
    r"(?i:load|using|served|mapped|library)[^/\n]{0,40}?(?P<path>/[^\s'\",;()]*libnccl[^\s'\",;()/]*\.so[.\d]*)"
)


def loaded_path(text: str) -> str | None:
    """The libnccl file `text` says was loaded (served the run), or None."""
    if "libnccl" not in text:
        return None
    m = _LOADED_PATH_RE.search(text)
    return m.group("path") if m else None


class LibraryEvidence:
    """The library family and version a log states, line by line (see `library_of_line`).

    R-2CCL is told by its own lines, whatever version it reports (NCCL's); RCCL and forks by
    their version lines; NCCL by its version line when nothing else names another family. The
    version is the first one printed."""

    __slots__ = ("family", "path", "version")

    def __init__(self) -> None:
        self.family: str | None = None
        self.version: str | None = None
        self.path: str | None = None
        """The libnccl file the log says was loaded (the first one named)."""

    def feed(self, text: str) -> bool:
        """Take what `text` states about the library; whether it stated anything."""
        if self.path is None and (path := loaded_path(text)) is not None:
            self.path = path
            return True
        found = library_of_line(text)
        if found is None:
            return False
        family, version = found
        if family == "r2ccl" or self.family in (None, "nccl"):
            self.family = family
        if version is not None and self.version is None:
            self.version = version
        return True


MODE_VARIABLE = "R2CC_MODE"
"""The variable that picks R-2CCL's recovery mode (0 off, 1, 2 Balance, 3 R2CC-AllReduce)."""

_GUESS = "guess: "
_R2CC_EVENT_PREFIX = "r2cc_"


@dataclass(frozen=True)
class LibraryIdentity:
    """The library a run's output shows ran, and how that is known.

    `recipe` is the library's name as a sweep's recipes call it (nccl, rccl, r2ccl); `basis`
    says what proved it, or starts with `guess:` when nothing did (then `proven` is False and
    `parse --json` prints no library)."""

    recipe: str
    version: str | None
    """The version as printed (`2.19.3+cuda12.2`), None when none is."""
    basis: str

    @property
    def proven(self) -> bool:
        """Whether the output proves the library (not a guess)."""
        return not self.basis.startswith(_GUESS)

    @property
    def shown(self) -> str | None:
        """The library `parse --json` and the tables name: the recipe when proven, else None."""
        return self.recipe if self.proven else None


def identify_library(
    parsed: ParsedNcclTests, env: Mapping[str, str], events: Iterable[Event]
) -> LibraryIdentity:
    """What a run's output proves about the library that ran: R2CC log lines prove R-2CCL;
    rccl-tests' and RCCL's own lines prove RCCL; otherwise the version the output prints
    (NCCL's `NCCL version 2.19.3+cuda12.2` line, nccl-tests' `nccl-library=`, a -J file's
    `nccl_library`) names an NCCL build. R2CC_* variables without any R2CC line, or no version
    at all, are only a guess, and the basis says so (`parse` and `import` both call this)."""
    events = list(events)
    printed = parsed.library_version or next(
        (e.details.get("version") for e in events if e.kind is EventKind.NCCL_VERSION), None
    )
    version = printed or nccl_version_text(parsed.nccl_library or parsed.nccl_headers)
    if any(e.kind.value.startswith(_R2CC_EVENT_PREFIX) for e in events):
        return LibraryIdentity("r2ccl", version, "R2CC log lines")
    if parsed.library_family == "rccl":
        amd = amd_device(d.name for d in parsed.devices)
        said = (
            f"RCCL version {version} printed"
            if version
            else (f"AMD devices ({amd}), no version" if amd else "rccl-tests lines, no version")
        )
        return LibraryIdentity("rccl", version, f"{said}, no R2CC log line")
    if any(name.startswith("R2CC_") for name in env):
        return LibraryIdentity("r2ccl", version, _GUESS + "R2CC_* variables set, no R2CC log line")
    if version:
        return LibraryIdentity("nccl", version, f"NCCL version {version} printed, no R2CC log line")
    return LibraryIdentity("nccl", None, _GUESS + "no library version or R2CC line in the output")


def r2cc_mode(env: Mapping[str, object]) -> str | None:
    """The R2CC_MODE a run's environment sets (a -J file's env, the artifact harness's
    settings, a run's spec), as text; None when unset."""
    value = env.get(MODE_VARIABLE)
    return None if value is None else str(value)
