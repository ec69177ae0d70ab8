"""`r2bench cloudlab testbed`: a testbed file from a CloudLab manifest (`r2bench.testbeds.cloudlab.manifest`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from r2bench.errors import InputError
from r2bench.safeio import MANIFEST_LIMIT, read_bytes_bounded, read_stream_bounded
from r2bench.testbeds.cloudlab.manifest import ManifestError, manifest_testbed
from r2bench.testbeds.yamlio import comment_header, write_testbed
from r2bench.textsafe import printable

command = typer.Typer(
    no_args_is_help=True,
    help="CloudLab experiments: turn a manifest into a testbed file.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


CLOUDLAB_HEADER = """\
Made by `r2bench cloudlab testbed` from {source}.
GPUs, RDMA devices, kernel interface names and link layers are not in a manifest: run
  r2bench doctor --discover -t {out}
to fill them in from the nodes (it shows the diff and writes this file back)."""


def read_manifest(source: str) -> str:
    """The manifest's text from a path, or stdin for `-`: a regular file or stream of at most
    MANIFEST_LIMIT bytes (InputRefused otherwise), UTF-8 (UnicodeDecodeError otherwise)."""
    if source == "-":
        data = read_stream_bounded(sys.stdin.buffer, MANIFEST_LIMIT, "the manifest", "stdin")
    else:
        data = read_bytes_bounded(Path(source), MANIFEST_LIMIT, "the manifest")
    return data.decode("utf-8")


@command.command("testbed")
def testbed_command(
    manifest: Annotated[
        str, typer.Argument(help="Manifest RSpec file, or - for stdin (`geni-get manifest`).")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Testbed YAML to write (default: stdout).")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Testbed name (default: the experiment's).")
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="Login user (default: the first login listed)."),
    ] = None,
) -> None:
    """Write a testbed file from a CloudLab manifest: nodes with their login host, user and
    port, the control network as the management NIC, and one NIC per experiment LAN.

    Exit codes: 0 written, 2 the manifest cannot be read or is not a usable manifest
    (malformed, truncated, a request RSpec, nodes without logins), or -o could not be written.

    Example: [bold]r2bench cloudlab testbed manifest.xml -o testbed.yaml[/] (or pipe `geni-get manifest` into `r2bench cloudlab testbed -`)
    """
    err = Console(stderr=True)
    label = "stdin" if manifest == "-" else manifest
    try:
        text = read_manifest(manifest)  # InputRefused names the file itself
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{label}: cannot read the manifest: {reason}") from exc
    try:
        testbed = manifest_testbed(text, name=name, user=user)
    except ManifestError as exc:
        raise ManifestError(f"{label}: {exc}") from exc
    header = comment_header(CLOUDLAB_HEADER, source=label, out=out or "TESTBED.yaml")
    write_testbed(testbed, out, header)
    if out is not None:
        names = ", ".join(node.name for node in testbed.nodes)
        wrote = printable(f"wrote {out}: {len(testbed.nodes)} node(s) ({names})")
        err.print(wrote, markup=False, highlight=False, soft_wrap=True)
