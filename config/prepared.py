"""Statements PostgreSQL plans once per session, for the hot paths that run the same statement
on every request (an audit append's placing statements, an ingest batch's repeat check), where
planning cost as much as running. Django's cursors bind parameters on the client, which cannot
prepare, and Django turns psycopg's automatic preparing off (for connection poolers); a cursor
from here binds on the server and asks for every statement to be prepared. Behind a pooler in
transaction mode, prepared statements need one that tracks them (PgBouncer 1.21+,
`max_prepared_statements`)."""

from types import SimpleNamespace
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg.pq import Format, TransactionStatus

ONLY_WHEN_ASKED = 2**31 - 1  # a prepare threshold that no statement reaches by repetition


class PreparedCursor(psycopg.Cursor):
    """Binds on the server and has every statement prepared (planned once per session)."""

    _sent: tuple[Any, Any] | None = None
    _converted: Any = None

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                binary: bool | None = None) -> "PreparedCursor":
        try:
            super().execute(query, params, prepare=True, binary=binary)
        except psycopg.errors.FeatureNotSupported:
            # A migration changed a column's type under a statement this session prepared:
            # PostgreSQL refuses to run it ever again here ("cached plan must not change
            # result type", in the server's own language, so known by its SQLSTATE alone).
            # A transaction's rollback drops the session's prepared statements (psycopg);
            # outside one nothing would, and every later run failed until the session ended,
            # so they go now, and it runs once more, prepared anew (a statement PostgreSQL
            # refuses for another reason is refused again, at the cost of one round trip).
            if self.connection.info.transaction_status != TransactionStatus.IDLE:
                raise
            super().execute("DEALLOCATE ALL", prepare=False)  # psycopg forgets its own too
            super().execute(query, params, prepare=True, binary=binary)
        self._sent, self._converted = (query, params), None
        return self

    # psycopg leaves `_query` unset when it runs a prepared statement; Django's query log (DEBUG,
    # CaptureQueriesContext) reads the statement's text from it: the text as sent, parameters
    # apart (binding them again for a log line cost a twentieth of an append).
    @property
    def _query(self) -> Any:
        if self._converted is None and self._sent is not None:
            self._converted = SimpleNamespace(query=str(self._sent[0]).encode())
        return self._converted

    @_query.setter
    def _query(self, value: Any) -> None:
        self._converted = value


def prepared_cursor() -> Any:
    """On PostgreSQL, a cursor of the default database whose every statement is prepared, wrapped
    as Django wraps its own cursors, so errors, the query log and query counts see its
    statements too. One per database session, kept open (making a cursor per statement cost a
    tenth of an audit append); not closed by its callers."""
    db = connections[DEFAULT_DB_ALIAS]  # once: each attribute of the proxy is a look-up
    if db.connection is None:
        db.ensure_connection()
    session = db.connection
    kept = getattr(db, "_prepared_cursor", None)
    if kept is None or kept[0] is not session or kept[1].closed:
        if session.prepare_threshold is None:  # Django's: psycopg would then never prepare
            session.prepare_threshold = ONLY_WHEN_ASKED
        raw = PreparedCursor(session)
        loader = session.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
        if db.timezone != loader.timezone:  # as Django's create_cursor does
            register_tzloader(db.timezone, raw)
        kept = db._prepared_cursor = (session, raw)
    return db.make_debug_cursor(kept[1]) if db.queries_logged else db.make_cursor(kept[1])


def columns_of(model: Any, alias: str) -> str:
    """A model's concrete columns, qualified by `alias`, in the order instances_of reads them."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def instances_of(row: tuple, models: list[Any]) -> list[Any]:
    """One instance per model from a row of their columns_of in turn, each value converted as
    the ORM converts it (JSON text decoded, ...); None for a model whose primary key is null
    (a LEFT JOIN that found nothing)."""
    db = connections[DEFAULT_DB_ALIAS]
    found, start = [], 0
    for model in models:
        pk_index, columns = _columns(model)
        values = list(row[start:start + len(columns)])
        start += len(columns)
        for index, (column, converters) in enumerate(columns):
            for convert in converters:
                values[index] = convert(values[index], column, db)
        found.append(None if values[pk_index] is None
                     else model.from_db(DEFAULT_DB_ALIAS, None, values))
    return found


_kept_columns: dict[Any, tuple[int, list[tuple[Any, list[Any]]]]] = {}


def _columns(model: Any) -> tuple[int, list[tuple[Any, list[Any]]]]:
    """The primary key's place among a model's concrete fields, and each field's column with
    the converters the ORM applies to its values (kept per process: a model's fields do not
    change while it runs)."""
    if model not in _kept_columns:
        db = connections[DEFAULT_DB_ALIAS]
        fields = model._meta.concrete_fields
        columns = [field.get_col(model._meta.db_table) for field in fields]
        _kept_columns[model] = (fields.index(model._meta.pk), [
            (column, db.ops.get_db_converters(column) + column.get_db_converters(db))
            for column in columns])
    return _kept_columns[model]
