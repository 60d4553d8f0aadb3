"""Run a service's transaction again when PostgreSQL aborted it to break a deadlock.

A consent change locks the person, then the gate rows of the person's memories
(the triggers of memories 0004); an edit of a memory's people locks the memory's
gate row, then its people. Two such transactions can each hold what the other
waits for, and PostgreSQL then aborts one of them (deadlock detected, SQLSTATE
40P01; a serialization failure, 40001, is the same kind of conflict). Its work
was rolled back whole, so doing it again is safe, and is what the person would
have had to do. tests/faults/test_consent_races.py races them.

Only the outermost transaction can be retried: inside an enclosing atomic block
the conflict is passed up, for whoever opened that block (or, as a last resort,
config/unavailable.py's 503).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import OperationalError, connection

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock detected, serialization failure
ATTEMPTS = 5


def is_conflict(error: BaseException) -> bool:
    return getattr(error.__cause__, "sqlstate", None) in CONFLICT_SQLSTATES


def retry_on_conflict(service: Callable[P, R]) -> Callable[P, R]:
    """Decorate a service above its @transaction.atomic."""

    @functools.wraps(service)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            return service(*args, **kwargs)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return service(*args, **kwargs)
            except OperationalError as error:
                if attempt == ATTEMPTS or not is_conflict(error):
                    raise
                logger.info("%s: %s; attempt %d of %d.", service.__name__, error, attempt + 1, ATTEMPTS)
                # A random pause, growing, so the two do not collide again in step.
                time.sleep(random.uniform(0, 0.05 * 2**attempt))
        raise AssertionError("unreachable")

    return run
