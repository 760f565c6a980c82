"""The one error type the CLI turns into a one-line message and a non-zero exit."""


class CoreplaneError(Exception):
    """A user-facing failure: the message names the file, line or field at fault."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
