"""Bounded retries for idempotent operations only.

Callers name the exception types worth retrying (listed as data next to the component they
belong to); anything else propagates at once. Nothing here retries forever.
"""
from __future__ import annotations

import logging
from typing import Callable, TypeVar

import tenacity

from etl.config import RetryConfig

T = TypeVar("T")
log = logging.getLogger(__name__)


def retry_idempotent(policy: RetryConfig, retry_on: tuple[type[BaseException], ...],
                     what: str, fn: Callable[[], T]) -> T:
    """Call fn, retrying on `retry_on` at most policy.attempts times with exponential waits.
    After the last attempt the original exception is raised, not a tenacity wrapper."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=tenacity.wait_exponential(multiplier=policy.initial_wait_seconds, max=policy.max_wait_seconds),
        retry=tenacity.retry_if_exception_type(retry_on),
        before_sleep=lambda state: log.warning("%s failed (attempt %d/%d): %s; retrying", what,
                                               state.attempt_number, policy.attempts,
                                               state.outcome.exception()),
        reraise=True,
    )
    return retrying(fn)
