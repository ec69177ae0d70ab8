"""Constrained scalar types shared by the testbed, experiment and recipe models.

Names that end up in shell commands (node names, interface names, variable names) are restricted
to characters that need no quoting; free-form values (environment values, paths) are allowed
anything but NUL and are shell-quoted wherever they are used.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, StringConstraints


class StrictModel(BaseModel):
    """Base for config models: unknown keys are errors, values are immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL byte")
    return value


Name = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"),
]
"""A name used in ids and commands: letters, digits, `_ . -`, starting with a letter or digit."""

IfName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}$")]
"""A Linux network interface name (at most 15 characters, no spaces or slashes)."""

HostAddress = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}$")]
"""A hostname or an IPv4/IPv6 address."""

EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
"""An environment variable name."""

_LIBRARY_PATH_FIX = (
    "remove it: r2bench puts each library's own lib folder first itself (a library of its own "
    "is a `libraries:` entry with its recipe; CUDA's and MPI's folders come from the testbed's "
    "paths)"
)
RESERVED_VARIABLES: dict[str, tuple[str, str]] = {
    "LD_LIBRARY_PATH": (
        "replaces the library's own lib folder that r2bench puts first on it: nccl-tests has no "
        "RPATH, so every library's runs would load whatever libnccl it finds there",
        _LIBRARY_PATH_FIX,
    ),
    "LD_PRELOAD": (
        "loads other libraries ahead of the library under test (and replaces the preload "
        "r2bench gives a training job: the library and its stubs)",
        "remove it: a benchmark recipe's `preload:` names what its runs preload",
    ),
    "LD_AUDIT": (
        "loads an auditing library that can rebind every symbol of the library under test",
        "remove it",
    ),
}
"""Variables that would replace the library under test in a run: name -> (why, fix)."""
R2BENCH_VARIABLES = (
    "R2B_RUN", "R2B_EXPECT_NCCL", "R2B_EMULATED_LIBRARY", "R2B_NIC_MAP", "R2B_NICS",
    "R2B_NIC_ADDRS", "R2B_NIC_NAMES", "R2B_SYSFS", "R2B_WORK", "R2B_CUDA_HOME", "R2B_MPI_HOME",
)  # fmt: skip
"""r2bench's own variables: it sets them for a run (the run's mark, the library a run must be
served by, the emulated library a recipe stands for, the NICs of the emulated workload) or for
its node scripts. The workloads' test hooks (R2B_VERIFY_CORRUPT, R2B_TRAIN_CORRUPT,
R2B_TEST_FREEZE, R2B_TEST_NODE_PER_RANK) are settings an experiment may give."""


def reserved_variable_problem(name: str) -> tuple[str, str] | None:
    """(why, fix) when a run's environment may not set `name`: it would replace the library
    under test or one of r2bench's own variables; else None."""
    if name in RESERVED_VARIABLES:
        return RESERVED_VARIABLES[name]
    if name in R2BENCH_VARIABLES:
        return (
            "is r2bench's own, set by r2bench itself: a value here would change what runs "
            "(R2B_EMULATED_LIBRARY turns one emulated library into another)",
            "remove it: pick the library with a `libraries:` entry",
        )
    return None


def _run_variable(name: str) -> str:
    problem = reserved_variable_problem(name)
    if problem is not None:
        why, fix = problem
        raise ValueError(f"{name} may not be set here: it {why} (found {name!r}); {fix}")
    return name


RunEnvName = Annotated[EnvName, AfterValidator(_run_variable)]
"""A variable an experiment or a testbed node may set for its runs: not one that would replace
the library under test (LD_LIBRARY_PATH, LD_PRELOAD) or r2bench's own (R2B_RUN, ...)."""

FreeText = Annotated[str, AfterValidator(_no_nul)]
"""Any text; always shell-quoted when it reaches a command line."""

_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def git_ref_problem(ref: str) -> str | None:
    """Why `ref` cannot be a git tag, branch or commit name (git's check-ref-format rules),
    or None. A leading `-` above all: git would read it as an option (`-f`, `--orphan=x`)."""
    if ref.startswith("-"):
        return (
            f"a ref may not start with '-': git would read it as an option, not a revision "
            f"(found {ref!r}); give a tag, branch or commit"
        )
    if not ref:
        return "an empty ref (found ''): give a tag, branch or commit"
    found = _REF_FORBIDDEN.search(ref)
    if found is not None:
        return (
            f"a ref may not hold {found.group()!r} (git refuses it in a name; found {ref!r}):"
            " give a tag, branch or commit"
        )
    if ref == "@" or ref.endswith((".", "/", ".lock")) or ref.startswith(("/", ".")) or "/." in ref:
        return f"not a name git takes for a tag or branch (found {ref!r}): give a tag, branch or commit"
    return None


def _git_ref(value: str) -> str:
    problem = git_ref_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


GitRef = Annotated[str, AfterValidator(_git_ref)]
"""A git tag, branch or commit: checked by git's naming rules when the file is read, so no ref
reaches git as an option (and every git command also gets it after `--end-of-options`)."""


def _env_value(value: Any) -> str:
    """Environment values may be written as YAML numbers or booleans; keep them as text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float | str):
        return _no_nul(str(value))
    raise ValueError(f"expected a string or number, found {type(value).__name__}")


EnvValue = Annotated[str, BeforeValidator(_env_value)]

# ASCII digits: `\d` takes Arabic-Indic or full-width ones too (`٨K` would read as 8K).
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?B?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZE = 1 << 40
"""Largest message size: 1 TiB, several times the memory of any GPU (an H200 has 141 GB)."""


def short_repr(value: Any, limit: int = 40) -> str:
    """repr of a value for a message, cut short (a 400-digit number is not worth quoting)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def parse_size(value: Any) -> int:
    """Bytes from `8`, `"64K"`, `"8G"`, `"8GiB"` (binary units, as nccl-tests reads them)."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 8, 64K or 8G, found a boolean")
    if isinstance(value, int):
        size = Fraction(value)
    elif isinstance(value, str) and len(value) <= 1000 and (match := _SIZE_RE.match(value)):
        size = Fraction(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    else:
        raise ValueError(f"expected a size such as 8, 64K or 8G, found {short_repr(value)}")
    if size <= 0:
        raise ValueError(f"size must be positive, found {short_repr(value)}")
    if size.denominator != 1:
        raise ValueError(
            f"size must be a whole number of bytes, found {short_repr(value)} ({float(size):g} B)"
        )
    if size > MAX_SIZE:
        raise ValueError(f"size must be at most 1T ({MAX_SIZE} B), found {short_repr(value)}")
    return int(size)


def format_size(size: int) -> str:
    """Short binary-unit text for a byte count: 8, 64K, 8G (as nccl-tests flags accept)."""
    for unit in ("T", "G", "M", "K"):
        scale = _SIZE_UNITS[unit]
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


Size = Annotated[int, BeforeValidator(parse_size)]


_RATE_RE = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)([kmgt]?)(bit|bps)")
_RATE_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
MAX_RATE_BITS = 10 * 10**12
"""Highest bandwidth cap r2bench passes to tc: 10 Tbit/s, beyond any NIC (tc's own bound on
a tbf rate is far above; a value this large is a typo)."""


def rate_bits_per_s(text: str) -> float | None:
    """Bits per second of a tc rate (`10mbit`, `1gbit`, `125mbps`: as tc and the injectors
    take it, lower case, nothing around it), or None when not one."""
    match = _RATE_RE.fullmatch(text)
    if match is None:
        return None
    bits = float(match.group(1)) * _RATE_SCALE[match.group(2)]
    return bits * (8 if match.group(3) == "bps" else 1)


def rate_problem(text: str, floor_bits: int = 0) -> str | None:
    """Why `text` is not a bandwidth tc takes (`10mbit`, `1gbit`, `125mbps` in bytes), or None.
    With `floor_bits`, a rate below it is refused too (what the shaper can keep)."""
    match = _RATE_RE.fullmatch(text)
    if match is None:
        return "invalid rate: use a number and a unit, like 10mbit or 1gbit"
    bits = Fraction(match.group(1)) * _RATE_SCALE[match.group(2)]
    bits *= 8 if match.group(3) == "bps" else 1
    if bits <= 0:
        return f"rate must be above 0, found {text} (a zero cap drops every packet: use link_down)"
    if bits < floor_bits:
        return f"rate {text} is below {floor_bits // 1000}kbit, the lowest this testbed shapes"
    if bits > MAX_RATE_BITS:
        return f"rate {text} is beyond what tc should be given (at most 10tbit)"
    return None


VIRTUAL_RATE_FLOOR_BITS = 100_000
"""The lowest cap the virtual testbed's tbf keeps (r2bench.testbeds.virtual.layout.rate_bits refuses less)."""


def _virtual_rate(value: str) -> str:
    problem = rate_problem(value, VIRTUAL_RATE_FLOOR_BITS)
    if problem:
        raise ValueError(problem)
    return value


VirtualRate = Annotated[str, AfterValidator(_virtual_rate)]
"""A virtual testbed's data-NIC cap (`250mbit`): checked when the experiment is loaded, so
`plan` refuses what bringing the testbed up would (never only at sweep time)."""
