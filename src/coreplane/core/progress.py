"""Progress of long jobs on stderr: one bar per job with the work done of the work planned,
elapsed and remaining time; drawn only when stderr is a terminal, never with --json."""

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)


def bars(enabled: bool) -> Progress:
    """A rich Progress on stderr (use it as a context manager); a no-op unless `enabled` and
    stderr is a terminal."""
    console = Console(stderr=True)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[note]}"), TimeElapsedColumn(), TextColumn("left"),
                    TimeRemainingColumn(elapsed_when_finished=True), console=console,
                    disable=not (enabled and console.is_terminal))


class Tracker:
    """One job's bar in a Progress. Several steps may feed it (a validation's rounds are
    sweeps of their own), so the remaining time covers the whole job, not the current step."""

    def __init__(self, progress: Progress, description: str, total: int = 0):
        self.progress = progress
        self.task = progress.add_task(description, total=total, note="")

    @property
    def completed(self) -> int:
        return int(self.progress.tasks[self.task].completed)

    def expect(self, pending: int) -> None:
        """`pending` more units are planned now: the total grows if they do not fit in it."""
        total = self.progress.tasks[self.task].total or 0
        self.progress.update(self.task, total=max(total, self.completed + pending))

    def describe(self, description: str) -> None:
        """A new text before the bar (the job's plan changed)."""
        self.progress.update(self.task, description=description)

    def done(self, note: str | None = None) -> None:
        """One unit finished; `note` replaces the text beside the bar (e.g. failures so far)."""
        self.progress.update(self.task, advance=1, **({"note": note} if note is not None else {}))
