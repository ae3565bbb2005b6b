"""Errors the command line reports without a traceback."""


class UsageError(Exception):
    """Bad input from the user: printed as `sglang-deploy COMMAND: message`, exit code 2."""
