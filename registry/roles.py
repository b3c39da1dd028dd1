"""Who sees what of an agent, by role. Roles themselves and `has_role` are config's
(config/roles.py: audit checks them too); kept importable from here for the registry's callers."""

from typing import Any

from config.roles import HasRole as HasRole
from config.roles import Role
from config.roles import has_role as has_role
from config.roles import user_roles as user_roles


def sees_everything(user: Any) -> bool:
    """Approvers, compliance and admins review every agent, so they see all of it."""
    return has_role(user, Role.APPROVER, Role.COMPLIANCE)


def sees_operations(user: Any, agent: Any) -> bool:
    """Whether a person sees what an agent does and what was done to it: observed state,
    findings, corrections, runs, escalations, decisions, events, its audit rows and alerts
    about it. Its owner and the reviewers do; another owner sees only what any person sees
    (metadata, specs, proposals, status), as the README's roles table says."""
    return sees_everything(user) or (has_role(user, Role.OWNER)
                                     and agent.owner_id == getattr(user, "pk", None))
