"""Typed views of the answers an agent acts on. People-facing answers stay plain dicts."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

OBSERVED_KEYS = ("framework", "connector", "model", "version", "tools", "data", "actions",
                 "limits", "grants", "mcp_servers")


def _without_blanks(value: Any) -> Any:
    # The canonical spec fills unset strings with ""; an observed state omits what it lacks.
    if isinstance(value, dict):
        return {k: _without_blanks(v) for k, v in value.items() if v != ""}
    if isinstance(value, list):
        return [_without_blanks(v) for v in value]
    return value


@dataclass(frozen=True)
class DesiredState:
    """The effective desired state of one agent, as served with its ETag."""

    agent: str
    generation: int
    spec: dict[str, Any]
    running: bool
    sha256: str
    etag: str = ""
    # Idempotency keys of corrections the control plane published and has not verified yet:
    # a new one changes sha256, so the sidecar applies the (unchanged) spec again.
    corrections: tuple[str, ...] = ()
    # MCP primitives an open finding holds back ({server, primitive, name, finding, status}):
    # a governed proxy does not serve them even when the server offers the approved version.
    held: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_json(cls, body: dict[str, Any], etag: str = "") -> DesiredState:
        return cls(agent=body["agent"], generation=body["generation"], spec=body["spec"],
                   running=body["running"], sha256=body["sha256"], etag=etag,
                   corrections=tuple(body.get("corrections") or ()),
                   held=tuple(body.get("held") or ()))

    def as_observed(self) -> dict[str, Any]:
        """This state as the observed state of an agent that runs exactly it (the spec minus
        `enforcement`, plus `running`): what to report when applying it fully succeeded."""
        state = {k: copy.deepcopy(self.spec[k]) for k in OBSERVED_KEYS if k in self.spec}
        return {**_without_blanks(state), "running": self.running}


@dataclass(frozen=True)
class Observation:
    """The control plane's receipt for a reported observed state."""

    changed: bool
    sha256: str
    observed_at: str


@dataclass(frozen=True)
class Decision:
    """A runtime decision: `allow`, `deny`, or `pending` while a human has not answered."""

    id: str
    outcome: str
    rule: str | None
    status: str
    expires_at: str | None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Decision:
        return cls(id=str(body["id"]), outcome=body["outcome"], rule=body.get("rule"),
                   status=body.get("status", ""), expires_at=body.get("expires_at"), raw=body)

    @property
    def allowed(self) -> bool:
        """True only for `allow`: pending (no answer in time) is not permission."""
        return self.outcome == "allow"

    @property
    def pending(self) -> bool:
        return self.outcome == "pending"


@dataclass(frozen=True)
class EventsResult:
    """The control plane's answer to one batch of behaviour events."""

    accepted: int
    duplicates: int
    rejected: int
    results: list[dict[str, Any]]

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> EventsResult:
        return cls(accepted=body.get("accepted", 0), duplicates=body.get("duplicates", 0),
                   rejected=body.get("rejected", 0), results=body.get("results", []))
