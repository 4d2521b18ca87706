"""User-facing errors: the CLI prints them as one line and exits with status 2."""


class DistillError(Exception):
    """An error caused by the user's input or options, not by a bug."""


class DataError(DistillError):
    """Bad input data; the message names the file and, where known, the line."""

    def __init__(self, path: str, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
