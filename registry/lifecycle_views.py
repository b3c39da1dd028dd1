"""The pages' side of an approval's lifecycle: the rollback button of the version history."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from config.errors import DomainError
from registry import actions
from registry.choices import VersionSource
from registry.forms import RollbackForm


@login_required
@require_POST
def agent_rollback(request: HttpRequest, name: str) -> HttpResponse:
    """Propose an earlier approved generation again; the proposal page shows its diff."""
    form = RollbackForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The rollback was not proposed: choose an approved generation.")
        return redirect("registry-agent", name=name)
    try:
        outcome = actions.propose_rollback(
            name, form.cleaned_data["generation"], actor=request.user,
            comment=form.cleaned_data["comment"], source=VersionSource.UI)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("registry-agent", name=name)
    messages.success(request, f"Proposed rolling {name} back to generation "
                              f"{form.cleaned_data['generation']} (proposal "
                              f"#{outcome.version.pk}); it needs approval like any change.")
    return redirect("registry-proposal", pk=outcome.version.pk)
