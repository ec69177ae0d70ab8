"""`r2bench plan`: every run of an experiment and the commands it executes, touching nothing.

With no testbed file it plans on the embedded virtual testbed as `r2bench sweep` would bring it
up (described, not brought up). `--script DIR` writes the same lines as one bash script per node
(`plan_script.py`). `--predict FILE` checks a predictions file against the plan (or writes
one to fill in: `plan.predict`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from r2bench.commands.options import EmbeddedTestbedOpt, ExperimentArg
from r2bench.textsafe import printable

# The plan's models and builders are imported where they are used: `r2bench plan --help`
# loads no config model, launcher or virtual testbed.
if TYPE_CHECKING:
    from r2bench.plan.model import Plan


def command(
    experiment: ExperimentArg,
    testbed: EmbeddedTestbedOpt = None,
    commands: Annotated[
        bool, typer.Option("--commands", "-c", help="Show every command of every run.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON for tools.")
    ] = False,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            help="Write one bash script per node (setup, each run's launch and faults, in "
            "order, commented) into this folder.",
            metavar="DIR",
            show_default=False,
        ),
    ] = None,
    predict: Annotated[
        Path | None,
        typer.Option(
            "--predict",
            help="A predictions file (the outcome class expected per cell): checked against "
            "the plan and its SHA-256 shown; written as a template to fill in when it does "
            "not exist. Name it in the experiment's `predictions:` so the sweep records it.",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show every run of an experiment and the commands it executes.

    Pure: it touches nothing on the nodes and brings nothing up. With no --testbed it plans on
    the embedded virtual testbed that `r2bench sweep` would bring up (shaped by the
    experiment's `virtual_testbed` section). `r2bench sweep EXP.yaml --dry-run` prints the
    same plan as `plan EXP.yaml --commands`. Warnings about the experiment's settings (a
    variable its library never reads, a log that breaks result rows) are printed after it,
    with a campaign's drawn schedule, the runs told the failing NIC in advance (pre-told), and
    a predictions file's SHA-256 and coverage (docs/campaigns.md).

    Exit codes: 0 ok, 2 invalid experiment or testbed file (every problem is listed with its
    file, line, column and field), or --script could not be written (the file is named).

    Example: [bold]r2bench plan experiments/quickstart.yaml --commands[/]
    """
    from r2bench.commands.plan_script import write_scripts
    from r2bench.plan.render import plan_json, print_plan

    result = plan_of(experiment, testbed)
    stderr = Console(stderr=True)
    if predict is not None:
        result = _with_predictions(result, predict, stderr)
    if testbed is None and not as_json:
        stderr.print(embedded_note(result), markup=False, highlight=False)
    if script is not None:
        for path in write_scripts(result, script):
            stderr.print(f"wrote {printable(path)}", markup=False, highlight=False)
        return
    if as_json:
        sys.stdout.write(plan_json(result) + "\n")
    else:
        print_plan(result, Console(), commands)


def _with_predictions(plan: Plan, path: Path, stderr: Console) -> Plan:
    """The plan with the notes on a predictions file; a missing file is written as a template
    (and said so) first."""
    from r2bench.errors import WriteFailed
    from r2bench.plan.predict import prediction_notes, template

    if not path.exists():
        try:
            path.write_text(template(plan), encoding="utf-8")
        except OSError as exc:
            raise WriteFailed(
                f"{printable(path)}: cannot write the predictions template: {exc.strerror}"
            ) from None
        stderr.print(
            f"wrote {printable(path)}: a prediction per faulted cell, each expect TODO to fill "
            "in before the sweep",
            markup=False,
            highlight=False,
        )
        return plan
    return plan.model_copy(update={"notes": [*plan.notes, *prediction_notes(plan, path)]})


EMBEDDED_LABEL = (
    "the embedded virtual testbed {name} that `r2bench sweep` brings up ({description})"
)
"""What a plan made with no -t names as its testbed file (the description is not kept)."""


def plan_of(experiment: Path, testbed: Path | None, recipe_dirs: list[Path] | None = None) -> Plan:
    """The plan of an experiment on a testbed file, or with no testbed on the embedded one as
    `sweep` would bring it up (described from the experiment's `virtual_testbed` section;
    nothing is brought up)."""
    from r2bench.plan.build import load_inputs, make_plan, read_experiment
    from r2bench.sweep.embedded import embedded_description

    if testbed is not None:
        return make_plan(load_inputs(experiment, testbed, recipe_dirs))
    loaded = read_experiment(experiment)
    with tempfile.TemporaryDirectory() as tmp:
        description = embedded_description(Path(tmp), loaded.experiment.virtual_testbed)
        inputs = load_inputs(loaded, description, recipe_dirs)
        plan = make_plan(inputs)
    shape = inputs.testbed.description.removeprefix("virtual testbed: ")
    label = EMBEDDED_LABEL.format(name=plan.testbed, description=shape)
    return plan.model_copy(update={"testbed_file": label})


def embedded_note(plan: Plan) -> str:
    """The line that says a plan made with no -t is of the embedded testbed, and its shape."""
    return f"testbed: {plan.testbed_file} (plan brings nothing up; -t TESTBED.yaml plans on yours)"
