"""Every error the aggregator raises on purpose, in one tree; :mod:`mfumon.api.handlers` turns each into its answer.

MfumonError
├── InputError          422 naming the field: input that passed the schema but cannot be used (also a ValueError)
├── NotFoundError       404: the job, node or baseline asked for does not exist (also a LookupError)
├── ConflictError       409: the request contradicts what is stored
├── ForbiddenError      403: a valid token asked for what its scopes or teams do not allow
├── SamplesBacklogged   503 + Retry-After: node samples are further behind the database than the durability bound
├── BodyTooLarge        413: a chunked body grew past its route's limit (raised and answered inside the middleware)
└── StartupError        the service refuses to start (``mfumon serve`` prints it and exits 2)
    ├── InsecureConfigError   unauthenticated ingest would be open to the network
    ├── TokenConfigError      a token line that cannot be understood (also a ValueError)
    └── BindError             the address cannot be listened on (also an OSError)

Third-party errors (SQLAlchemy's, FastAPI's validation) are translated in :mod:`mfumon.api.handlers` alone.
"""

from __future__ import annotations


class MfumonError(Exception):
    """Base of the aggregator's own errors."""


class InputError(MfumonError, ValueError):
    """A request field that cannot be used as sent; routes answer 422 naming ``field``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(MfumonError, LookupError):
    """What the request names does not exist (404); the message names it."""


class ConflictError(MfumonError):
    """The request contradicts what is stored (a job pinned under a signature it does not run): 409."""


class ForbiddenError(MfumonError):
    """An authenticated token asked for something its scopes or teams do not allow (403)."""


class SamplesBacklogged(MfumonError):
    """The writer is further behind than the durability bound allows: refuse the push (503, retry later)."""

    def __init__(self, lag_seconds: float) -> None:
        super().__init__(f"node samples are {lag_seconds:.1f} s behind the database; retry later")
        self.lag_seconds = lag_seconds


class BodyTooLarge(MfumonError):
    """A streamed body passed its route's limit; the body-size middleware answers 413 and closes."""


class StartupError(MfumonError):
    """The service cannot start as configured; the message says what to change."""


class InsecureConfigError(StartupError):
    """Raised at startup when the service would accept unauthenticated ingest from the network."""


class TokenConfigError(StartupError, ValueError):
    """A token line that cannot be understood; the service refuses to start rather than guess."""


class BindError(StartupError, OSError):
    """The address cannot be listened on (in use, not local, no permission)."""

    def __init__(self, errno: int | None, message: str) -> None:
        OSError.__init__(self, errno, message)
