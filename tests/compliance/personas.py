"""Agents for the compliance tests: the refund agent's manifest under other names, owners
and labels."""

from typing import Any

from registry import actions
from registry.choices import VersionSource
from registry.models import Agent
from tests.conftest import People, refund_manifest


def labelled_agent(people: People, name: str, labels: dict[str, str], *, owner: Any = None,
                   **spec_changes: Any) -> Agent:
    """An agent like the refund agent named `name` with these labels, registered by its
    owner (alice unless said) and approved by bob."""
    manifest = refund_manifest(**spec_changes)
    owner = owner or people.alice
    object.__setattr__(manifest, "name", name)
    object.__setattr__(manifest, "labels", labels)
    object.__setattr__(manifest, "owner", owner.username)
    (outcome,) = actions.apply_manifests([manifest], actor=owner, source=VersionSource.YAML)
    actions.approve_proposal(outcome.version.pk, actor=people.bob)
    return Agent.objects.get(name=name)
