"""Meeting points keyed by each MCP server's one identity (agentgov.mcp_identity) instead of
its spelling, so an agent approved before the identity existed meets a proposal that spells
its server another way. Only the agents whose points change are rewritten.

The identity is the client package's pure function (a published contract shared with the
proxy), not app code; the rest of what approval records is restated here."""

import hashlib

from django.db import migrations

from agentgov.mcp_identity import server_identity


def _points(name, spec):
    points = {name, *(callee for callee in spec.get("delegates_to") or []
                      if isinstance(callee, str))}
    for server in spec.get("mcp_servers") or []:
        if not isinstance(server, dict):
            continue
        try:
            where = server_identity(server)
        except ValueError:
            where = server.get("url") or server.get("command") or server.get("name")
            where = where.strip() if isinstance(where, str) else ""
        if where:
            points.add("mcp:" + hashlib.sha256(where.encode()).hexdigest())
    return points


def rekey(apps, schema_editor):
    Agent = apps.get_model("registry", "Agent")
    MeetingPoint = apps.get_model("registry", "MeetingPoint")
    rows = Agent.objects.filter(active_version__isnull=False).values_list(
        "pk", "name", "active_version__spec")
    for pk, name, spec in rows.iterator(chunk_size=2000):
        if not isinstance(spec, dict) or not spec.get("mcp_servers"):
            continue  # no server, nothing keyed by one
        wanted = _points(name, spec)
        have = set(MeetingPoint.objects.filter(agent_id=pk).values_list("point", flat=True))
        if wanted != have:
            MeetingPoint.objects.filter(agent_id=pk).delete()
            MeetingPoint.objects.bulk_create([MeetingPoint(agent_id=pk, point=p)
                                              for p in sorted(wanted)])


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0013_meeting_points"),
    ]

    operations = [migrations.RunPython(rekey, migrations.RunPython.noop)]
