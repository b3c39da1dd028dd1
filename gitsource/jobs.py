"""Thin RQ entry points: poll a Git source (fetch, sync, report statuses), poll them all."""

import base64
import logging

import django_rq
from django.conf import settings

from config import outbound
from config.errors import DomainError
from gitsource import actions, git, status
from gitsource.models import GitChange, GitSource
from registry.connector_secrets import secret_value

log = logging.getLogger(__name__)


def enqueue_poll(source_id: int) -> None:
    """Queue one poll of the source (collapsed with one already queued)."""
    django_rq.get_queue("default", commit_mode="auto").enqueue(
        poll_source, source_id, job_id=f"git-poll-{source_id}")


def poll_sources() -> int:
    """Cron (GIT_POLL_SECONDS): every enabled source, each its own job."""
    ids = list(GitSource.objects.filter(enabled=True).values_list("pk", flat=True))
    for source_id in ids:
        enqueue_poll(source_id)
    return len(ids)


def _credentials(source: GitSource) -> dict[str, str]:
    """HTTP credentials from the source's connector secret (`user:token`), as git config."""
    value = secret_value(source.secret_env) if source.secret_env else None
    if not value:
        return {}
    basic = base64.b64encode(value.encode()).decode()
    return {"http.extraHeader": f"Authorization: Basic {basic}"}


def poll_source(source_id: int) -> dict[str, object]:
    """Fetch the branch; on failure keep every agent as approved and record why; otherwise
    turn the head into proposals and send each commit's status."""
    source = GitSource.objects.filter(pk=source_id, enabled=True).first()
    if source is None:
        return {"polled": False}
    try:
        actions.check_url(source.url)  # the allow-lists may have changed since it was made
        if source.url.startswith(("http://", "https://")):
            # every address the name has now must be allowed (a name moved inside is refused)
            outbound.check(source.url, settings.GIT_SOURCE_ALLOWED_HOSTS)
        head = git.fetch(actions.cache_dir(source), source.url, source.branch,
                         timeout=settings.GIT_FETCH_TIMEOUT_SECONDS,
                         config=_credentials(source))
    except (git.GitError, DomainError, outbound.Refused) as error:
        message = getattr(error, "message", None) or str(error)
        actions.record_fetch_failure(source.pk, message)
        return {"polled": False, "error": message}
    actions.sync_source(source.pk, head)
    return {"polled": True, "head": head, "reported": report_statuses(source.pk)}


def report_statuses(source_id: int) -> int:
    """Send every change's status that differs from the one last sent; a host that cannot be
    reached is tried again on the next poll."""
    source = GitSource.objects.get(pk=source_id)
    provider = status.provider_for(source)
    if provider is None:
        return 0
    sent = 0
    for change in GitChange.objects.filter(source=source).select_related("version"):
        found = status.verdict(change)
        if found is None or found.key == change.reported:
            continue
        try:
            provider.post(change.commit, state=found.state, description=found.description,
                          context=f"agent-governance/{change.agent_name or change.path}",
                          target_url=_target(change))
        except OSError as error:
            log.warning("git source %s: status for %s not sent: %s", source.name,
                        change.commit[:12], error)
            break
        actions.mark_reported(change.pk, found.key)
        sent += 1
    return sent


def _target(change: GitChange) -> str:
    if change.version_id:
        return f"{settings.SITE_URL}/proposals/{change.version_id}/"
    return f"{settings.SITE_URL}/agents/{change.agent_name}/" if change.agent_name else (
        settings.SITE_URL)
