"""The review thread's form on a proposal's page: comment or request changes, back to it."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from config.errors import DomainError
from registry import actions


@login_required
@require_POST
def proposal_comment(request: HttpRequest, pk: int) -> HttpResponse:
    """Add the signed-in person's comment (or requested changes) to proposal `pk`'s thread."""
    try:
        actions.comment_on_proposal(pk, actor=request.user,
                                    body=request.POST.get("body", "")[:4000],
                                    verdict=request.POST.get("verdict", "comment"))
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Added to the review thread.")
    return redirect(reverse("registry-proposal", args=[pk]) + "#thread-h")
