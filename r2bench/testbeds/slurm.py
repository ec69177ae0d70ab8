"""A testbed from inside a Slurm allocation (pure: environment in, Testbed out).

Slurm describes the allocation in environment variables: `SLURM_JOB_NODELIST` in its compressed
host list form (`gpu[01-03,07],login-a`), `SLURM_JOB_NUM_NODES`, `SLURM_TASKS_PER_NODE`
(`8(x2),4`), `SLURM_NTASKS_PER_NODE` (only with --ntasks-per-node), `SLURM_GPUS_ON_NODE`,
`SLURM_GPUS_PER_NODE` (`8` or `h100:8`), `SLURM_JOB_GPUS` (`0,1,2,3`). Node names are the
hostnames Slurm knows; `srun --nodelist` takes them as they are. NICs are not in the
environment: `r2bench doctor --discover` adds them from the nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from r2bench.config.errors import field_problems
from r2bench.config.testbed import Launcher, LauncherKind, Node, Testbed
from r2bench.errors import InputError

# ASCII digits only: `\d` (and str.isdigit) take Arabic-Indic, full-width or superscript
# digits too, which would become ASCII host names or fail int(). 20 digits is beyond any
# host number and far below the length int() refuses.
_RANGE = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_COUNT = re.compile(r"[0-9]{1,9}")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_HOSTS = 100_000
"""Most hosts a node list may expand to, all its groups together (counted before any is built)."""
MAX_COUNT = 10**9
"""Largest count a SLURM_* variable may hold (nine digits: more tasks or GPUs than any node)."""


class SlurmError(InputError, ValueError):
    """The environment does not describe a usable allocation; one line for the user."""


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets; SlurmError on unbalanced brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise SlurmError(f"nested '[' at position {i} in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise SlurmError(f"']' without '[' at position {i} in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SlurmError(f"'[' without ']' in {text!r}")
    parts.append(text[start:])
    return parts


Ranges = list[tuple[int, int, int]]
"""(low, high, zero-padded width) of each piece of one bracket group."""


def _ranges(body: str, item: str) -> Ranges:
    """`01-03,7` -> [(1, 3, 2), (7, 7, 0)] (zero padding kept, as Slurm prints it)."""
    out: Ranges = []
    for piece in body.split(","):
        match = _RANGE.fullmatch(piece.strip())
        if not match:
            raise SlurmError(f"bad range {piece!r} in {item!r} (ASCII digits, e.g. 01-08)")
        low_text, high_text = match.group(1), match.group(2)
        low, high = int(low_text), int(high_text or low_text)
        if high < low:
            raise SlurmError(f"range {piece!r} in {item!r} goes down")
        out.append((low, high, len(low_text) if low_text.startswith("0") else 0))
    return out


Groups = list[tuple[str, Ranges]]
"""One host expression: (text before a bracket group, the group's ranges), the last one's
ranges empty when text follows the last group."""


def _groups(item: str) -> Groups:
    """The bracket groups of one host expression (`r[1-2]n[01-02]`), parsed, not expanded."""
    groups: Groups = []
    rest = item
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            groups.append((rest, []))
            break
        close_at = rest.index("]", open_at)
        prefix, body, rest = rest[:open_at], rest[open_at + 1 : close_at], rest[close_at + 1 :]
        groups.append((prefix, _ranges(body, item)))
    return groups


def _count(groups: Groups) -> int:
    """How many hosts `groups` expand to, stopping once past MAX_HOSTS (never a huge product)."""
    total = 1
    for _, ranges in groups:
        if ranges:
            total *= sum(high - low + 1 for low, high, _ in ranges)
        if total > MAX_HOSTS:
            return MAX_HOSTS + 1
    return total


def _expand(groups: Groups) -> list[str]:
    """Every host name of one parsed expression, in order."""
    names = [""]
    for prefix, ranges in groups:
        if not ranges:
            names = [n + prefix for n in names]
            continue
        values = [str(v).zfill(width) for low, high, width in ranges for v in range(low, high + 1)]
        names = [n + prefix + v for n in names for v in values]
    return names


def expand_nodelist(text: str) -> list[str]:
    """Every hostname of a Slurm host list, in order (`scontrol show hostnames` does the same).
    The hosts are counted before any is built: more than MAX_HOSTS, all groups together, is a
    SlurmError."""
    text = text.strip()
    if not text:
        raise SlurmError("the node list is empty")
    parsed: list[Groups] = []
    total = 0
    for item in _split_top(text):
        item = item.strip()
        if not item:
            raise SlurmError(f"empty host name in {text!r}")
        if item.startswith("["):
            raise SlurmError(f"host name starts with '[' in {text!r}")
        parsed.append(groups := _groups(item))
        total += _count(groups)
        if total > MAX_HOSTS:
            shown = item if len(item) <= 60 else item[:57] + "..."
            raise SlurmError(f"the node list has more than {MAX_HOSTS} hosts (at {shown!r})")
    return [host for groups in parsed for host in _expand(groups)]


def expand_tasks_per_node(text: str) -> list[int]:
    """`SLURM_TASKS_PER_NODE` (`8(x2),4`) -> [8, 8, 4]."""
    counts: list[int] = []
    for piece in text.split(","):
        match = re.fullmatch(r"\s*([0-9]{1,9})(?:\(x([0-9]{1,9})\))?\s*", piece)
        if not match:
            shown = piece if len(piece) <= 40 else piece[:37] + "..."
            raise SlurmError(f"bad SLURM_TASKS_PER_NODE entry {shown!r} (ASCII digits, e.g. 8(x2))")
        repeat = int(match.group(2) or 1)
        if len(counts) + repeat > MAX_HOSTS:  # counted before the list is built
            raise SlurmError(f"SLURM_TASKS_PER_NODE covers more than {MAX_HOSTS} nodes")
        counts += [int(match.group(1))] * repeat
    return counts


def _int(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    return _count_value(name, value, value)


def _count_value(name: str, value: str, count: str) -> int:
    """`count` (part of `value`, the variable `name`'s text) as a count: ASCII digits only, at
    most MAX_COUNT; SlurmError naming the variable otherwise."""
    shown = value if len(value) <= 40 else value[:37] + "..."
    if not _COUNT.fullmatch(count):
        many = count.isascii() and count.isdigit()
        why = f"is more than {MAX_COUNT}" if many else "is not a number (ASCII digits)"
        raise SlurmError(f"{name}={shown!r} {why}")
    return int(count)


def gpus_per_node(env: Mapping[str, str]) -> int | None:
    """GPUs Slurm gave each node: SLURM_GPUS_ON_NODE, else SLURM_GPUS_PER_NODE (`h100:8`),
    else the length of SLURM_JOB_GPUS; None when the allocation says nothing about GPUs."""
    on_node = _int(env, "SLURM_GPUS_ON_NODE")
    if on_node is not None:
        return on_node
    per_node = env.get("SLURM_GPUS_PER_NODE", "").strip()
    if per_node:
        count = per_node.rsplit(":", 1)[-1].split("(", 1)[0]
        return _count_value("SLURM_GPUS_PER_NODE", per_node, count)
    job_gpus = env.get("SLURM_JOB_GPUS", "").strip()
    return len(job_gpus.split(",")) if job_gpus else None


@dataclass(frozen=True)
class Allocation:
    """What the environment says about the allocation."""

    job_id: str
    hosts: list[str]
    tasks_per_node: list[int]
    gpus: int | None


def read_allocation(env: Mapping[str, str]) -> Allocation:
    """The allocation in `env`; SlurmError outside one or when the variables disagree."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise SlurmError(
            "SLURM_JOB_NODELIST is not set: run this inside an allocation "
            "(salloc, or a batch script), not on the login node"
        )
    hosts = expand_nodelist(nodelist)
    if len(set(hosts)) != len(hosts):
        raise SlurmError(f"SLURM_JOB_NODELIST lists a host twice: {nodelist!r}")
    count = _int(env, "SLURM_JOB_NUM_NODES") or _int(env, "SLURM_NNODES")
    if count is not None and count != len(hosts):
        raise SlurmError(
            f"SLURM_JOB_NUM_NODES={count} but SLURM_JOB_NODELIST has {len(hosts)} hosts"
        )
    fixed = _int(env, "SLURM_NTASKS_PER_NODE")
    if fixed is not None:
        tasks = [fixed] * len(hosts)
    elif env.get("SLURM_TASKS_PER_NODE"):
        tasks = expand_tasks_per_node(env["SLURM_TASKS_PER_NODE"])
        if len(tasks) != len(hosts):
            raise SlurmError(
                f"SLURM_TASKS_PER_NODE covers {len(tasks)} nodes, the node list {len(hosts)}"
            )
    else:
        tasks = []
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "job"
    return Allocation(job, hosts, tasks, gpus_per_node(env))


def _node_name(host: str) -> str:
    name = _NAME_BAD.sub("-", host)
    return name if name[:1].isalnum() else f"n{name}"


def slurm_testbed(env: Mapping[str, str], name: str | None = None) -> Testbed:
    """A testbed of the allocation's nodes, launched with srun."""
    alloc = read_allocation(env)
    tasks = sorted(set(alloc.tasks_per_node))
    description = f"Slurm job {alloc.job_id}: {len(alloc.hosts)} node(s)"
    if tasks:
        description += f", tasks per node {','.join(map(str, tasks))}"
    description += "; NICs: run `r2bench doctor --discover`"
    try:
        return Testbed(
            name=name or _node_name(f"slurm-{alloc.job_id}"),
            description=description,
            nodes=[Node(name=_node_name(h), address=h, gpus=alloc.gpus or 0) for h in alloc.hosts],
            launcher=Launcher(kind=LauncherKind.SRUN),
        )
    except ValidationError as exc:
        first = field_problems(exc)[0]
        raise SlurmError(f"the allocation gives an invalid testbed: {first.describe()}") from None
