"""When a failed model call is retried, and after how long."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from loopstate.engine.errors import ModelError
from loopstate.engine.models.litellm_errors import retry_after
from loopstate.engine.models.retry import RetryPolicy


@pytest.mark.parametrize(
    ("error", "attempt", "delay"),
    [
        (ModelError("x", status=429), 1, 1.0),
        (ModelError("x", status=529), 2, 2.0),
        (ModelError("x", status=500), 3, None),  # attempts used up
        (ModelError("x", status=503), 2, 2.0),
        (ModelError("x", status=408), 1, 1.0),
        (ModelError("x", error_type="connection"), 1, 1.0),
        (ModelError("x", error_type="timeout"), 1, 1.0),
        (ModelError("x", status=400), 1, None),
        (ModelError("x", status=401), 1, None),
        (ModelError("x", error_type="unreadable_reply"), 1, None),
        (ModelError("x", status=429, retry_after=7.0), 1, 7.0),
        (ModelError("x", status=429, retry_after=0.0), 1, 0.0),
        (ModelError("x", status=429, retry_after=90.0), 1, None),  # longer than max_delay_s
    ],
)
def test_only_errors_that_may_pass_are_retried_after_backoff_or_retry_after(
    error: ModelError, attempt: int, delay: float | None
) -> None:
    assert RetryPolicy(attempts=3, backoff_s=1.0, max_delay_s=60).delay(error, attempt) == delay


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=10, backoff_s=1.0, max_delay_s=5.0)
    error = ModelError("x", status=503)
    assert [policy.delay(error, n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "7"}, 1.5),  # the finer one wins
        ({"retry-after-ms": "soon", "retry-after": "7"}, 7.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date passed
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_the_wait_a_provider_asks_for_is_read_from_its_headers(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after(httpx.Headers(headers)) == seconds


def test_a_retry_after_date_is_the_seconds_until_it() -> None:
    asked = datetime.now(UTC)  # made here, not at import: the suite may reach this test later
    in_an_hour = email.utils.format_datetime(asked + timedelta(hours=1), usegmt=True)
    wait = retry_after(httpx.Headers({"retry-after": in_an_hour}))
    waited = (datetime.now(UTC) - asked).total_seconds()
    assert wait is not None
    assert 3599 - waited <= wait <= 3600  # the date has whole seconds
