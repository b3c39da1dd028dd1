"""Pages of the reconciliation app: the cluster overview (home)."""

import django_rq
import redis
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.models import AuditChainHead, AuditCheckpoint
from config.observability import QUEUE_NAMES


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """The home page: the state of the control plane at a glance."""
    head = AuditChainHead.objects.filter(pk=1).first()
    last_checkpoint = AuditCheckpoint.objects.order_by("-seq").first()
    try:
        queues = {name: django_rq.get_queue(name).count for name in QUEUE_NAMES}
    except redis.RedisError:
        queues = None
    return render(
        request,
        "reconciliation/overview.html",
        {"head": head, "last_checkpoint": last_checkpoint, "queues": queues},
    )
