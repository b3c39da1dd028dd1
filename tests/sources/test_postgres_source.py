"""The PostgreSQL permission source against the real PostgreSQL on this machine: a grant made by
hand at the database (directly, through a role membership, under a hostile name) is found,
revoked and verified; what cannot be corrected safely is escalated; a source that is down keeps
its last known state and corrects nothing."""

import json
import re

import psycopg
import pytest
from django.test import Client
from psycopg import sql

from audit.models import AuditEntry
from config.permission_sources import parse_sources
from reconciliation.actions import reconcile_agent
from reconciliation.actions.observations import record_observation
from reconciliation.connectors import ConnectorError
from reconciliation.models import Correction, Escalation, Finding
from sources import postgres
from sources.models import SourceReading
from tests.conftest import approved_agent
from tests.sources.conftest import (
    AGENT_ROLE,
    DATABASE,
    HOSTILE_COLUMN,
    HOSTILE_GROUP,
    HOSTILE_ROLE,
    HOSTILE_SCHEMA,
    HOSTILE_TABLE,
    WEAK,
    WRITERS,
    server_url,
)

SECRET = "CONN35_CRM_DSN"
CRM_READ = [{"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
            {"resource": "crm", "access": "read"}]


def declare(settings, monkeypatch, dsn: str, agents: dict[str, str]) -> None:
    """The admin declares the CRM database as the source of record for `crm`."""
    monkeypatch.setenv(SECRET, dsn)
    settings.CONNECTOR_SECRETS = [SECRET]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"crm-db": {
        "type": "postgres", "secret": SECRET, "resources": {"crm": {"schema": "crm"}},
        "agents": agents}}), [SECRET])


def reporting_read_only(people, name: str = "refund-agent"):
    """The refund agent on the push connector, approved for crm read, reporting just that."""
    agent = approved_agent(people, name, connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": "correct"})
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor=f"agent:{name}", source="push",
                       trigger_reconcile=False)
    return agent


def test_a_write_grant_made_by_hand_is_found_revoked_and_verified(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"

    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))  # a DBA, by hand
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.pointer, finding.actual) == ("data_widened", "/data/crm",
                                                               "write")
    assert finding.cause["witnesses"] == {
        "agent": "read", "crm-db": "write", "of_record": "crm-db", "agree": False,
        "said": "the agent reported read; crm-db (the source of record) says write"}
    assert run.result == "corrected" and finding.status == "corrected"
    assert not crm_database.can(AGENT_ROLE, "INSERT")
    assert crm_database.can(AGENT_ROLE, "SELECT")  # what was approved stays
    assert Correction.objects.get(finding=finding).result == "verified"
    corrected = AuditEntry.objects.get(action="source.corrected")
    assert corrected.after["statements"] == [
        f'REVOKE INSERT ON TABLE "crm"."customers" FROM "{AGENT_ROLE}"']
    assert (corrected.after["before"], corrected.after["after"]) == ("write", "read")
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}
    client = Client()
    client.force_login(people.bob)  # an approver reviewing drift
    listed = " ".join(re.sub(r"<[^>]+>", " ", client.get("/findings/").content.decode()).split())
    assert "the agent reported read; crm-db (the source of record) says write" in listed


def test_a_grant_through_a_role_membership_is_revoked_by_ending_the_membership(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT {} TO {}").format(sql.Identifier(WRITERS),
                                                      sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    opened = AuditEntry.objects.filter(action="source.known").order_by("seq").first()
    assert {g["via"] for g in opened.after["grants"] if g["level"] == "write"} == {
        f"member of {WRITERS}"}
    assert Finding.objects.get(agent=agent).status == "corrected"
    assert not crm_database.can(AGENT_ROLE, "UPDATE")
    assert crm_database.can(WRITERS, "UPDATE")  # the group keeps its grants for its members
    assert crm_database.run("SELECT count(*) FROM pg_auth_members WHERE member = "
                            "(SELECT oid FROM pg_roles WHERE rolname = %s)", AGENT_ROLE) == [(0,)]


def test_a_role_shared_with_another_agent_is_not_revoked_from_but_escalated(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn,
            {"refund-agent": AGENT_ROLE, "billing-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT DELETE ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.can(AGENT_ROLE, "DELETE")  # nothing changed for the other agent
    finding = Finding.objects.get(agent=agent)
    assert finding.status == "escalated"
    escalation = Escalation.objects.get(finding=finding)
    assert "shared by agents billing-agent, refund-agent" in escalation.reason
    assert AuditEntry.objects.filter(action="source.correction_refused").exists()
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_a_shared_role_keeps_a_membership_too_and_is_escalated(
        people, crm_database, settings, monkeypatch):
    """Ending the shared role's membership would take the group's grants from every agent
    bound to it, just as a REVOKE would."""
    declare(settings, monkeypatch, crm_database.dsn,
            {"refund-agent": AGENT_ROLE, "billing-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT {} TO {}").format(sql.Identifier(WRITERS),
                                                      sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.run("SELECT pg_has_role(%s, %s, 'MEMBER')", AGENT_ROLE,
                            WRITERS) == [(True,)]
    finding = Finding.objects.get(agent=agent)
    assert finding.status == "escalated"
    assert Escalation.objects.get(finding=finding).reason == (
        f"correction refused: role {AGENT_ROLE} is shared by agents billing-agent, "
        f"refund-agent: revoking from it would change them all")
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_a_grant_to_public_is_escalated_not_revoked_from_everyone(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run("GRANT TRUNCATE ON crm.customers TO PUBLIC")
    reconcile_agent(agent.pk, trigger="manual")
    assert crm_database.can(AGENT_ROLE, "TRUNCATE")
    assert "granted to PUBLIC" in Escalation.objects.get(agent=agent).reason


def test_a_source_that_is_down_keeps_its_last_known_state_and_corrects_nothing(
        people, crm_database, settings, monkeypatch, api_as):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    monkeypatch.setenv(SECRET, f"postgresql://postgres@127.0.0.1:1/{DATABASE}")  # nothing there
    with pytest.raises(ConnectorError, match="permission source crm-db unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    reading = SourceReading.objects.get(agent=agent)
    assert (reading.status, reading.read_at) == ("unknown", None)
    assert not Correction.objects.exists() and not Finding.objects.exists()
    assert crm_database.can(AGENT_ROLE, "INSERT")  # nothing corrected blindly

    monkeypatch.setenv(SECRET, crm_database.dsn)  # back: found and corrected
    reconcile_agent(agent.pk, trigger="manual")
    assert not crm_database.can(AGENT_ROLE, "INSERT")
    monkeypatch.setenv(SECRET, f"postgresql://postgres@127.0.0.1:1/{DATABASE}")
    with pytest.raises(ConnectorError):
        reconcile_agent(agent.pk, trigger="manual")
    reading.refresh_from_db()
    assert (reading.status, reading.access) == ("unknown", {"crm": "read"})  # last known
    assert reading.read_at is not None
    assert AuditEntry.objects.filter(action="source.unknown").count() == 2
    shown = api_as(people.alice).get("/api/v1/agents/refund-agent/permission-sources").json()
    (crm_db,) = shown["sources"]
    assert (crm_db["source"], crm_db["type"], crm_db["status"], crm_db["access"]) == (
        "crm-db", "postgres", "unknown", {"crm": "read"})
    assert crm_db["error"] == "permission source crm-db unreachable"  # not the network detail
    assert Finding.objects.get().status == "corrected"  # not resolved on a guess
    client = Client()
    client.force_login(people.alice)
    page = " ".join(re.sub(r"<[^>]+>", " ", client.get("/agents/refund-agent/")
                           .content.decode()).split())
    assert f"crm-db (postgres, role {AGENT_ROLE} ): ⚠ unknown now" in page
    assert "permission source crm-db unreachable" in page and "last known state" in page
    assert "crm read" in page


def test_credentials_without_the_privilege_to_revoke_are_a_clear_escalation(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, server_url(DATABASE, WEAK),
            {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")
    assert crm_database.can(AGENT_ROLE, "INSERT")
    assert Escalation.objects.get(agent=agent).reason == (
        f"correction refused: the credentials of crm-db may not change role {AGENT_ROLE}: "
        f"permission denied for schema crm")


@pytest.mark.parametrize(("refusal", "said"), [
    ("ALTER ROLE {weak} NOLOGIN", 'role "{weak}" is not permitted to log in'),
    ("REVOKE CONNECT ON DATABASE {database} FROM PUBLIC",
     'permission denied for database "{database}"'),
    ("REVOKE SELECT ON pg_catalog.pg_default_acl FROM PUBLIC",  # a hardened catalog
     "permission denied for table pg_default_acl"),
], ids=["no-login", "no-connect", "catalog-closed"])
def test_credentials_that_may_not_read_the_role_are_a_clear_escalation(
        people, crm_database, settings, monkeypatch, api_as, refusal, said):
    """Not "nothing found", not an error page: the reading is unknown, nothing is corrected,
    and an approver is asked once to fix the connector's credentials, in PostgreSQL's words."""
    names = {"weak": WEAK, "database": DATABASE}
    crm_database.run(refusal.format(**{k: sql.Identifier(v).as_string(None)
                                        for k, v in names.items()}))
    declare(settings, monkeypatch, server_url(DATABASE, WEAK), {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    refused = (f"permission source crm-db refused the control plane's credentials: "
               f"{said.format(**names)}")
    for _ in range(2):
        with pytest.raises(ConnectorError) as raised:
            reconcile_agent(agent.pk, trigger="manual")
        assert str(raised.value) == refused

    (escalation,) = Escalation.objects.filter(agent=agent)
    assert (escalation.finding, escalation.status) == (None, "open")
    assert escalation.reason == (
        f"{refused}: an admin gives the connector credentials that may read it")
    assert not Finding.objects.exists() and not Correction.objects.exists()
    assert crm_database.can(AGENT_ROLE, "INSERT")  # nothing done on a guess
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert (shown["status"], shown["error"], shown["read_at"]) == ("unknown", refused, None)


def test_a_role_the_database_does_not_have_is_escalated_not_read_as_no_access(
        people, crm_database, settings, monkeypatch):
    """A binding to a misspelt role would otherwise read "no access" while the real role
    holds write."""
    typo = f"{AGENT_ROLE}_typo"
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": typo})
    agent = reporting_read_only(people)
    with pytest.raises(ConnectorError, match=f"permission source crm-db has no role {typo}"):
        reconcile_agent(agent.pk, trigger="manual")
    (escalation,) = Escalation.objects.filter(agent=agent)
    assert escalation.reason == (f"permission source crm-db has no role {typo}: an admin binds "
                                 f"the agent to the role its grants are made to")
    assert SourceReading.objects.get(agent=agent).status == "unknown"
    assert not Finding.objects.exists()


def test_a_revoke_postgresql_only_warns_about_is_rolled_back_and_escalated(
        people, crm_database, settings, monkeypatch):
    """A role that may see the table but did not grant the privilege: PostgreSQL's REVOKE
    succeeds with a warning and changes nothing; the re-read inside the transaction sees it."""
    declare(settings, monkeypatch, server_url(DATABASE, WEAK),
            {"refund-agent": AGENT_ROLE})
    crm_database.run(sql.SQL("GRANT USAGE ON SCHEMA crm TO {0}; GRANT SELECT ON crm.customers "
                             "TO {0}").format(sql.Identifier(WEAK)))
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")
    assert crm_database.can(AGENT_ROLE, "INSERT")
    reason = Escalation.objects.get(agent=agent).reason
    assert "the credentials of crm-db could not bring role" in reason
    assert "WITH GRANT OPTION" in reason


def test_hostile_names_in_grants_are_quoted(people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": HOSTILE_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT INSERT ON {} TO {}").format(
        sql.Identifier("crm", HOSTILE_TABLE), sql.Identifier(HOSTILE_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")
    assert Finding.objects.get(agent=agent).status == "corrected"
    quoted = '"' + HOSTILE_TABLE.replace('"', '""') + '"'
    assert not crm_database.can(HOSTILE_ROLE, "INSERT", f"crm.{quoted}")
    assert crm_database.run("SELECT count(*) FROM crm.customers") == [(0,)]  # still there


def test_hostile_schema_table_column_and_role_names_are_found_and_revoked_exactly(
        people, crm_database, settings, monkeypatch):
    """Every name the statements compose holds quotes, semicolons, SQL and unicode: each way
    the role was given more (a column, CREATE on the schema, default privileges, a nested
    membership) is revoked by its exact name, and nothing else is touched."""
    monkeypatch.setenv(SECRET, crm_database.dsn)
    settings.CONNECTOR_SECRETS = [SECRET]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"crm-db": {
        "type": "postgres", "secret": SECRET, "resources": {"crm": {"schema": HOSTILE_SCHEMA}},
        "agents": {"refund-agent": HOSTILE_ROLE}}}), [SECRET])
    schema, table = sql.Identifier(HOSTILE_SCHEMA), sql.Identifier(HOSTILE_SCHEMA, HOSTILE_TABLE)
    role, group = sql.Identifier(HOSTILE_ROLE), sql.Identifier(HOSTILE_GROUP)
    run = crm_database.run
    run(sql.SQL("CREATE SCHEMA {}").format(schema))
    run(sql.SQL("CREATE TABLE {} (id int, {} text)").format(table,
                                                            sql.Identifier(HOSTILE_COLUMN)))
    run(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
    run(sql.SQL("GRANT SELECT ON {} TO {}").format(table, role))  # approved: read
    agent = reporting_read_only(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"

    run(sql.SQL("GRANT UPDATE ({}) ON {} TO {}").format(sql.Identifier(HOSTILE_COLUMN), table,
                                                        role))
    run(sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(schema, role))
    run(sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT INSERT ON TABLES TO {}")
        .format(schema, role))
    run(sql.SQL("GRANT {} TO {}").format(sql.Identifier(WRITERS), group))
    run(sql.SQL("GRANT {} TO {}").format(group, role))  # through a group, through a group
    run(sql.SQL("GRANT DELETE ON {} TO {}").format(table, sql.Identifier(WRITERS)))
    assert reconcile_agent(agent.pk, trigger="manual").result == "corrected"

    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    assert sorted(corrected_statements()) == sorted([
        f"ALTER DEFAULT PRIVILEGES FOR ROLE \"postgres\" IN SCHEMA {quoted(HOSTILE_SCHEMA)} "
        f"REVOKE INSERT ON TABLES FROM {quoted(HOSTILE_ROLE)}",
        f"REVOKE {quoted(HOSTILE_GROUP)} FROM {quoted(HOSTILE_ROLE)}",
        f"REVOKE CREATE ON SCHEMA {quoted(HOSTILE_SCHEMA)} FROM {quoted(HOSTILE_ROLE)}",
        f"REVOKE UPDATE ({quoted(HOSTILE_COLUMN)}) ON TABLE {quoted(HOSTILE_SCHEMA)}."
        f"{quoted(HOSTILE_TABLE)} FROM {quoted(HOSTILE_ROLE)}"])
    target = f"{quoted(HOSTILE_SCHEMA)}.{quoted(HOSTILE_TABLE)}"
    assert run("SELECT has_column_privilege(%s, %s, %s, 'UPDATE'), "
               "has_schema_privilege(%s, %s, 'CREATE'), pg_has_role(%s, %s, 'MEMBER'), "
               "has_table_privilege(%s, %s, 'DELETE'), has_table_privilege(%s, %s, 'SELECT')",
               HOSTILE_ROLE, target, HOSTILE_COLUMN, HOSTILE_ROLE, HOSTILE_SCHEMA,
               HOSTILE_ROLE, WRITERS, HOSTILE_ROLE, target, HOSTILE_ROLE, target) == [
        (False, False, False, False, True)]
    assert run("SELECT count(*) FROM pg_default_acl d, aclexplode(d.defaclacl) a "
               "WHERE a.grantee = %s::regrole", quoted(HOSTILE_ROLE)) == [(0,)]
    assert run(sql.SQL("SELECT pg_has_role({}, {}, 'MEMBER')").format(
        sql.Literal(HOSTILE_GROUP), sql.Literal(WRITERS))) == [(True,)]  # the groups stay
    assert run("SELECT count(*) FROM crm.customers") == [(0,)]  # no injected DROP ran
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}
    assert Finding.objects.get(agent=agent).status == "corrected"


def test_a_table_the_role_owns_is_read_as_admin_and_escalated(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("ALTER TABLE crm.customers OWNER TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    known = AuditEntry.objects.filter(action="source.known").order_by("seq").first()
    assert ("admin", "owns crm.customers", "direct") in {
        (g["level"], g["what"], g["via"]) for g in known.after["grants"]}
    finding = Finding.objects.get(agent=agent)
    assert (finding.actual, finding.status) == ("admin", "escalated")
    assert Escalation.objects.get(finding=finding).reason == (
        f"correction refused: role {AGENT_ROLE} holds owns crm.customers (direct): a person "
        f"changes ownership and superuser")
    assert crm_database.run("SELECT tableowner FROM pg_tables WHERE schemaname = 'crm' AND "
                            "tablename = 'customers'") == [(AGENT_ROLE,)]


@pytest.mark.parametrize(("mode", "status"), [("escalate", "escalated"), ("log", "logged")])
def test_a_grant_is_revoked_only_where_enforcement_says_correct(
        people, crm_database, settings, monkeypatch, mode, status):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": mode})
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor="agent:refund-agent",
                       source="push", trigger_reconcile=False)
    crm_database.run(sql.SQL("GRANT INSERT ON crm.customers TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.can(AGENT_ROLE, "INSERT")  # left at the database
    finding = Finding.objects.get(agent=agent)
    assert (finding.status, finding.actual) == (status, "write")
    assert finding.cause["witnesses"]["said"] == (
        "the agent reported read; crm-db (the source of record) says write")
    assert not AuditEntry.objects.filter(action__startswith="source.correct").exists()


def test_less_than_approved_is_granted_at_the_database(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting(people, [*CRM_READ[:2], {"resource": "crm", "access": "write"}])
    run = reconcile_agent(agent.pk, trigger="manual")  # the role holds read only

    assert run.result == "corrected"
    assert Finding.objects.get(agent=agent).status == "corrected"
    assert corrected_statements() == [
        f'GRANT USAGE ON SCHEMA "crm" TO "{AGENT_ROLE}"',
        f'GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "crm" TO '
        f'"{AGENT_ROLE}"']
    assert crm_database.can(AGENT_ROLE, "INSERT")
    assert SourceReading.objects.get(agent=agent).access == {"crm": "write"}


def test_every_way_a_role_holds_access_is_read(crm_database):
    source = parse_sources(json.dumps({"crm-db": {
        "type": "postgres", "secret": SECRET, "resources": {"crm": {"schema": "crm"}},
        "agents": {"refund-agent": AGENT_ROLE}}}), [SECRET])["crm-db"]
    run = crm_database.run
    role = sql.Identifier(AGENT_ROLE)
    run(sql.SQL("GRANT UPDATE (notes) ON crm.customers TO {}").format(role))
    run(sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA crm GRANT DELETE ON TABLES TO {}")
        .format(role))
    run(sql.SQL("GRANT CREATE ON SCHEMA crm TO {}").format(role))
    run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(role))
    with psycopg.connect(crm_database.dsn, autocommit=True) as conn:
        reading = postgres.read(conn, source, AGENT_ROLE)
    assert reading.access == {"crm": "admin"}
    held = {(g["what"], g["via"]) for g in reading.grants}
    assert {("UPDATE on crm.customers (notes)", "direct"),
            ("DELETE on tables postgres creates in schema crm (default privileges)", "direct"),
            ("CREATE on schema crm", "direct"),
            ("BYPASSRLS (row-level security ignored)", "direct"),
            ("SELECT on crm.customers", "direct")} <= held


def corrected_statements() -> list[str]:
    """The statements the one `source.corrected` audit entry says were run."""
    return AuditEntry.objects.get(action="source.corrected").after["statements"]


def as_agent_role(crm_database, statement: str) -> None:
    """Run `statement` as the agent's role would (SET ROLE from the DBA's connection)."""
    with psycopg.connect(crm_database.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(AGENT_ROLE)))
        conn.execute(statement)


def rows_seen_by_agent_role(crm_database) -> int:
    with psycopg.connect(crm_database.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(AGENT_ROLE)))
        return conn.execute("SELECT count(*) FROM crm.customers").fetchone()[0]


def test_a_column_grant_made_by_hand_is_found_revoked_and_verified(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run("INSERT INTO crm.customers VALUES (1, 'a@example.com', '')")
    crm_database.run(sql.SQL("GRANT UPDATE (email), INSERT (email) ON crm.customers TO {}")
                     .format(sql.Identifier(AGENT_ROLE)))  # a DBA, by hand, on one column
    as_agent_role(crm_database, "UPDATE crm.customers SET email = 'b@example.com'")  # it can
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("data_widened", "write",
                                                              "corrected")
    assert run.result == "corrected"
    assert Correction.objects.get(finding=finding).result == "verified"
    assert corrected_statements() == [
        f'REVOKE INSERT ("email") ON TABLE "crm"."customers" FROM "{AGENT_ROLE}"',
        f'REVOKE UPDATE ("email") ON TABLE "crm"."customers" FROM "{AGENT_ROLE}"']
    assert {g["what"] for g in AuditEntry.objects.get(action="source.corrected")
            .after["revoked"]} == {"INSERT on crm.customers (email)",
                                   "UPDATE on crm.customers (email)"}
    for privilege in ("UPDATE", "INSERT"):
        assert crm_database.run("SELECT has_column_privilege(%s, 'crm.customers', 'email', %s)",
                                AGENT_ROLE, privilege) == [(False,)]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_agent_role(crm_database, "UPDATE crm.customers SET email = 'c@example.com'")
    assert crm_database.run("SELECT email FROM crm.customers") == [("b@example.com",)]
    assert crm_database.can(AGENT_ROLE, "SELECT")  # what was approved stays
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}


def test_bypassrls_set_by_hand_is_found_and_turned_off(
        people, crm_database, settings, monkeypatch):
    """BYPASSRLS lets the role read every row whatever the row-level policies say: admin."""
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run("INSERT INTO crm.customers VALUES (1, 'a@example.com', 'private')")
    crm_database.run("ALTER TABLE crm.customers ENABLE ROW LEVEL SECURITY")  # no policy: no row
    crm_database.run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(sql.Identifier(AGENT_ROLE)))
    assert rows_seen_by_agent_role(crm_database) == 1  # the policy is ignored
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("data_widened", "admin",
                                                              "corrected")
    assert run.result == "corrected"
    assert Correction.objects.get(finding=finding).result == "verified"
    assert corrected_statements() == [f'ALTER ROLE "{AGENT_ROLE}" NOBYPASSRLS']
    assert crm_database.run("SELECT rolbypassrls FROM pg_roles WHERE rolname = %s",
                            AGENT_ROLE) == [(False,)]
    assert rows_seen_by_agent_role(crm_database) == 0  # row-level security applies again
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}


def test_create_on_the_schema_granted_by_hand_is_found_and_revoked(
        people, crm_database, settings, monkeypatch):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("GRANT CREATE ON SCHEMA crm TO {}").format(
        sql.Identifier(AGENT_ROLE)))
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("data_widened", "admin",
                                                              "corrected")
    assert run.result == "corrected"
    assert corrected_statements() == [f'REVOKE CREATE ON SCHEMA "crm" FROM "{AGENT_ROLE}"']
    assert crm_database.run("SELECT has_schema_privilege(%s, 'crm', 'CREATE')",
                            AGENT_ROLE) == [(False,)]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_agent_role(crm_database, "CREATE TABLE crm.its_own (id int)")
    assert crm_database.run("SELECT has_schema_privilege(%s, 'crm', 'USAGE')",
                            AGENT_ROLE) == [(True,)]  # it may still read there
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}


@pytest.mark.parametrize("scope", ["IN SCHEMA crm ", ""], ids=["in-schema", "everywhere"])
def test_default_privileges_set_by_hand_are_found_and_revoked_for_tables_made_later(
        people, crm_database, settings, monkeypatch, scope):
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL(f"ALTER DEFAULT PRIVILEGES {scope}GRANT INSERT ON TABLES TO {{}}")
                     .format(sql.Identifier(AGENT_ROLE)))
    assert not crm_database.can(AGENT_ROLE, "INSERT")  # no table has it yet
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.actual, finding.status) == ("data_widened", "write",
                                                              "corrected")
    assert run.result == "corrected"
    quoted = 'IN SCHEMA "crm" ' if scope else ""
    assert corrected_statements() == [f'ALTER DEFAULT PRIVILEGES FOR ROLE "postgres" {quoted}'
                                      f'REVOKE INSERT ON TABLES FROM "{AGENT_ROLE}"']
    crm_database.run("CREATE TABLE crm.made_later (id int)")  # by the DBA, after
    assert not crm_database.can(AGENT_ROLE, "INSERT", "crm.made_later")
    assert crm_database.run("SELECT count(*) FROM pg_default_acl d, aclexplode(d.defaclacl) a "
                            "WHERE a.grantee = %s::regrole", AGENT_ROLE) == [(0,)]
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read"}


def declare_reports_beside_crm(settings, monkeypatch, dsn: str) -> None:
    """Two resources of one database, both held through the same role."""
    monkeypatch.setenv(SECRET, dsn)
    settings.CONNECTOR_SECRETS = [SECRET]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"crm-db": {
        "type": "postgres", "secret": SECRET,
        "resources": {"crm": {"schema": "crm", "tables": ["customers"]},
                      "crm_reports": {"schema": "crm", "tables": [HOSTILE_TABLE]}},
        "agents": {"refund-agent": AGENT_ROLE}}}), [SECRET])


def reporting(people, data: list[dict[str, str]]):
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=data,
                           enforcement={"default": "correct"})
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor="agent:refund-agent",
                       source="push", trigger_reconcile=False)
    return agent


def test_bypassrls_approved_for_another_resource_is_escalated_not_taken_away(
        people, crm_database, settings, monkeypatch):
    """BYPASSRLS is role-wide: turning it off for crm would take the admin access a person
    approved on crm_reports, so nothing changes and an approver is asked."""
    declare_reports_beside_crm(settings, monkeypatch, crm_database.dsn)
    crm_database.run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(sql.Identifier(AGENT_ROLE)))
    agent = reporting(people, [*CRM_READ, {"resource": "crm_reports", "access": "admin"}])
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.run("SELECT rolbypassrls FROM pg_roles WHERE rolname = %s",
                            AGENT_ROLE) == [(True,)]  # rolled back
    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.status) == ("/data/crm", "escalated")
    assert Escalation.objects.get(finding=finding).reason == (
        f"correction refused: correcting crm for role {AGENT_ROLE} would also take approved "
        f"access on crm_reports (admin to read): the grant is shared by these resources, a "
        f"person decides")
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_bypassrls_approved_nowhere_is_turned_off_for_every_resource(
        people, crm_database, settings, monkeypatch):
    declare_reports_beside_crm(settings, monkeypatch, crm_database.dsn)
    crm_database.run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(sql.Identifier(AGENT_ROLE)))
    agent = reporting(people, [*CRM_READ, {"resource": "crm_reports", "access": "read"}])
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.run("SELECT rolbypassrls FROM pg_roles WHERE rolname = %s",
                            AGENT_ROLE) == [(False,)]
    assert {f.pointer: f.status for f in Finding.objects.filter(agent=agent)} == {
        "/data/crm": "corrected", "/data/crm_reports": "corrected"}
    assert corrected_statements() == [f'ALTER ROLE "{AGENT_ROLE}" NOBYPASSRLS']  # once
    assert SourceReading.objects.get(agent=agent).access == {"crm": "read",
                                                             "crm_reports": "read"}


def test_credentials_that_may_not_turn_bypassrls_off_are_a_clear_escalation(
        people, crm_database, settings, monkeypatch):
    """CREATEROLE is not enough: PostgreSQL keeps BYPASSRLS for superusers (or, from 16, for
    roles holding it), and the escalation says so in PostgreSQL's words."""
    crm_database.run(sql.SQL("ALTER ROLE {} CREATEROLE").format(sql.Identifier(WEAK)))
    declare(settings, monkeypatch, server_url(DATABASE, WEAK), {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    assert crm_database.run("SELECT rolbypassrls FROM pg_roles WHERE rolname = %s",
                            AGENT_ROLE) == [(True,)]
    finding = Finding.objects.get(agent=agent)
    assert finding.status == "escalated"
    reason = Escalation.objects.get(finding=finding).reason
    assert reason.startswith(f"correction refused: the credentials of crm-db may not change "
                             f"role {AGENT_ROLE}: ")
    assert "bypassrls" in reason.lower()
    refused = AuditEntry.objects.get(action="source.correction_refused")
    assert refused.reason == reason.removeprefix("correction refused: ")
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_bypassrls_reached_through_a_group_is_corrected_by_ending_the_membership(
        people, crm_database, settings, monkeypatch):
    """The role may SET ROLE to a group with BYPASSRLS: the group keeps it, the agent's role
    stops being its member."""
    declare(settings, monkeypatch, crm_database.dsn, {"refund-agent": AGENT_ROLE})
    agent = reporting_read_only(people)
    crm_database.run(sql.SQL("ALTER ROLE {} BYPASSRLS").format(sql.Identifier(WRITERS)))
    crm_database.run(sql.SQL("GRANT {} TO {}").format(sql.Identifier(WRITERS),
                                                      sql.Identifier(AGENT_ROLE)))
    reconcile_agent(agent.pk, trigger="manual")

    assert Finding.objects.get(agent=agent).status == "corrected"
    assert corrected_statements() == [f'REVOKE "{WRITERS}" FROM "{AGENT_ROLE}"']
    assert crm_database.run("SELECT rolname, rolbypassrls FROM pg_roles WHERE rolname IN "
                            "(%s, %s) ORDER BY 1", AGENT_ROLE, WRITERS) == sorted(
        [(AGENT_ROLE, False), (WRITERS, True)])
    assert crm_database.run("SELECT pg_has_role(%s, %s, 'MEMBER')", AGENT_ROLE,
                            WRITERS) == [(False,)]
