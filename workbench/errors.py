"""The one exception type for errors a user can cause and fix.

Raise `WorkbenchError` with a message that names the thing (file, field, flag, URL) and the fix; the
CLI prints it as one line and exits 2, notebooks show it as is. Anything else is a bug and keeps its
traceback.
"""


class WorkbenchError(Exception):
    """A user-fixable problem: the message names what is wrong and what to do."""
