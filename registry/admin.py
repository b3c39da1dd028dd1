"""The Django admin shows people, roles and authenticators read-only: a role changes only
through `grant_role` / `revoke_role` (audited), an authenticator only through its owner's page or
`reset_two_factor` (audited), never around them."""

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django_otp.plugins.otp_totp.admin import TOTPDeviceAdmin
from django_otp.plugins.otp_totp.models import TOTPDevice


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
admin.site.unregister(TOTPDevice)


@admin.register(User)
class PersonAdmin(ReadOnly, UserAdmin):
    pass


@admin.register(Group)
class RoleAdmin(ReadOnly, GroupAdmin):
    pass


@admin.register(TOTPDevice)
class AuthenticatorAdmin(ReadOnly, TOTPDeviceAdmin):
    pass
