"""What the manifest editor opens with: a commented starter for a new agent, or a copy of an
existing agent's approved manifest under a new name, owned by whoever copies it."""

from typing import Any

from registry.manifest import Manifest, manifest_to_yaml

STARTER = """\
# A new agent: fill in what it may do, then Apply. Approvers review it before it is active.
apiVersion: governance/v1
kind: Agent
metadata:
  name: new-agent            # lowercase letters, digits and '-', at most 63 characters
  owner: {owner}
  labels: {{team: my-team, env: dev}}
  description: What this agent does, in one line
spec:
  framework: langgraph       # langgraph, crewai, openai-agents, custom ...
  connector: {{type: push}}    # push | http | sandbox
  model: gpt-4.1
  version: "0.1.0"
  tools: [docs.search]
  data:
    - {{resource: docs, access: read}}   # read | write | admin
  actions: {{}}
  limits:
    - {{resource: docs, max_calls: 100, per: 1h}}
  enforcement:
    default: correct         # correct | block | escalate | log
"""


def starter(owner: str) -> str:
    """The starter manifest, owned by `owner`."""
    return STARTER.format(owner=owner)


def copy_of(agent: Any, owner: str) -> str:
    """`agent`'s approved manifest as a new agent `<name>-copy` owned by `owner`."""
    version = agent.active_version
    meta = version.metadata
    name = f"{agent.name[:58]}-copy"
    return manifest_to_yaml(Manifest(
        name=name, owner=owner, labels=meta.get("labels", {}),
        description=meta.get("description", ""), spec=version.spec,
        spec_sha256=version.spec_sha256))
