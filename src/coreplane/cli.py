"""coreplane's single entry point: mounts each area's commands and turns errors into one line."""

import sys

import typer

from coreplane.bench.cli import app as bench_app
from coreplane.cell.cli import app as cell_app
from coreplane.core.errors import CoreplaneError
from coreplane.doctor.cli import doctor
from coreplane.graph.cli import app as graph_app
from coreplane.map.cli import map_command
from coreplane.noise.cli import app as noise_app
from coreplane.dse.cli import sweep
from coreplane.report.cli import compare, report
from coreplane.model.cli import project
from coreplane.run.cli import CONTEXT as RUN_CONTEXT, profile, run
from coreplane.study.cli import study
from coreplane.validate.cli import validate

app = typer.Typer(
    name="coreplane",
    help="Cells, syscall delegation, OS noise and speedup models for parallel programs on stock Linux.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command()(doctor)
app.add_typer(bench_app, name="bench")
app.add_typer(graph_app, name="graph")
app.command(name="map")(map_command)
app.add_typer(cell_app, name="cell")
app.add_typer(noise_app, name="noise")
app.command()(sweep)
app.command()(report)
app.command()(compare)
app.command()(project)
app.command(context_settings=RUN_CONTEXT)(run)
app.command(context_settings=RUN_CONTEXT)(profile)
app.command()(validate)
app.command()(study)


def main() -> None:
    """Console-script entry: one-line errors on stderr with the error's exit status."""
    try:
        app()
    except CoreplaneError as exc:
        print(f"coreplane: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
