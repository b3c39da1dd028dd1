"""API permissions every app's views share (a role's permission is `config.roles.HasRole`)."""

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework.permissions import BasePermission


class IsPerson(BasePermission):
    """A signed-in person: a row of the user model. An agent's token (or any other principal
    an authentication class may return) is not one."""

    message = "This endpoint is for people; agent tokens may not use it."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and isinstance(user, get_user_model()))
