"""coreplane's single entry point: the commands of every area, each imported only when it runs
(so `coreplane run` does not pay for pandas, matplotlib or scipy), and every error as one line."""

import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from click.shell_completion import CompletionItem, get_completion_class

from coreplane.core.errors import CoreplaneError

USAGE_STATUS = 2
COMPLETE_VARIABLE = "_COREPLANE_COMPLETE"


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
                     "Projects the speedup of delegating a profiled program's syscalls by every model; the answer is "
                     "the closed model's."),
    "calibrate": Entry("coreplane.validate.cli:calibrate",
                       "Measure once per machine what the models need: the round trip of a delegated call per "
                       "forward cost, the interposed local call, how long a caller spins, cold calls, start-up; "
                       "`coreplane project` then uses it."),
    "validate": Entry("coreplane.validate.cli:validate",
                      "Run a suite natively and under `coreplane run` configurations, and compare the models' "
                      "predictions with the measurements (MAPE per model; paper 002 Figs 11, 13 and 15 as figures)."),
    "study": Entry("coreplane.study.cli:study",
                   "Profile, project and validate the bundled workloads and real Debian programs, and write an HTML "
                   "report: what delegating which calls would cost or gain each program, and how well the models "
                   "predicted it."),
    "cell": Entry("coreplane.cell.cli:app", "Cells: exclusive compute cores, the machine's other work on control cores."),
    "arbiter": Entry("coreplane.arbiter.cli:app",
                     "The core arbiter of many-core processes: provisions, allocations, loans, warn-then-preempt."),
    "arbsim": Entry("coreplane.arbsim.cli:arbsim",
                    "SIMULATED ROS Tables 1–2 at many compute cores: a SimPy model of the arbiter, from costs "
                    "measured here."),
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
    "fullsys": Entry("coreplane.fullsys.cli:app",
                     "Full-system OS activity (paper 001): Debian images under QEMU/TCG with coreplane's plugins."),
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

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names with their help from the table (completing must not import every area)."""
        return [CompletionItem(name, help=entry.help.split(". ")[0]) for name, entry in COMMANDS.items()
                if name.startswith(incomplete)] + click.Command.shell_complete(self, ctx, incomplete)


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


# Where each shell loads completions from on its own (bash through the bash-completion package).
COMPLETION_FILES = {
    "bash": "{data}/bash-completion/completions/coreplane",
    "zsh": "{data}/zsh/site-functions/_coreplane",
    "fish": "{config}/fish/completions/coreplane.fish",
}


def completion_script(shell: str) -> str:
    """The completion script for `shell` (click's: the shell asks `coreplane` itself)."""
    if shell not in COMPLETION_FILES:
        raise click.BadParameter(f"{shell}: not one of {', '.join(COMPLETION_FILES)}")
    return get_completion_class(shell)(cli, {}, "coreplane", COMPLETE_VARIABLE).source()


def _shell(value: str) -> str:
    return Path(os.environ.get("SHELL", "bash")).name if value == "auto" else value


def _show_completion(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(completion_script(_shell(value)))
        ctx.exit()


def _install_completion(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if not value or ctx.resilient_parsing:
        return
    shell = _shell(value)
    script = completion_script(shell)
    home = Path.home()
    path = Path(COMPLETION_FILES[shell].format(
        data=os.environ.get("XDG_DATA_HOME") or home / ".local" / "share",
        config=os.environ.get("XDG_CONFIG_HOME") or home / ".config"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    hint = {"bash": "loaded by bash-completion in new shells (without it: `source` the file from ~/.bashrc)",
            "zsh": f"add `fpath=({path.parent} $fpath)` before compinit in ~/.zshrc",
            "fish": "loaded by fish in new shells"}[shell]
    click.echo(f"{shell} completion written to {path}: {hint}")
    ctx.exit()


SHELL_HELP = "SHELL: bash, zsh or fish (default: $SHELL)."
cli = Commands(
    name="coreplane",
    help="Cells, syscall delegation, OS noise and speedup models for parallel programs on stock Linux.",
    no_args_is_help=True,
    params=[
        click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                     help="Print the version and the commit, then exit."),
        click.Option(["--install-completion"], metavar="[SHELL]", is_flag=False, flag_value="auto",
                     expose_value=False, is_eager=True, callback=_install_completion,
                     help=f"Install tab completion for your shell, then exit. {SHELL_HELP}"),
        click.Option(["--show-completion"], metavar="[SHELL]", is_flag=False, flag_value="auto",
                     expose_value=False, is_eager=True, callback=_show_completion,
                     help=f"Print the completion script, then exit. {SHELL_HELP}"),
    ],
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _status(exc: Exception) -> int | None:
    """Prints the one-line message of one of click's exceptions; its exit status (None: not one)."""
    if isinstance(exc, click.exceptions.Exit):  # typer.Exit too: a status, no message
        return exc.exit_code
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # a group named without a command: its help
        return USAGE_STATUS
    if isinstance(exc, click.UsageError):
        where = exc.ctx.command_path.removeprefix("coreplane").strip() if exc.ctx is not None else ""
        prefix = f"{where}: " if where else ""
        print(f"coreplane: error: {prefix}{_one_line(exc.format_message())}", file=sys.stderr)
        return USAGE_STATUS
    if isinstance(exc, click.ClickException):
        print(f"coreplane: error: {_one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, click.Abort):
        print("coreplane: error: aborted", file=sys.stderr)
        return 1
    return None


def main(args: list[str]) -> None:
    """Runs `coreplane ARGS...` (coreplane/entry.py calls it); every error is one line on stderr,
    usage errors with status 2, the others with the error's own status."""
    if not args and COMPLETE_VARIABLE not in os.environ:
        click.echo(cli.get_help(click.Context(cli, info_name="coreplane")))
        sys.exit(USAGE_STATUS)
    try:
        status = cli.main(args=args, prog_name="coreplane", complete_var=COMPLETE_VARIABLE, standalone_mode=False)
    except CoreplaneError as exc:
        print(f"coreplane: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A file the commands write (--out, --plot, --capture, ...) that cannot be: a directory
        # where a file goes, a file where a directory goes, no permission. Every command writes
        # its outputs at the end, so this names the file rather than each writer catching it.
        # For a rename (an atomic write) the second name is the user's file, the first a temporary.
        where = exc.filename2 or exc.filename
        print(f"coreplane: error: {where}: {exc.strerror}" if where and exc.strerror
              else f"coreplane: error: {_one_line(str(exc))}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        status = _status(exc)
        if status is None:
            raise
    sys.exit(status if isinstance(status, int) else 0)
