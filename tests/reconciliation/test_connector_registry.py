"""Each kind of connector is registered by the app that owns it (push and http by the loop,
sandbox by sandbox); an agent whose spec names a kind nobody registered is refused, its pass
recorded as failed, and nothing on its platform is touched."""

import pytest

from reconciliation import connectors
from reconciliation.choices import Trigger
from reconciliation.connectors import ConnectorError, connector_for
from reconciliation.models import ReconcileRun
from reconciliation.reconciler.passes import reconcile
from sandbox.connector import SandboxConnector


def test_the_sandbox_registers_its_own_connector(refund_agent):
    assert isinstance(connector_for(refund_agent), SandboxConnector)


def test_a_connector_nobody_registered_refuses_to_read_or_change(refund_agent, monkeypatch):
    monkeypatch.setattr(connectors, "_factories",  # a process where sandbox is not installed
                        {k: v for k, v in connectors._factories.items() if k != "sandbox"})
    connector = connector_for(refund_agent)
    with pytest.raises(ConnectorError, match="no connector of type 'sandbox' is installed"):
        connector.observe(refund_agent)
    with pytest.raises(ConnectorError, match="'sandbox'"):
        connector.apply(refund_agent, {"op": "remove_tool", "target": "crm.search"}, "k" * 64)


def test_a_pass_over_an_agent_with_no_connector_is_recorded_as_failed(refund_agent,
                                                                      monkeypatch):
    monkeypatch.setattr(connectors, "_factories", {})
    with pytest.raises(ConnectorError):
        reconcile(refund_agent.pk, trigger=Trigger.MANUAL)
    run = ReconcileRun.objects.filter(agent=refund_agent).latest("pk")
    assert "no connector of type 'sandbox'" in run.error


def test_a_bound_source_nobody_can_reach_fails_the_read_never_reads_as_no_access(
        refund_agent, monkeypatch):
    from config.permission_sources import Source
    from reconciliation.connectors import at_source

    monkeypatch.setattr(at_source, "_actions", {})  # a process where sources is not installed
    with pytest.raises(ConnectorError, match="permission sources"):
        at_source.read_source(Source.__new__(Source), refund_agent)
