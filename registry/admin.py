"""The Django admin shows people and roles read-only: a role changes only through
`grant_role` / `revoke_role` (audited), never around them."""

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User


class ReadOnly:
    """View, never add, change or delete."""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class PersonAdmin(ReadOnly, UserAdmin):
    pass


@admin.register(Group)
class RoleAdmin(ReadOnly, GroupAdmin):
    pass
