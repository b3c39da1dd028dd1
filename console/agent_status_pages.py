"""The agent page's header alone (health, sync, generation, last verified, open findings), for
the page's live refresh when an alert about the agent arrives."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from console.agent_summary import summary_context
from registry.models import Agent
from registry.roles import sees_operations


@login_required
def agent_status_fragment(request: HttpRequest, name: str) -> HttpResponse:
    """The header as an HTML fragment; open findings only for those who see operations."""
    agent = get_object_or_404(Agent, name=name)
    context = summary_context(agent, operations=sees_operations(request.user, agent))
    return render(request, "reconciliation/_agent_summary.html", context)
