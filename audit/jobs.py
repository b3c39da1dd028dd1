"""RQ entry points for the audit trail."""

from audit import signer
from audit.actions import checkpoint_head, refuse_signing, sequence_pending
from audit.sequencing import drain
from audit.witnesses import post


def checkpoint() -> int | None:
    """Sign the head of the chain if it moved since the last checkpoint (run by rqcron); a
    head the signer refuses is reported (audit/signer.py), not signed."""
    try:
        made = checkpoint_head()
    except signer.SigningRefused as error:
        refuse_signing(error)
        return None
    return made.seq if made else None


def post_to_witness(url: str, checkpoint: dict) -> None:
    """Deliver one checkpoint to an HTTP witness (retried by RQ when the witness is down)."""
    post(url, checkpoint)


def sequence(linger: float = 0.0) -> int:
    """Place queued audit entries in the log (kicked by writers, lingering for more, and run
    by rqcron without lingering)."""
    return drain(sequence_pending, linger)
