"""Thin RQ entry points: poll a Git source (fetch, sync, report statuses), poll them all."""

import base64
import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from config import outbound
from config.errors import DomainError
from gitsource import actions, git, status
from gitsource.models import GitChange, GitSource, PolicyChange
from registry.choices import VersionSource
from registry.connector_secrets import secret_value
from registry.models import DesiredStateVersion

log = logging.getLogger(__name__)


def report_after_decision(sender: type, instance: Any, created: bool = False,
                          update_fields: Any = None, **kwargs: Any) -> None:
    """A proposal made from a commit was approved (by one of its approvers, or enough to
    apply it), rejected or withdrawn: its commit's status goes back once the decision
    commits, not at the next poll (connected in apps.py)."""
    if isinstance(instance, DesiredStateVersion):
        if created or (update_fields is not None and "state" not in update_fields):
            return
        version = instance
    else:  # an Approval
        version = instance.version
    if version.source != VersionSource.GIT:
        return
    for source_id in set(GitChange.objects.filter(version_id=version.pk)
                         .values_list("source_id", flat=True)):
        transaction.on_commit(partial(actions.enqueue_report, source_id), robust=True)


def poll_sources() -> int:
    """Cron (GIT_POLL_SECONDS): every enabled source, each its own job."""
    ids = list(GitSource.objects.filter(enabled=True).values_list("pk", flat=True))
    for source_id in ids:
        actions.enqueue_poll(source_id)
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
    source = GitSource.objects.filter(pk=source_id).first()
    provider = status.provider_for(source) if source is not None else None
    if provider is None:
        return 0
    sent = 0
    for change in GitChange.objects.filter(source=source).select_related("version"):
        found = status.verdict(change)
        if found is None or found.key == change.reported:
            continue
        if not _send(provider, source, change.commit, found, _target(change),
                     f"agent-governance/{change.agent_name or change.path}"):
            return sent
        actions.mark_reported(change.pk, found.key)
        sent += 1
    for policy in PolicyChange.objects.filter(source=source).select_related(
            "proposed_by", "decided_by", "source"):
        found = status.policy_verdict(policy)
        if found.key == policy.reported:
            continue
        target = f"{settings.SITE_URL}/git/policy-changes/{policy.pk}/"
        if not _send(provider, source, policy.commit, found, target, status.POLICY_CONTEXT):
            return sent
        actions.mark_policy_reported(policy.pk, found.key)
        sent += 1
    return sent


def _send(provider: status.CommitStatuses, source: GitSource, sha: str,
          found: status.Verdict, target: str, context: str) -> bool:
    """One status; False (and a warning) when the host cannot take it now."""
    try:
        provider.post(sha, state=found.state, description=found.description, context=context,
                      target_url=target)
    except OSError as error:
        log.warning("git source %s: status for %s not sent: %s", source.name, sha[:12], error)
        return False
    return True


def _target(change: GitChange) -> str:
    if change.version_id:
        return f"{settings.SITE_URL}/proposals/{change.version_id}/"
    return f"{settings.SITE_URL}/agents/{change.agent_name}/" if change.agent_name else (
        settings.SITE_URL)
