"""The PostgreSQL permission source: what a database role can actually do, read from the
catalog, and corrected by REVOKE / GRANT in one transaction.

Every way a role holds a privilege counts: granted to it, to a role it is a member of (inherited
or reachable by SET ROLE), to PUBLIC, as an owner, as default privileges for future tables,
CREATE on the schema, BYPASSRLS and superuser. `has_table_privilege` and
`has_any_column_privilege` give the effective answer; `aclexplode` over pg_class, pg_attribute,
pg_namespace and pg_default_acl says how each privilege is held, which is what a correction
revokes. Identifiers are always composed with `psycopg.sql.Identifier`, never formatted.

A correction is refused (and escalated by the pass) rather than made blindly: a role bound to
more than one agent, a privilege granted to PUBLIC, ownership, superuser, a wanted `admin`, or
credentials whose REVOKE did not take (PostgreSQL only warns when a non-grantor revokes): the
transaction re-reads the role before committing and rolls back unless it holds what is wanted.
"""

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from config.permission_sources import Resource, Source
from reconciliation.connectors.base import ConnectorError, CorrectionRefused

log = logging.getLogger(__name__)

LEVELS = ("read", "write", "admin")
PRIVILEGE_LEVEL = {"SELECT": "read"}  # every other table privilege changes data: write
WRITE_PRIVILEGES = ("INSERT", "UPDATE", "DELETE", "TRUNCATE")
PRIVILEGES = ("SELECT", *WRITE_PRIVILEGES, "REFERENCES", "TRIGGER", "MAINTAIN")
CONNECT_TIMEOUT = 5
STATEMENT_TIMEOUT_MS = 10_000

_TABLES = """
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND (cardinality(%(tables)s::text[]) = 0 OR c.relname = ANY(%(tables)s::text[]))"""
_GRANTEE = "CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END"
_REACHES = "(a.grantee = 0 OR pg_has_role(%(role)s, a.grantee, 'MEMBER'))"

TABLE_GRANTS = f"""
    SELECT c.relname, NULL, a.privilege_type, {_GRANTEE}
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL aclexplode(c.relacl) a
    WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND (cardinality(%(tables)s::text[]) = 0 OR c.relname = ANY(%(tables)s::text[]))
      AND {_REACHES}
    UNION ALL
    SELECT c.relname, att.attname, a.privilege_type, {_GRANTEE}
    FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL aclexplode(att.attacl) a
    WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND (cardinality(%(tables)s::text[]) = 0 OR c.relname = ANY(%(tables)s::text[]))
      AND att.attnum > 0 AND NOT att.attisdropped AND {_REACHES}
    ORDER BY 1, 2 NULLS FIRST, 3, 4"""
OWNED = f"""SELECT c.relname, pg_get_userbyid(c.relowner) {_TABLES}
    AND pg_has_role(%(role)s, c.relowner, 'MEMBER') ORDER BY 1"""
EFFECTIVE = f"""SELECT c.relname, has_any_column_privilege(%(role)s, c.oid, 'SELECT'),
    has_any_column_privilege(%(role)s, c.oid, 'INSERT')
    OR has_any_column_privilege(%(role)s, c.oid, 'UPDATE')
    OR has_table_privilege(%(role)s, c.oid, 'DELETE')
    OR has_table_privilege(%(role)s, c.oid, 'TRUNCATE') {_TABLES} ORDER BY 1"""
SCHEMA = f"""
    SELECT pg_get_userbyid(n.nspowner), pg_has_role(%(role)s, n.nspowner, 'MEMBER'),
      ARRAY(SELECT {_GRANTEE} FROM aclexplode(n.nspacl) a
            WHERE a.privilege_type = 'CREATE' AND {_REACHES})
    FROM pg_namespace n WHERE n.nspname = %(schema)s"""
DEFAULTS = f"""
    SELECT pg_get_userbyid(d.defaclrole), d.defaclnamespace <> 0, a.privilege_type, {_GRANTEE}
    FROM pg_default_acl d CROSS JOIN LATERAL aclexplode(d.defaclacl) a
    WHERE d.defaclobjtype = 'r' AND {_REACHES}
      AND (d.defaclnamespace = 0
           OR d.defaclnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s))
    ORDER BY 1, 2, 3, 4"""
ROLE = "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %(role)s"
REACHABLE_POWERS = """
    SELECT r.rolname, r.rolsuper, r.rolbypassrls FROM pg_roles r
    WHERE r.rolname <> %(role)s AND (r.rolsuper OR r.rolbypassrls)
      AND pg_has_role(%(role)s, r.oid, 'MEMBER') ORDER BY 1"""
MEMBERSHIPS_TO = """
    SELECT DISTINCT pg_get_userbyid(m.roleid) FROM pg_auth_members m
    WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = %(role)s)
      AND pg_has_role(m.roleid, (SELECT oid FROM pg_roles WHERE rolname = %(group)s), 'MEMBER')
    ORDER BY 1"""


# What PostgreSQL says when it answers and refuses the connector's login: an admin must act,
# unlike a server that is down, restarting or full (retried, the last reading kept).
REFUSED_AT_LOGIN = ("password authentication failed", "is not permitted to log in",
                    "permission denied for database", "no pg_hba.conf entry",
                    "authentication failed", "does not exist")


CREDENTIALS_REMEDY = "an admin gives the connector credentials that may read it"


class SourceRefused(ConnectorError):
    """The source answered, but refused the control plane's credentials or does not know the
    agent's role: a person must act (`remedy` says who and what)."""

    def __init__(self, message: str, *, detail: str = "",
                 remedy: str = CREDENTIALS_REMEDY) -> None:
        super().__init__(message, detail=detail)
        self.remedy = remedy


def rank(level: str | None) -> int:
    return 0 if level is None else LEVELS.index(level) + 1


def highest(levels: list[str | None]) -> str | None:
    return max(levels, key=rank, default=None)


@dataclass
class Reading:
    """What one role can do at one source: access per resource and every grant behind it."""

    role: str
    access: dict[str, str | None]
    grants: list[dict[str, Any]]
    # aws_iam: spec tool -> "allowed" (every action it needs), "partial" (some) or None (none)
    tools: dict[str, str | None] = field(default_factory=dict)


def _grant(resource: str, level: str, via: str, what: str, **how: Any) -> dict[str, Any]:
    """One way the role holds access (JSON-safe: it is stored, audited and shown)."""
    return {"resource": resource, "level": level, "via": via, "what": what, **how}


def _via(role: str, grantee: str | None) -> str:
    if grantee is None:
        return "PUBLIC"
    return "direct" if grantee == role else f"member of {grantee}"


def _read_resource(cur: psycopg.Cursor, role: str, resource: str, where: Resource
                   ) -> tuple[str | None, list[dict[str, Any]]]:
    params = {"role": role, "schema": where.schema, "tables": list(where.tables)}
    grants: list[dict[str, Any]] = []
    for table, column, privilege, grantee in cur.execute(TABLE_GRANTS, params).fetchall():
        level = PRIVILEGE_LEVEL.get(privilege, "write")
        target = f"{where.schema}.{table}" + (f" ({column})" if column else "")
        grants.append(_grant(resource, level, _via(role, grantee), f"{privilege} on {target}",
                             kind="column" if column else "table", schema=where.schema,
                             table=table, column=column, privilege=privilege,
                             grantee=grantee))
    for table, owner in cur.execute(OWNED, params).fetchall():
        grants.append(_grant(resource, "admin", _via(role, owner),
                             f"owns {where.schema}.{table}", kind="owner", grantee=owner))
    row = cur.execute(SCHEMA, params).fetchone()
    if row is not None:
        owner, owns, creators = row
        if owns:
            grants.append(_grant(resource, "admin", _via(role, owner),
                                 f"owns schema {where.schema}", kind="owner", grantee=owner))
        for grantee in creators:
            grants.append(_grant(resource, "admin", _via(role, grantee),
                                 f"CREATE on schema {where.schema}", kind="schema",
                                 schema=where.schema, privilege="CREATE", grantee=grantee))
    for owner, in_schema, privilege, grantee in cur.execute(DEFAULTS, params).fetchall():
        scope = f"in schema {where.schema}" if in_schema else "everywhere"
        grants.append(_grant(resource, PRIVILEGE_LEVEL.get(privilege, "write"),
                             _via(role, grantee),
                             f"{privilege} on tables {owner} creates {scope} (default "
                             f"privileges)", kind="default", owner=owner,
                             schema=where.schema if in_schema else None,
                             privilege=privilege, grantee=grantee))
    effective: list[str | None] = []
    for _, can_read, can_write in cur.execute(EFFECTIVE, params).fetchall():
        effective.append("write" if can_write else "read" if can_read else None)
    return highest([*effective, *(g["level"] for g in grants)]), grants


def read(conn: psycopg.Connection, source: Source, role: str) -> Reading:
    """What `role` can do on each of the source's resources, from the catalog."""
    with conn.cursor() as cur:
        row = cur.execute(ROLE, {"role": role}).fetchone()
        if row is None:  # never "no access": a misspelt binding would hide the real role
            raise SourceRefused(f"permission source {source.name} has no role {role}",
                                remedy="an admin binds the agent to the role its grants are "
                                       "made to")
        superuser, bypass = row
        if superuser:
            return Reading(role, dict.fromkeys(source.resources, "admin"), [
                _grant(r, "admin", "direct", "superuser", kind="superuser")
                for r in source.resources])
        powers = [(role, False, bypass)] if bypass else []
        powers += cur.execute(REACHABLE_POWERS, {"role": role}).fetchall()
        access: dict[str, str | None] = {}
        grants: list[dict[str, Any]] = []
        for resource, where in sorted(source.resources.items()):
            level, found = _read_resource(cur, role, resource, where)
            for holder, is_super, _ in powers:
                what = "superuser" if is_super else "BYPASSRLS (row-level security ignored)"
                found.append(_grant(resource, "admin", _via(role, holder), what,
                                    kind="superuser" if is_super else "bypassrls",
                                    grantee=holder))
            access[resource] = highest([level, *(g["level"] for g in found)])
            grants += found
        return Reading(role, access, grants)


def connect(dsn: str, name: str) -> psycopg.Connection:
    """A connection to source `name`, short timeouts, no statement left running; SourceRefused
    when the server refuses the credentials, ConnectorError when it cannot be reached."""
    try:
        return psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=True,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}")
    except psycopg.Error as error:
        said = str(error)
        refused = said.partition("FATAL:")[2].strip()
        if refused and any(marker in refused for marker in REFUSED_AT_LOGIN):
            raise SourceRefused(f"permission source {name} refused the control plane's "
                                f"credentials: {refused.splitlines()[0]}") from None
        raise ConnectorError(f"permission source {name} unreachable", detail=said) from None


def _revocation(cur: psycopg.Cursor, role: str, grant: dict[str, Any],
                sharing: list[str]) -> list[sql.Composed]:
    """The statements that take one grant away from `role` and from nobody else."""
    via, kind = grant["via"], grant["kind"]
    if grant.get("privilege") not in (None, "CREATE", *PRIVILEGES):  # composed as SQL below
        raise CorrectionRefused(f"{grant['what']}: not a privilege this connector revokes")
    if via == "PUBLIC":
        raise CorrectionRefused(f"{grant['what']} is granted to PUBLIC: revoking it would take "
                                f"it from every role")
    if kind in ("owner", "superuser"):
        raise CorrectionRefused(f"role {role} holds {grant['what']} ({via}): a person changes "
                                f"ownership and superuser")
    if len(sharing) > 1:  # a membership ended or a privilege revoked: all of them lose it
        raise CorrectionRefused(f"role {role} is shared by agents {', '.join(sharing)}: "
                                f"revoking from it would change them all")
    if via != "direct":  # held through a membership: end the membership, not the group's grant
        groups = [name for (name,) in cur.execute(
            MEMBERSHIPS_TO, {"role": role, "group": grant["grantee"]}).fetchall()]
        if not groups:
            raise CorrectionRefused(f"role {role} reaches {grant['grantee']} through no "
                                    f"membership it holds directly")
        return [sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(g), sql.Identifier(role))
                for g in groups]
    name = sql.Identifier(role)
    if kind == "table":
        return [sql.SQL("REVOKE {} ON TABLE {} FROM {}").format(
            sql.SQL(grant["privilege"]), sql.Identifier(grant["schema"], grant["table"]), name)]
    if kind == "column":
        return [sql.SQL("REVOKE {} ({}) ON TABLE {} FROM {}").format(
            sql.SQL(grant["privilege"]), sql.Identifier(grant["column"]),
            sql.Identifier(grant["schema"], grant["table"]), name)]
    if kind == "schema":
        return [sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(
            sql.Identifier(grant["schema"]), name)]
    if kind == "bypassrls":
        return [sql.SQL("ALTER ROLE {} NOBYPASSRLS").format(name)]
    if kind == "default":
        scope = (sql.SQL(" IN SCHEMA {}").format(sql.Identifier(grant["schema"]))
                 if grant["schema"] else sql.SQL(""))
        return [sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {}{} REVOKE {} ON TABLES FROM {}")
                .format(sql.Identifier(grant["owner"]), scope, sql.SQL(grant["privilege"]),
                        name)]
    raise CorrectionRefused(f"{grant['what']}: no known way to revoke it")  # pragma: no cover


def _granting(role: str, where: Resource, level: str, sharing: list[str]
              ) -> list[sql.Composed]:
    """The statements that give `role` `level` on a resource, directly."""
    if level == "admin":
        raise CorrectionRefused("admin access is granted by a person, not by a correction")
    if len(sharing) > 1:
        raise CorrectionRefused(f"role {role} is shared by agents {', '.join(sharing)}: "
                                f"granting to it would change them all")
    name, schema = sql.Identifier(role), sql.Identifier(where.schema)
    privileges = sql.SQL(", ").join(
        sql.SQL(p) for p in (("SELECT",) if level == "read" else ("SELECT", *WRITE_PRIVILEGES)))
    statements = [sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, name)]
    if where.tables:
        tables = sql.SQL(", ").join(sql.Identifier(where.schema, t) for t in where.tables)
        statements.append(sql.SQL("GRANT {} ON TABLE {} TO {}").format(privileges, tables, name))
    else:
        statements.append(sql.SQL("GRANT {} ON ALL TABLES IN SCHEMA {} TO {}").format(
            privileges, schema, name))
    return statements


def taken_elsewhere(source: Source, resource: str, before: Reading, after: Reading,
                    approved: dict[str, str | None] | None) -> list[str]:
    """The source's other resources whose approved access a correction of `resource` took
    away: BYPASSRLS is role-wide, and CREATE on a schema or its default privileges count for
    every resource in that schema. Without `approved`, any access lowered counts."""
    taken = []
    for other in sorted(source.resources):
        if other == resource:
            continue
        held, left = before.access.get(other), after.access.get(other)
        kept = before.access.get(other) if approved is None else approved.get(other)
        if rank(left) < min(rank(held), rank(kept)):
            taken.append(f"{other} ({held} to {left or 'no access'})")
    return taken


def correct(conn: psycopg.Connection, source: Source, agent: str, resource: str,
            wanted: str | None, approved: dict[str, str | None] | None = None
            ) -> tuple[list[str], Reading, Reading]:
    """Bring `agent`'s role to exactly `wanted` on `resource` in one transaction: the
    statements run and the readings before and after. Raises CorrectionRefused (nothing
    changed) when that cannot be done safely, would take from the source's other resources
    access `approved` for them, or the credentials may not do it."""
    role = source.role_of(agent)
    if role is None or resource not in source.resources:
        raise CorrectionRefused(f"{source.name} has no role for {agent} on {resource}")
    sharing = source.sharing(role)
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SET LOCAL lock_timeout = '5s'")
            before = read(conn, source, role)
            held = before.access.get(resource)
            statements: list[sql.Composed] = []
            if rank(held) > rank(wanted):
                for grant in before.grants:
                    if grant["resource"] == resource and rank(grant["level"]) > rank(wanted):
                        statements += [s for s in _revocation(cur, role, grant, sharing)
                                       if s not in statements]
            elif rank(held) < rank(wanted) and wanted is not None:
                statements = _granting(role, source.resources[resource], wanted, sharing)
            for statement in statements:
                cur.execute(statement)
            after = read(conn, source, role)
            if after.access.get(resource) != wanted:
                raise CorrectionRefused(
                    f"the credentials of {source.name} could not bring role {role} to "
                    f"{wanted or 'no access'} on {resource} (it still holds "
                    f"{after.access.get(resource) or 'no access'}): they need to own the "
                    f"objects, hold the privileges WITH GRANT OPTION, or hold ADMIN OPTION on "
                    f"the roles it is a member of")
            taken = taken_elsewhere(source, resource, before, after, approved)
            if taken:
                raise CorrectionRefused(
                    f"correcting {resource} for role {role} would also take approved access "
                    f"on {', '.join(taken)}: the grant is shared by these resources, a person "
                    f"decides")
            return [s.as_string(conn) for s in statements], before, after
    except psycopg.errors.InsufficientPrivilege as error:
        detail = error.diag.message_detail  # PostgreSQL 16 says why here, e.g. BYPASSRLS
        raise CorrectionRefused(f"the credentials of {source.name} may not change role "
                                f"{role}: {error.diag.message_primary}"
                                + (f" ({detail})" if detail else "")) from None
    except psycopg.OperationalError as error:
        raise ConnectorError(f"permission source {source.name} unreachable",
                             detail=str(error)) from None
