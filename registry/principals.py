"""The principal behind an agent-scoped token: acts as its agent only, with no person's roles."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AgentPrincipal:
    """request.user for a request made with an agent's token."""

    agent: Any  # registry.models.Agent
    token: Any  # registry.models.ApiToken

    is_authenticated = True
    is_active = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    @property
    def username(self) -> str:
        return f"agent:{self.agent.name}"

    @property
    def audit_label(self) -> str:
        return f"agent:{self.agent.name}"

    def get_username(self) -> str:
        return self.username

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False

    def has_perms(self, perms: Any, obj: Any = None) -> bool:
        return False

    def has_module_perms(self, app_label: str) -> bool:
        return False


def acting_agent(principal: Any) -> Any:
    """The agent a principal acts as, or None for a person."""
    return principal.agent if isinstance(principal, AgentPrincipal) else None
