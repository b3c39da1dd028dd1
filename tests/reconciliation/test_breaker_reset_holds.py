"""A breaker's reset sticks (issue 29, item 11): compliance resets a tripped breaker and the
next pass over the same wave does not trip it again on findings detected before the reset;
only new findings after the reset that cross the threshold do. Scoped and cluster breakers
alike."""

import pytest

from audit.models import AuditEntry
from reconciliation import actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT
from tests.reconciliation.test_breaker_scopes import cluster as seven_agents
from tests.reconciliation.test_breaker_scopes import drift, scopes

pytestmark = pytest.mark.django_db
cluster = seven_agents  # three of oscar's and four of alice's, team payments


def reset(client, scope: str):
    response = client.post("/api/v1/control/breaker/reset",
                           {"scope": scope, "reason": "wave understood"}, format="json")
    assert response.status_code == 200, response.json()
    return response


def test_a_reset_owner_breaker_is_not_retripped_by_the_wave_it_was_reset_on(
        people, cluster, api_as):
    dana = api_as(people.dana)
    mine = cluster["oscar"]
    drift(mine[0])
    drift(mine[1])
    assert scopes(dana) == (False, ["owner:oscar"])
    # the third agent drifts while the breaker holds: its finding is part of the same wave
    assert drift(mine[2]).changes == []
    reset(dana, "owner:oscar")
    entry = AuditEntry.objects.filter(action="breaker.reset").latest("pk")
    assert entry.after["counts_findings_after"]
    # the next passes correct the waiting agent and re-read the others: nothing re-trips
    assert actions.reconcile_agent(mine[2].pk, trigger="manual").result == "corrected"
    for agent in mine:
        actions.reconcile_agent(agent.pk, trigger="resync")
    assert scopes(dana) == (False, [])
    # a new wave after the reset, crossing the threshold again, does trip it
    drift(mine[0])
    drift(mine[1])
    assert scopes(dana) == (False, ["owner:oscar"])


def test_a_reset_cluster_breaker_holds_until_a_new_wave(people, cluster, api_as):
    dana = api_as(people.dana)
    everyone = cluster["oscar"] + cluster["alice"]
    for agent in everyone[:2] + cluster["alice"][:2]:
        drift(agent)
    tripped, _ = scopes(dana)
    assert tripped
    for scope in ("global", *scopes(dana)[1]):
        reset(dana, scope)
    for agent in everyone:
        actions.reconcile_agent(agent.pk, trigger="resync")
    assert scopes(dana) == (False, [])
    for agent in cluster["alice"][2:] + cluster["oscar"][2:]:
        sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                       reason="second wave")
        actions.reconcile_agent(agent.pk, trigger="observation")
    assert scopes(dana)[0] is False  # 3 new drifts of 7 mixed owners: below the cap


def test_a_reset_of_a_breaker_that_is_not_tripped_changes_nothing(people, api_as):
    dana = api_as(people.dana)
    response = dana.post("/api/v1/control/breaker/reset",
                         {"scope": "owner:nobody", "reason": "x"}, format="json")
    assert response.status_code == 409
    assert not AuditEntry.objects.filter(action="breaker.reset").exists()
    assert api_as(people.alice).post("/api/v1/control/breaker/reset",
                                     {"scope": "global", "reason": "x"},
                                     format="json").status_code == 403
