"""A real CRM database on this machine's PostgreSQL, for the permission-source tests: its own
database and roles, made and dropped by the fixture. Roles are the server's, not a database's:
their prefix ($PERMISSION_SOURCE_TEST_PREFIX, else conn35_ and a digest of the run's
DATABASE_URL) keeps two runs on one server from dropping each other's."""

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

# Roles are the server's, not a database's: one name per test database and xdist worker.
PREFIX = os.environ.get("PERMISSION_SOURCE_TEST_PREFIX") or "conn35_" + hashlib.sha256(
    (os.environ.get("DATABASE_URL", "") + os.environ.get("PYTEST_XDIST_WORKER", "")).encode()
).hexdigest()[:6]
DATABASE = f"{PREFIX}_crm"
AGENT_ROLE = f"{PREFIX}_refund_bot"
WRITERS = f"{PREFIX}_crm_writers"
WEAK = f"{PREFIX}_weak_connector"
HOSTILE_ROLE = f'{PREFIX} bot"; DROP TABLE crm.customers; --'
HOSTILE_TABLE = 'or"ders; x'
HOSTILE_GROUP = f'{PREFIX} "wrïters" <b>; --'
HOSTILE_SCHEMA = 'Crm "sales"; DROP SCHEMA crm; --'
HOSTILE_COLUMN = 'e"mail ü; --'
ROLES = (AGENT_ROLE, WRITERS, WEAK, HOSTILE_ROLE, HOSTILE_GROUP)


def server_url(database: str = "postgres", user: str = "postgres") -> str:
    """The test PostgreSQL server (DATABASE_URL's host), as `user`, on `database`."""
    parts = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x"))
    host = parts.hostname or "127.0.0.1"
    return urlunsplit(("postgresql", f"{user}@{host}:{parts.port or 5432}", f"/{database}",
                       "", ""))


@dataclass
class CrmDatabase:
    """The CRM database: `run` executes SQL there as the superuser (a DBA granting by hand)."""

    dsn: str

    def run(self, statement: sql.Composable | str, *params: object) -> list[tuple]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []

    def can(self, role: str, privilege: str, table: str = "crm.customers") -> bool:
        (row,) = self.run("SELECT has_table_privilege(%s, %s, %s)", role, table, privilege)
        return row[0]


def _drop(admin: psycopg.Connection) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
        sql.Identifier(DATABASE)))
    for role in ROLES:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture
def crm_database(transactional_db) -> Iterator[CrmDatabase]:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL permission source needs a PostgreSQL server")
    with psycopg.connect(server_url(), autocommit=True) as admin:
        _drop(admin)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        for role in (AGENT_ROLE, WRITERS, HOSTILE_ROLE, HOSTILE_GROUP):
            admin.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(WEAK)))
    crm = CrmDatabase(server_url(DATABASE))
    crm.run("CREATE SCHEMA crm")
    crm.run("CREATE TABLE crm.customers (id int primary key, email text, notes text)")
    crm.run(sql.SQL("CREATE TABLE crm.{} (id int)").format(sql.Identifier(HOSTILE_TABLE)))
    crm.run(sql.SQL("GRANT USAGE ON SCHEMA crm TO {}, {}").format(
        sql.Identifier(AGENT_ROLE), sql.Identifier(HOSTILE_ROLE)))
    crm.run(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA crm TO {}, {}").format(
        sql.Identifier(AGENT_ROLE), sql.Identifier(HOSTILE_ROLE)))
    crm.run(sql.SQL("GRANT INSERT, UPDATE ON ALL TABLES IN SCHEMA crm TO {}").format(
        sql.Identifier(WRITERS)))
    yield crm
    with psycopg.connect(server_url(), autocommit=True) as admin:
        _drop(admin)
