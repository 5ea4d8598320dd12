"""The one error type users see.

Anything raised as ``KgragError`` is a problem with the user's input or
environment (a bad spec, a missing file, an unknown model, a held lock).
The CLI prints its message without a traceback and exits with code 2;
completed artefacts and cached model calls are never deleted on the way out.
"""


class KgragError(Exception):
    """A user-facing error with a message that says what to fix."""
