"""Statements a database session prepares once (config/prepared.py: a token's sign-in, a
batch's agents, its store) outlive a migration that changes a column's type under them.
PostgreSQL then refuses to run such a statement again in that session ("cached plan must not
change result type"); outside a transaction nothing dropped it, so every later request on
that session failed until the session ended (a web process's pooled sessions live for
hours)."""

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from django.db import connection

from tests.conftest import database_url, postgresql_only


def send_one(client) -> dict:
    event = {"id": uuid.uuid4().hex, "agent": "refund-agent", "kind": "data_access",
             "ts": datetime.now(UTC).isoformat(), "resource": "orders_db", "record": "order-1"}
    response = client.post("/api/v1/events", [event], format="json")
    assert response.status_code == 200, response.content
    return response.json()


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_migration_changing_a_column_type_under_prepared_statements_breaks_no_request(
        agent_client):
    assert send_one(agent_client)["accepted"] == 1  # the sign-in and the agents' read prepared
    assert send_one(agent_client)["accepted"] == 1
    # Another process (a release's migration) widens a column both statements read.
    with psycopg.connect(database_url(), autocommit=True) as migration:
        migration.execute("ALTER TABLE registry_agent ALTER COLUMN framework TYPE varchar(65)")
        try:
            assert send_one(agent_client)["accepted"] == 1
            assert send_one(agent_client)["accepted"] == 1  # and prepared anew for the next
        finally:
            migration.execute(
                "ALTER TABLE registry_agent ALTER COLUMN framework TYPE varchar(64)")
            with connection.cursor() as cursor:  # later tests start from fresh statements
                cursor.execute("DEALLOCATE ALL")
