"""The options several commands share, defined once: the same name, metavar and meaning
everywhere (names from core/vocabulary.py)."""

import click
import typer

from coreplane.core import vocabulary as v

POLICY_HELP = "Delegation policy: none | all | mckernel | mos | NAME,NAME,... | @FILE (names per line)."


def delegate(default: str = "none", help: str = POLICY_HELP):
    """--delegate POLICY: which calls go to the delegates."""
    return typer.Option(default, v.DELEGATE, metavar="POLICY", help=help)


def delegate_threads(help: str = "Delegate threads to start with (the pool grows when all are blocked)."):
    """--delegate-threads N: how many delegate threads serve delegated calls."""
    return typer.Option(1, v.DELEGATE_THREADS, metavar="N", min=1, help=help)


def forward_cost(default: int = 0, help: str = "Delay per direction of a delegated call on the control core, ns "
                 "(round trip: 2x, as 2·f_c in paper 002)."):
    """--forward-cost NS: the forward cost f_c."""
    return typer.Option(default, v.FORWARD_COST, metavar="NS", min=0, help=help)


def compute_cores(default: str | None = None, help: str = "Compute cores, e.g. 1-3."):
    """--compute-cores LIST."""
    return typer.Option(default, v.COMPUTE_CORES, metavar="LIST", help=help)


def control_cores(default: str | None = None, help: str = "Control cores (delegates, the machine's other work), e.g. 0."):
    """--control-cores LIST."""
    return typer.Option(default, v.CONTROL_CORES, metavar="LIST", help=help)


def json_flag(help: str = "Print the result as one JSON document on stdout, nothing else."):
    """--json: one document for scripts."""
    return typer.Option(False, "--json", help=help)


def json_out():
    """--json-out FILE: the JSON document of a command that runs a program, kept apart from its output."""
    return typer.Option(None, "--json-out", metavar="FILE", help="Write the JSON document to FILE "
                        "(apart from the program's stdout and stderr).")


VDSO_CHOICES = ("native", "intercept")


def vdso():
    """--vdso native|intercept: whether the vDSO's calls are seen (profiled, delegable)."""
    return typer.Option("native", "--vdso", metavar="native|intercept",
                        click_type=click.Choice(VDSO_CHOICES),
                        help="vDSO calls (clock_gettime, gettimeofday, time, getcpu, clock_getres): native leaves "
                        "them unseen in the kernel's vDSO; intercept profiles them by syscall name and lets the "
                        "delegation policy delegate them (local ones still go through the vDSO).")
