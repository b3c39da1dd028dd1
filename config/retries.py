"""How the server tries something again, by policy name, so each kind of retry is one thing.

Three kinds, each for its own reason:

- **Within one call** (tenacity): a few quick tries with a short, growing sleep, while the
  caller waits for the answer (a platform's API inside a reconcile pass, a SIEM batch inside a
  delivery run). The last failure is raised as it was, so the caller words the error.
- **RQ retries of a job** (`rq.Retry`): a job that raised is run again by RQ after fixed
  intervals; for thin jobs whose every step is idempotent (ingest jobs, witness posts).
- **Rescheduled with a counted attempt** (not here: `reconciliation/jobs.py backoff_seconds`,
  `siem/delivery.py schedule_retry`): the job re-enqueues itself for later, freeing the worker,
  and carries its attempt number (or the sink its failures and `retry_at` in the database), so
  that after N tries something else happens (an escalation, a failed run, a backoff a person
  can see). tenacity cannot do that: it sleeps inside the worker and forgets on exit.
"""

from collections.abc import Callable
from typing import TypeVar

from rq import Retry
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random_exponential,
)

T = TypeVar("T")

# A platform's API within a pass: three tries, 0.2 s then 0.4 s apart, each plus up to as much
# again of jitter so that many agents' passes do not retry in step.
CONNECTOR_ATTEMPTS = 3
CONNECTOR_FIRST_WAIT = 0.2


def within_call(call: Callable[[], T], *, retry_on: type[BaseException] | tuple[type[
        BaseException], ...], attempts: int, first_wait: float, max_wait: float = 2.0,
                jitter: bool = False) -> T:
    """`call()`, tried up to `attempts` times while it raises `retry_on`, waiting
    `first_wait` doubling up to `max_wait` between tries (plus as much again at random with
    `jitter`); the last error is raised as it was."""
    wait = wait_exponential(multiplier=first_wait, max=max_wait)
    if jitter:
        wait = wait + wait_random_exponential(multiplier=first_wait, max=max_wait)
    retrying = Retrying(retry=retry_if_exception_type(retry_on), stop=stop_after_attempt(
        attempts), wait=wait, reraise=True)
    return retrying(call)


def connector_call(call: Callable[[], T], *, retry_on: type[BaseException]) -> T:
    """A platform API call inside a reconcile pass: what is safe to retry, three times."""
    return within_call(call, retry_on=retry_on, attempts=CONNECTOR_ATTEMPTS,
                       first_wait=CONNECTOR_FIRST_WAIT, jitter=True)


def siem_batch(call: Callable[[], T], *, retry_on: type[BaseException], attempts: int) -> T:
    """One SIEM batch inside a delivery run: SIEM_RETRY_ATTEMPTS tries, 0.2 s doubling to 2 s;
    a batch still refused waits for the sink's own backoff (rescheduled, see above)."""
    return within_call(call, retry_on=retry_on, attempts=attempts, first_wait=0.2)


def ingest_job() -> Retry:
    """RQ's retries of an ingest job (a rule's violations, a group breach or block): quick
    first, then up to a minute apart, since the rule's window is still open."""
    return Retry(max=5, interval=[1, 2, 5, 15, 60])


def witness_post() -> Retry:
    """RQ's retries of a checkpoint posted to a witness: up to ten minutes apart (a witness
    down for longer is reported by verify as missing the checkpoint)."""
    return Retry(max=5, interval=[1, 5, 30, 120, 600])
