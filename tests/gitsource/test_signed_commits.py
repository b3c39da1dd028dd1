"""A source that requires signed commits: a commit signed with a person's registered SSH key
is proposed in that person's name; unsigned or unknown-signer commits are refused."""

import pytest

from audit.models import AuditEntry
from config.errors import DomainError, Invalid
from gitsource import actions as git_actions
from gitsource.jobs import poll_source
from gitsource.models import GitChange
from registry.models import DesiredStateVersion
from tests.gitsource.repos import manifest, signing_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_source(people, repo):
    return git_actions.create_source(actor=people.alice, name="payments",
                                     url=f"file://{repo.bare}", folder="agents",
                                     require_signed=True)


def test_a_commit_signed_with_a_registered_key_is_proposed_in_its_signers_name(
        people, repo, tmp_path, signed_source):
    key, public = signing_key(tmp_path, "alice")
    git_actions.register_signing_key(actor=people.alice, public_key=public)
    repo.author("Alice Owner", "alice@example.com", key=key)
    sha = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    poll_source(signed_source.pk)
    proposal = DesiredStateVersion.objects.get()
    assert proposal.proposed_by == people.alice
    assert f"{sha[:12]} by Alice Owner <alice@example.com>, signed by alice:" in proposal.comment


@pytest.mark.parametrize("signer", ["nobody", "mallory"])
def test_unsigned_and_unknown_signer_commits_are_refused(people, repo, tmp_path, signed_source,
                                                         signer):
    _, public = signing_key(tmp_path, "alice")
    git_actions.register_signing_key(actor=people.alice, public_key=public)
    if signer == "mallory":  # a key nobody registered, with alice's name on the commit
        key, _ = signing_key(tmp_path, "mallory")
        repo.author("Alice Owner", "alice@example.com", key=key)
    sha = repo.commit({"agents/refund.yaml": manifest()}, "Add the refund agent")
    repo.push()
    poll_source(signed_source.pk)
    assert not DesiredStateVersion.objects.exists()
    change = GitChange.objects.get(commit=sha)
    assert change.refused == (f"commit {sha[:12]} is unsigned or signed by a key no person "
                              "registered; this source requires signed commits")
    assert AuditEntry.objects.filter(action="git_commit.refused", agent="refund-agent").exists()


def test_keys_are_checked_and_registered_once(people, tmp_path):
    _, public = signing_key(tmp_path, "bob")
    with pytest.raises(Invalid):
        git_actions.register_signing_key(actor=people.bob, public_key="ssh-ed25519 AAAAnotakey")
    with pytest.raises(Invalid):
        git_actions.register_signing_key(actor=people.bob, public_key="-----BEGIN KEY")
    git_actions.register_signing_key(actor=people.bob, public_key=public)
    with pytest.raises(DomainError, match="already registered"):
        git_actions.register_signing_key(actor=people.carol, public_key=public)
