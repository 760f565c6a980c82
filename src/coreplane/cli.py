"""coreplane's single entry point: the commands of every area, each imported only when it runs
(so `coreplane run` does not pay for pandas, matplotlib or scipy), and every error as one line."""

import importlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from coreplane.core.errors import CoreplaneError

USAGE_STATUS = 2


@dataclass(frozen=True)
class Entry:
    """Where a command lives (`module:attribute`, a typer function or app) and its one-line help
    (the command's own first line; tests/test_cli_startup.py checks that they agree)."""

    target: str
    help: str
    # The program and its arguments follow `--` and reach the command as ctx.args.
    takes_program: bool = False


COMMANDS = {
    "doctor": Entry("coreplane.doctor.cli:doctor",
                    "What this machine offers coreplane: each line a verdict and its evidence; non-zero exit on blockers."),
    "bench": Entry("coreplane.bench.cli:app", "Native micro-benchmarks (crates/bench)."),
    "run": Entry("coreplane.run.cli:run",
                 "Run PROGRAM with every syscall intercepted: `coreplane run [OPTIONS] -- PROGRAM [ARGS...]`.",
                 takes_program=True),
    "profile": Entry("coreplane.run.cli:profile",
                     "Profile PROGRAM (no delegation by default): a `strace -c`-style table with the system share p.",
                     takes_program=True),
    "project": Entry("coreplane.model.cli:project",
                     "Projects the speedup of delegating a profiled program's syscalls: naive, refined and queueing models."),
    "validate": Entry("coreplane.validate.cli:validate",
                      "Run a suite natively and under `coreplane run` configurations, and compare the models' "
                      "predictions with the measurements (MAPE per model, paper 002 Fig."),
    "study": Entry("coreplane.study.cli:study",
                   "Profile, project and validate the bundled workloads and real Debian programs, and write an HTML "
                   "report: what delegating which calls would cost or gain each program, and how well the models "
                   "predicted it."),
    "cell": Entry("coreplane.cell.cli:app", "Cells: exclusive compute cores, the machine's other work on control cores."),
    "noise": Entry("coreplane.noise.cli:app",
                   "OS noise: measure it (gap detector, FWQ, FTQ, osnoise/timerlat) and inject it."),
    "sweep": Entry("coreplane.dse.cli:sweep",
                   "Run a parameter sweep with repetitions, time-outs and retries into an SQLite store (resumable)."),
    "report": Entry("coreplane.report.cli:report",
                    "Report a sweep: HTML with tables and figures, or the statistics as CSV, Parquet or JSON."),
    "compare": Entry("coreplane.report.cli:compare",
                     "Compare two sweeps (or two configurations of one) point by point: means, ratio B/A, "
                     "Welch's t-test."),
    "graph": Entry("coreplane.graph.cli:app",
                   "NetworkedOS multi-layer graphs: build (layers 0-3) and partition (quality T)."),
    "map": Entry("coreplane.map.cli:map_command",
                 "Thread-to-core mapping: the paper's greedy O(P) mapping or a baseline, with hop-bytes, link load "
                 "under XY routing and the NoC latency/energy model."),
}


def load(name: str) -> click.Command:
    """The click command of `name`, importing its area only now."""
    import typer  # with rich, ≈ 70 ms: only for the command that runs

    entry = COMMANDS[name]
    module, attribute = entry.target.split(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        one = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
        one.command(name=name, context_settings={"allow_extra_args": True} if entry.takes_program else None)(target)
        command = typer.main.get_command(one)
    command.name = name
    return command


class Commands(click.Group):
    """The top-level group: lists commands from COMMANDS, loads only the one invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return load(name) if name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.help) for name, entry in COMMANDS.items()])


def version() -> str:
    """The package version and, in a git checkout, the commit it runs from."""
    from importlib.metadata import version as package_version

    commit = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return f"coreplane {package_version('coreplane')}" + (f" (commit {commit})" if commit else "")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version())
        ctx.exit()


cli = Commands(
    name="coreplane",
    help="Cells, syscall delegation, OS noise and speedup models for parallel programs on stock Linux.",
    no_args_is_help=True,
    params=[click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                         help="Print the version and the commit, then exit.")],
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _kinds(exc: BaseException) -> set[str]:
    """Class names along the exception's hierarchy. The commands are typer's, and typer raises
    the exceptions of its own copy of click (typer._click), which have the shapes and names of
    click's but are other classes: both are recognised by name."""
    return {cls.__name__ for cls in type(exc).__mro__}


def _status(exc: BaseException) -> int | None:
    """Prints the one-line message of a click-shaped exception; its exit status (None: not one)."""
    kinds = _kinds(exc)
    if "Exit" in kinds:  # typer.Exit, click's Exit: a status, no message
        return exc.exit_code
    if "NoArgsIsHelpError" in kinds:  # a group named without a command: its help is shown
        return USAGE_STATUS
    if "UsageError" in kinds:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path.removeprefix("coreplane").strip() if ctx is not None else ""
        prefix = f"{where}: " if where else ""
        print(f"coreplane: error: {prefix}{_one_line(exc.format_message())}", file=sys.stderr)
        return USAGE_STATUS
    if "ClickException" in kinds:
        print(f"coreplane: error: {_one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    if "Abort" in kinds:
        print("coreplane: error: aborted", file=sys.stderr)
        return 1
    return None


def main() -> None:
    """Console-script entry: runs the command; every error is one line on stderr, usage errors
    with status 2, the others with the error's own status."""
    args = sys.argv[1:]
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name="coreplane")))
        sys.exit(USAGE_STATUS)
    try:
        status = cli.main(args=args, prog_name="coreplane", standalone_mode=False)
    except CoreplaneError as exc:
        print(f"coreplane: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:
        status = _status(exc)
        if status is None:
            raise
    sys.exit(status if isinstance(status, int) else 0)
