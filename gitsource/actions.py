"""Every state change of the Git sources: creating one, registering signing keys, turning a
fetched branch into proposals (through the registry's own proposal path) and recording what
the poller found. Each writes its audit row in the same transaction."""

import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config import queues
from config.errors import Conflict, DomainError, Invalid, NotAllowed, NotFound
from config.outbound import listed
from gitsource import git
from gitsource.choices import PolicyState, SyncState
from gitsource.models import GitChange, GitSource, ManagedAgent, PolicyChange, SigningKey
from gitsource.policies import REVIEW_INTERVAL, PolicySet, describe, plan, read_policies
from gitsource.policy_tests import MAX_FILES, PolicyError, run_cases
from registry.actions import guardrails, toxic
from registry.actions.proposals import apply_manifests, check_can_propose
from registry.actions.recertification import set_review_interval
from registry.choices import Role, VersionSource, VersionState
from registry.connector_secrets import granted
from registry.intake import read_manifests
from registry.manifest import Manifest
from registry.models import Agent, Guardrail, ToxicCombination
from registry.roles import has_role
from runtime.actions import group_rules
from runtime.models import GroupRule

SYSTEM = "system:git"
KEY = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|"
                 r"sk-ssh-ed25519@openssh\.com) [A-Za-z0-9+/=]+( [^\n]*)?$")


def cache_dir(source: GitSource) -> Path:
    """The bare repository the poller fetches this source into."""
    return Path(settings.GIT_CACHE_DIR) / f"{source.pk}-{source.name}.git"


def check_url(url: str) -> None:
    """A local repository under GIT_SOURCE_LOCAL_ROOTS, or http(s)/ssh to a host
    GIT_SOURCE_ALLOWED_HOSTS names; anything else is refused (422)."""
    parts = urlsplit(url)
    if parts.scheme in ("", "file") and parts.netloc in ("", "localhost"):
        path = Path(parts.path if parts.scheme else url)
        roots = [Path(r).resolve() for r in settings.GIT_SOURCE_LOCAL_ROOTS]
        if path.is_absolute() and any(path.resolve().is_relative_to(r) for r in roots):
            return
        message = "expected a repository under a directory GIT_SOURCE_LOCAL_ROOTS names"
    elif parts.scheme in ("http", "https"):
        if listed(url, settings.GIT_SOURCE_ALLOWED_HOSTS) and not parts.username:
            return
        message = ("expected a host and port GIT_SOURCE_ALLOWED_HOSTS names, with no "
                   "credentials in the URL (name a connector secret instead)")
    elif parts.scheme == "ssh":
        host = f"https://{parts.hostname}" if parts.hostname else ""
        if host and listed(host, settings.GIT_SOURCE_ALLOWED_HOSTS):
            return
        message = "expected an ssh host GIT_SOURCE_ALLOWED_HOSTS names"
    else:
        message = "expected a local path, file://, ssh:// or http(s):// repository"
    raise Invalid(f"{url}: {message}", code="invalid_source",
                  details=[{"pointer": "/url", "message": message}])


def _check_secret(owner: User, field: str, name: str) -> None:
    if name and not granted(owner, name):
        raise Invalid(f"{name}: not a connector secret granted to {owner.username}",
                      code="invalid_source", details=[{"pointer": f"/{field}", "message": (
                          f"expected a connector secret an admin granted to {owner.username}")}])


@transaction.atomic
def create_source(*, actor: Any, name: str, url: str, branch: str = "main", folder: str = "",
                  policy_folder: str = "", owner: User | None = None, team: str = "",
                  require_signed: bool = False,
                  secret_env: str = "", webhook_secret_env: str = "", status_url: str = "",
                  status_secret_env: str = "", commit_url: str = "") -> GitSource:
    """An owner's (or, made by admin, anyone's) Git source; its first poll is queued."""
    owner = owner or actor
    if not has_role(actor, Role.OWNER) and not has_role(actor, Role.ADMIN):
        raise NotAllowed("Only owners and admins add Git sources.")
    if owner != actor and not has_role(actor, Role.ADMIN):
        raise NotAllowed("Owners add sources they own.", details=[
            {"pointer": "/owner", "message": "must be you"}])
    if not has_role(owner, Role.OWNER):
        raise Invalid(f"{owner.username} is not an owner", details=[
            {"pointer": "/owner", "message": "expected the username of an owner"}])
    if GitSource.objects.filter(name=name).exists():
        raise DomainError(f"A Git source named {name} exists.", code="exists")
    check_url(url)
    if status_url:
        if not listed(status_url, settings.GIT_SOURCE_ALLOWED_HOSTS):
            raise Invalid(f"{status_url}: not a host GIT_SOURCE_ALLOWED_HOSTS names",
                          code="invalid_source", details=[{"pointer": "/status_url",
                                                           "message": "expected an allowed host"}])
    if not git.BRANCH.match(branch) or ".." in branch:
        raise Invalid(f"{branch!r} is not a branch name", code="invalid_source",
                      details=[{"pointer": "/branch", "message": "expected a branch name"}])
    for field, value in (("folder", folder), ("policy_folder", policy_folder)):
        if ".." in value.split("/") or value.startswith("/"):
            raise Invalid(f"{value!r} is not a folder in the repository", code="invalid_source",
                          details=[{"pointer": f"/{field}",
                                    "message": "expected a relative folder"}])
    for field, secret in (("secret_env", secret_env), ("webhook_secret_env", webhook_secret_env),
                          ("status_secret_env", status_secret_env)):
        _check_secret(owner, field, secret)
    source = GitSource.objects.create(
        name=name, url=url, branch=branch, folder=folder.strip("/"),
        policy_folder=policy_folder.strip("/"), owner=owner, team=team,
        require_signed=require_signed, secret_env=secret_env,
        webhook_secret_env=webhook_secret_env, status_url=status_url,
        status_secret_env=status_secret_env, commit_url=commit_url)
    audit.record(actor=actor, action=AuditAction.GIT_SOURCE_CREATED,
                 target=f"git_source:{name}", after=source.to_dict())
    transaction.on_commit(lambda: enqueue_poll(source.pk), robust=True)
    return source


def key_fingerprint(public_key: str) -> str:
    """The SHA256 fingerprint `ssh-keygen` reads from an OpenSSH public key (422 otherwise)."""
    public_key = public_key.strip()
    if not KEY.match(public_key):
        raise Invalid("expected one OpenSSH public key (ssh-ed25519, ecdsa or ssh-rsa)",
                      details=[{"pointer": "/public_key", "message": "expected a public key"}])
    done = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", "-"],
                          input=public_key.encode(), capture_output=True, timeout=10,
                          check=False)
    fields = done.stdout.decode().split()
    if done.returncode != 0 or len(fields) < 2 or not fields[1].startswith("SHA256:"):
        raise Invalid("ssh-keygen cannot read this public key",
                      details=[{"pointer": "/public_key", "message": "expected a public key"}])
    return fields[1]


@transaction.atomic
def register_signing_key(*, actor: Any, public_key: str, person: User | None = None) -> SigningKey:
    """A key whose signed commits are `person`'s (yourself; admin registers for others)."""
    person = person or actor
    if person != actor and not has_role(actor, Role.ADMIN):
        raise NotAllowed("People register their own signing keys.")
    fingerprint = key_fingerprint(public_key)
    if SigningKey.objects.filter(fingerprint=fingerprint).exists():
        raise DomainError("This key is already registered.", code="exists")
    key = SigningKey.objects.create(person=person, fingerprint=fingerprint,
                                    public_key=" ".join(public_key.split()[:2]))
    audit.record(actor=actor, action=AuditAction.GIT_SIGNING_KEY_REGISTERED,
                 target=f"user:{person.username}", after={"fingerprint": fingerprint})
    return key


@transaction.atomic
def record_fetch_failure(source_id: int, error: str) -> GitSource:
    """The branch could not be fetched: nothing about any agent changes (the last approved
    state stays enforced), and the source says so; the first failure of a run is audited."""
    source = GitSource.objects.select_for_update(no_key=True).get(pk=source_id)
    first = not source.fetch_failed_at
    source.fetch_error, source.fetch_failed_at = error[:500], source.fetch_failed_at or (
        timezone.now())
    source.save(update_fields=["fetch_error", "fetch_failed_at"])
    if first:
        audit.record(actor=SYSTEM, action=AuditAction.GIT_SOURCE_FETCH_FAILED,
                     target=f"git_source:{source.name}", after={"error": source.fetch_error},
                     reason="the last approved desired state stays enforced")
    return source


def _allowed_signers(source: GitSource) -> Path:
    path = cache_dir(source) / "allowed_signers"
    lines = [f'{k.person.username} namespaces="git" {k.public_key}\n'
             for k in SigningKey.objects.select_related("person").filter(person__is_active=True)
             .order_by("pk")]
    path.write_text("".join(lines))
    return path


def _proposer(source: GitSource, commit: git.Commit, signers: Path | None) -> tuple[Any, str]:
    """Who a commit's proposal is made by: the person whose registered key signed it, or (when
    the source does not require signatures) the source's owner; refusal reason otherwise."""
    if signers is None:
        return source.owner, ""
    principal = git.verify_signature(cache_dir(source), commit.sha, signers)
    if principal is None:
        return None, (f"commit {commit.sha[:12]} is unsigned or signed by a key no person "
                      "registered; this source requires signed commits")
    person = User.objects.filter(username=principal, is_active=True).first()
    if person is None:
        return None, f"commit {commit.sha[:12]} is signed by {principal}, who is not active"
    return person, ""


def _comment(source: GitSource, commit: git.Commit, signer: str) -> str:
    signed = f", signed by {signer}" if signer else ""
    return (f"Git commit {commit.sha[:12]} by {commit.author} <{commit.email}>{signed}: "
            f"{commit.subject} ({source.link(commit.sha)})")


def _propose(source: GitSource, manifest: Manifest, path: str, commit: git.Commit,
             actor: Any, refused: str) -> GitChange:
    """One manifest through the registry's own proposal path (guardrails, four eyes, step-up
    and group rules judge it there); a refusal is recorded, never half-applied."""
    change = GitChange(source=source, commit=commit.sha, path=path, agent_name=manifest.name,
                       author=f"{commit.author} <{commit.email}>"[:300],
                       signer=getattr(actor, "username", "") if source.require_signed else "",
                       subject=commit.subject[:300])
    if not refused:
        managed = ManagedAgent.objects.filter(agent__name=manifest.name).exclude(
            source=source).select_related("source").first()
        if managed is not None:
            refused = f"{manifest.name} is managed by Git source {managed.source.name}"
    if not refused:
        try:
            with transaction.atomic():
                (outcome,) = apply_manifests(
                    [manifest], actor=actor, source=VersionSource.GIT,
                    origin=f"git source {source.name} commit {commit.sha}",
                    comment=_comment(source, commit, change.signer))
                change.version = outcome.version
        except DomainError as error:
            refused = error.message
    change.refused = refused[:500]
    change.save()
    if refused:
        audit.record(actor=SYSTEM, action=AuditAction.GIT_COMMIT_REFUSED,
                     target=f"git_source:{source.name}", agent=manifest.name,
                     after={"commit": commit.sha, "path": path}, reason=refused)
    return change


def _refuse_file(source: GitSource, path: str, commit: git.Commit, message: str) -> None:
    if GitChange.objects.filter(source=source, commit=commit.sha, path=path,
                                agent_name="").exists():
        return
    GitChange.objects.create(source=source, commit=commit.sha, path=path, agent_name="",
                             author=f"{commit.author} <{commit.email}>"[:300],
                             subject=commit.subject[:300], refused=message[:500])
    audit.record(actor=SYSTEM, action=AuditAction.GIT_COMMIT_REFUSED,
                 target=f"git_source:{source.name}", after={"commit": commit.sha, "path": path},
                 reason=message)


@transaction.atomic
def sync_source(source_id: int, head: str) -> GitSource:
    """The fetched branch head becomes desired state the level-triggered way: each manifest
    that differs from what its agent has approved becomes a proposal once (per commit), and
    every managed agent's sync status is worked out again. Nothing is applied here."""
    source = (GitSource.objects.select_for_update(no_key=True, of=("self",)).select_related("owner")
              .get(pk=source_id))
    cache = cache_dir(source)
    signers = _allowed_signers(source) if source.require_signed else None
    seen: dict[str, tuple[str, Manifest]] = {}
    policy_folder = source.policy_folder + "/" if source.policy_folder else None
    for path in git.manifest_paths(cache, head, source.folder):
        if policy_folder and path.startswith(policy_folder):
            continue  # compliance's policies and their examples, not agents
        commit = git.last_commit(cache, head, path)
        try:
            manifests = read_manifests(git.read_file(cache, head, path))
        except (DomainError, git.GitError) as error:
            _refuse_file(source, path, commit, f"{path}: {getattr(error, 'message', error)}")
            continue
        for manifest in manifests:
            seen[manifest.name] = (path, manifest)
            if GitChange.objects.filter(source=source, commit=commit.sha, path=path,
                                        agent_name=manifest.name).exists():
                continue  # this commit's manifest was proposed (or refused) already
            if _approved_as(manifest):
                continue
            actor, refused = _proposer(source, commit, signers)
            _propose(source, manifest, path, commit, actor, refused)
    for name, (path, _) in seen.items():
        agent = Agent.objects.select_related("owner").filter(name=name).first()
        if agent is not None and _may_manage(source, agent):
            ManagedAgent.objects.update_or_create(agent=agent, defaults={
                "source": source, "path": path, "sync": SyncState.AHEAD})
    for managed in (source.agents.select_related("agent__active_version")
                    .select_for_update(no_key=True, of=("self",))):
        path, manifest = seen.get(managed.agent.name, (managed.path, None))
        _settle(source, managed, head, path, manifest)
    if source.policy_folder:
        _sync_policies(source, head, signers)
    was_failing = bool(source.fetch_failed_at)
    source.head, source.fetched_at = head, timezone.now()
    source.fetch_error, source.fetch_failed_at = "", None
    source.save(update_fields=["head", "fetched_at", "fetch_error", "fetch_failed_at"])
    if was_failing:
        audit.record(actor=SYSTEM, action=AuditAction.GIT_SOURCE_FETCH_RECOVERED,
                     target=f"git_source:{source.name}", after={"head": head})
    return source


def _may_manage(source: GitSource, agent: Agent) -> bool:
    """A source takes over an agent only when the registry took a proposal for it from this
    source, or the source's owner may propose for it: naming someone else's agent in a
    folder never locks its owner out."""
    if ManagedAgent.objects.filter(agent=agent).exclude(source=source).exists():
        return False
    if GitChange.objects.filter(source=source, agent_name=agent.name,
                                version__isnull=False).exists():
        return True
    try:
        check_can_propose(agent, source.owner)
    except NotAllowed:
        return False
    return True


def _metadata(manifest: Manifest) -> dict[str, Any]:
    return {"owner": manifest.owner, "labels": manifest.labels,
            "description": manifest.description}


def _approved_as(manifest: Manifest) -> bool:
    """True when the manifest is what its agent has approved: nothing to propose."""
    agent = Agent.objects.select_related("active_version").filter(name=manifest.name).first()
    active = agent.active_version if agent else None
    return bool(active and active.spec_sha256 == manifest.spec_sha256
                and active.metadata == _metadata(manifest))


def _settle(source: GitSource, managed: ManagedAgent, head: str, path: str,
            manifest: Manifest | None) -> None:
    """Work out and store how the agent stands against the branch at `head`."""
    before = managed.sync
    managed.path, managed.branch_commit = path, head
    managed.branch_spec_sha256 = manifest.spec_sha256 if manifest else ""
    managed.branch_metadata = _metadata(manifest) if manifest else {}
    managed.sync, managed.message = sync_state(source, managed, head, manifest)
    managed.save()
    if managed.sync == SyncState.DIVERGED and before != SyncState.DIVERGED:
        audit.record(actor=SYSTEM, action=AuditAction.GIT_AGENT_DIVERGED,
                     target=f"git_source:{source.name}", agent=managed.agent.name,
                     after={"head": head}, reason=managed.message)


def sync_state(source: GitSource, managed: ManagedAgent, head: str,
               manifest: Manifest | None) -> tuple[str, str]:
    """In sync, ahead, diverged or refused, and the sentence that says why."""
    agent = managed.agent
    active = agent.active_version
    approved = (GitChange.objects.filter(source=source, version=active).order_by("-pk").first()
                if active else None)
    enforced = f"generation {agent.generation} stays enforced"
    if manifest is None:
        return SyncState.DIVERGED, (f"{managed.path} is no longer in branch {source.branch} "
                                    f"at {head[:12]}; {enforced}")
    if _approved_as(manifest):
        commit = approved.commit if approved else head
        return SyncState.IN_SYNC, (f"in sync with commit {commit[:12]}, approved as "
                                   f"generation {agent.generation}")
    if approved and not git.is_ancestor(cache_dir(source), approved.commit, head):
        return SyncState.DIVERGED, (
            f"approved commit {approved.commit[:12]} (generation {agent.generation}) is no "
            f"longer in branch {source.branch} at {head[:12]}; {enforced} until a person "
            "approves what the branch holds now")
    latest = (GitChange.objects.filter(source=source, agent_name=agent.name)
              .select_related("version").order_by("-pk").first())
    if latest and latest.refused:
        return SyncState.REFUSED, f"commit {latest.commit[:12]} refused: {latest.refused}"
    if latest and latest.version and latest.version.state == VersionState.REJECTED:
        return SyncState.REFUSED, f"commit {latest.commit[:12]} was rejected; {enforced}"
    waiting = f" (proposal {latest.version.pk})" if latest and latest.version else ""
    commit = latest.commit[:12] if latest else head[:12]
    return SyncState.AHEAD, f"commit {commit} is waiting for approval{waiting}; {enforced}"


def mark_reported(change_id: int, reported: str) -> None:
    """The status last sent to the Git host for this change (so it is sent once)."""
    GitChange.objects.filter(pk=change_id).update(reported=reported[:300])


# --- policy as code ----------------------------------------------------------------------------


class _DryRun(Exception):
    """Rolls back a plan applied only to see whether the actions take it."""


def _policy_files(source: GitSource, head: str) -> dict[str, str]:
    """The policy folder at `head`: path relative to the folder -> text (YAML, JSON)."""
    cache, prefix = cache_dir(source), source.policy_folder + "/"
    paths = git.manifest_paths(cache, head, source.policy_folder)
    if len(paths) > MAX_FILES:
        raise PolicyError(f"{source.policy_folder}: more than {MAX_FILES} files")
    return {path.removeprefix(prefix): git.read_file(cache, head, path) for path in paths}


def managed_rules(source: GitSource) -> dict[str, list[str]]:
    """The rules this source manages: those its last applied policy change stated."""
    last = source.policy_changes.filter(state=PolicyState.APPLIED).order_by("-pk").first()
    return {kind: sorted(names) for kind, names in (last.rules if last else {}).items()}


def _apply_plan(steps: list[dict[str, Any]], actor: Any) -> None:
    """Each step through the rule's own action (its checks, audit row and re-evaluation of
    pending proposals), in this transaction."""
    kinds = {"guardrail": (Guardrail, guardrails.create_guardrail, guardrails.update_guardrail,
                           guardrails.delete_guardrail),
             "group_rule": (GroupRule, group_rules.create_group_rule,
                            group_rules.update_group_rule, group_rules.delete_group_rule),
             "toxic_combination": (ToxicCombination, toxic.create_toxic_combination,
                                   toxic.update_toxic_combination,
                                   toxic.delete_toxic_combination)}
    intervals = [s for s in steps if s["kind"] == REVIEW_INTERVAL]
    # a level's lowest risk may only move where it stays between its neighbours: raise the
    # higher level first, lower the lower level first
    raising = any(s["name"] == "high" and s["after"]["risk_from"] >= (
        s["before"] or {}).get("risk_from", 0) for s in intervals)
    intervals.sort(key=lambda s: (s["name"] != "high") if raising else (s["name"] == "high"))
    for step in [s for s in steps if s["kind"] != REVIEW_INTERVAL] + intervals:
        if step["kind"] == REVIEW_INTERVAL:
            set_review_interval(step["name"], seconds=step["after"]["seconds"],
                                risk_from=step["after"]["risk_from"], actor=actor)
            continue
        model, create, update, delete = kinds[step["kind"]]
        if step["op"] == "create":
            create(actor=actor, name=step["name"], **step["after"])
            continue
        rule = model.objects.filter(name=step["name"]).first()
        if rule is None:
            raise Conflict(f"{describe(step)}: it was deleted meanwhile", code="stale_policy")
        if step["op"] == "update":
            update(rule, actor=actor, **step["after"])
        else:
            delete(rule, actor=actor)


def _dry_run(steps: list[dict[str, Any]], actor: Any) -> None:
    """Apply the plan and roll it back: the rules' own actions judge it (their side effects
    after commit are dropped with the savepoint)."""
    try:
        with transaction.atomic():
            _apply_plan(steps, actor)
            raise _DryRun
    except _DryRun:
        pass


def _refusal(results: list[Any]) -> str:
    failing = [r for r in results if not r.ok]
    if not failing:
        return ""
    named = "; ".join(f"{r.test}: {r.case} (expected {r.expected}, got {r.got})"
                      for r in failing)
    return f"{len(failing)} of {len(results)} policy test case(s) failed: {named}"


def _sync_policies(source: GitSource, head: str, signers: Path | None) -> PolicyChange | None:
    """The policy folder at `head` becomes a policy proposal once per commit (or a refusal
    naming why: who may not, what cannot be read, which test cases fail); nothing applied."""
    cache = cache_dir(source)
    try:
        commit = git.last_commit(cache, head, source.policy_folder)
    except git.GitError:
        return None  # no policy folder in the branch (yet)
    if source.policy_changes.filter(commit=commit.sha).exists():
        return None
    actor, refused = _proposer(source, commit, signers)
    change = PolicyChange(source=source, commit=commit.sha, state=PolicyState.PENDING,
                          author=f"{commit.author} <{commit.email}>"[:300],
                          subject=commit.subject[:300], proposed_by=actor,
                          signer=actor.username if actor and signers else "")
    if not refused and not has_role(actor, Role.COMPLIANCE):
        refused = (f"policies are compliance's: {actor.username}, who proposes commit "
                   f"{commit.sha[:12]}, is not compliance staff")
    if not refused:
        try:
            files = _policy_files(source, head)
            change.rules = read_policies(files).rules
            change.plan = plan(PolicySet(rules=change.rules), managed_rules(source))
            _dry_run(change.plan, actor)  # what the rules' own actions refuse (bad CEL, ...)
            results = run_cases(files, timezone.now())
        except (PolicyError, git.GitError) as error:
            refused = str(error)
        except DomainError as error:
            refused = error.message
        else:
            change.tests = [r.to_dict() for r in results]
            refused = _refusal(results)
    return _record_policy_change(source, change, refused)


def _record_policy_change(source: GitSource, change: PolicyChange,
                          refused: str) -> PolicyChange:
    target = f"git_source:{source.name}"
    if refused:
        change.state, change.refused = PolicyState.REFUSED, refused
        change.save()
        audit.record(actor=SYSTEM, action=AuditAction.GIT_POLICY_REFUSED, target=target,
                     after={"commit": change.commit, "policy_change": change.pk,
                            "failing_cases": change.failing_cases}, reason=refused)
        return change
    if not change.plan:  # the rules in force already are the folder's
        change.state, change.decision_comment = PolicyState.APPLIED, "nothing to change"
        change.decided_at = timezone.now()
        change.save()
        return change
    change.save()
    for older in source.policy_changes.select_for_update(no_key=True).filter(
            state=PolicyState.PENDING).exclude(pk=change.pk):
        older.state, older.decided_at = PolicyState.SUPERSEDED, timezone.now()
        older.save(update_fields=["state", "decided_at"])
        audit.record(actor=SYSTEM, action=AuditAction.GIT_POLICY_SUPERSEDED, target=target,
                     after={"policy_change": older.pk, "commit": older.commit},
                     reason=f"superseded by commit {change.commit[:12]}")
    audit.record(actor=change.proposed_by, action=AuditAction.GIT_POLICY_PROPOSED,
                 target=target, after={"policy_change": change.pk, "commit": change.commit,
                                       "plan": [describe(s) for s in change.plan]},
                 reason=f"Git commit {change.commit[:12]}: {change.subject}")
    return change


def _decidable(change_id: int, actor: Any) -> PolicyChange:
    """The pending change, locked, when `actor` is compliance staff and did not propose it."""
    change = (PolicyChange.objects.select_for_update(no_key=True, of=("self",))
              .select_related("source", "proposed_by").filter(pk=change_id).first())
    if change is None:
        raise NotFound(f"No policy change {change_id}.")
    if not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff decide on policy changes.")
    if getattr(actor, "pk", None) == change.proposed_by_id or (
            change.signer and change.signer == getattr(actor, "username", None)):
        raise NotAllowed("Four eyes: another compliance person decides on a policy change "
                         "you committed.")
    if change.state != PolicyState.PENDING:
        raise Conflict(f"Policy change {change.pk} is {change.state}, not pending.",
                       code="not_pending")
    return change


def _report_on_commit(source_id: int) -> None:
    transaction.on_commit(lambda: enqueue_report(source_id), robust=True)


# The jobs are named by their dotted path: gitsource/jobs.py imports this module.
def enqueue_poll(source_id: int) -> None:
    """Queue one poll of the source (collapsed with one already queued)."""
    queues.queue("default").enqueue(
        "gitsource.jobs.poll_source", source_id, job_id=f"git-poll-{source_id}")


def enqueue_report(source_id: int) -> None:
    """Queue a report of the source's commit statuses (after an approval or rejection, so the
    commit says so before the next poll)."""
    queues.queue("default").enqueue(
        "gitsource.jobs.report_statuses", source_id, job_id=f"git-report-{source_id}")


@transaction.atomic
def approve_policy_change(change_id: int, *, actor: Any, comment: str = "") -> PolicyChange:
    """Compliance's second pair of eyes: the folder's rules are applied through each rule's
    own action (audited each), as the folder states them now against the rules in force now."""
    change = _decidable(change_id, actor)
    steps = plan(PolicySet(rules=change.rules), managed_rules(change.source))
    _apply_plan(steps, actor)
    now = timezone.now()
    change.plan = steps or change.plan
    change.state, change.decided_by, change.decided_at = PolicyState.APPLIED, actor, now
    change.decision_comment = comment
    change.save()
    audit.record(actor=actor, action=AuditAction.GIT_POLICY_APPLIED,
                 target=f"git_source:{change.source.name}", reason=comment,
                 after={"policy_change": change.pk, "commit": change.commit,
                        "proposed_by": change.proposed_by.username if change.proposed_by
                        else None, "applied": [describe(s) for s in steps]})
    _report_on_commit(change.source_id)
    return change


@transaction.atomic
def reject_policy_change(change_id: int, *, actor: Any, comment: str) -> PolicyChange:
    """Compliance says no, with the reason the committer reads in the commit status."""
    change = _decidable(change_id, actor)
    if not comment.strip():
        raise Invalid("A rejection needs a comment.", details=[
            {"pointer": "/comment", "message": "required"}])
    change.state, change.decided_by, change.decided_at = (
        PolicyState.REJECTED, actor, timezone.now())
    change.decision_comment = comment
    change.save()
    audit.record(actor=actor, action=AuditAction.GIT_POLICY_REJECTED,
                 target=f"git_source:{change.source.name}", reason=comment,
                 after={"policy_change": change.pk, "commit": change.commit})
    _report_on_commit(change.source_id)
    return change


def policy_in_force(change: PolicyChange) -> bool:
    """True when the rules in force are what the change's folder states (its deletions
    gone too): the applied change verified."""
    deleted: dict[str, list[str]] = {}
    for step in change.plan:
        if step["op"] == "delete":
            deleted.setdefault(step["kind"], []).append(step["name"])
    return not plan(PolicySet(rules=change.rules), deleted)


def mark_policy_reported(change_id: int, reported: str) -> None:
    """The status last sent to the Git host for this policy change."""
    PolicyChange.objects.filter(pk=change_id).update(reported=reported[:300])
