"""Rows are locked FOR NO KEY UPDATE, never FOR UPDATE. FOR UPDATE also blocks a key share,
which is what PostgreSQL takes on a row whenever a row referring to it is written: a pass
inserting its run row takes one on the agent's. An action that locked the agent FOR UPDATE and
then wanted the agent's status row (held by a settling pass, which then wanted that key share)
deadlocked, and PostgreSQL failed one side: an approver's accept and an agent's retirement
answered 500 (tests/reconciliation/test_actions_beside_a_settling_pass.py). No product code
changes a primary key, so no lock needs to block a key share; a DELETE takes its own stronger
lock when it runs. Checked over the apps' modules, as written, so a new lock is written the
same way. And a lock names the tables it locks (`of=`) when the query joins others: without it,
select_related locks every joined row too (the owner's account, the approved version) for
the whole transaction."""

import ast
import re

from tests.test_inner_imports import app_modules

RAW_LOCK = re.compile(r"\bFOR\s+(UPDATE|SHARE)\b", re.IGNORECASE)


def strong_locks(source: str) -> list[int]:
    """The line of each `select_for_update(...)` without `no_key=True`, and of each SQL string
    that locks FOR UPDATE or FOR SHARE."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "select_for_update"
                and not any(kw.arg == "no_key" and isinstance(kw.value, ast.Constant)
                            and kw.value.value is True for kw in node.keywords)):
            lines.append(node.lineno)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and RAW_LOCK.search(node.value)):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_check_finds_a_lock_that_blocks_a_key_share():
    assert strong_locks("Agent.objects.select_for_update().get(pk=1)\n") == [1]
    assert strong_locks("x = 1\nq.select_for_update(of=('self',), no_key=False)\n") == [2]
    assert strong_locks("SQL = 'SELECT seq FROM head WHERE id = 1 for update'\n") == [1]
    assert strong_locks("q.select_for_update(no_key=True, skip_locked=True)\n"
                        "SQL = 'SELECT 1 FROM head FOR NO KEY UPDATE'\n") == []


def test_every_row_lock_leaves_a_key_share_free():
    found = {str(path): lines for path in app_modules()
             if (lines := strong_locks(path.read_text()))}
    assert not found, ("lock rows with select_for_update(no_key=True) (FOR NO KEY UPDATE): "
                       f"{found}")


def _chain(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[str]:
    """The method names of the call chain `node` is part of (q.a().b().c())."""
    while (parent := parents.get(node)) is not None and (
            (isinstance(parent, ast.Attribute) and parent.value is node)
            or (isinstance(parent, ast.Call) and parent.func is node)):
        node = parent
    names = []
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call):
            node = node.func
        else:
            names.append(node.attr)
            node = node.value
    return names


def joined_locks(source: str) -> list[int]:
    """The line of each `select_for_update(...)` without `of=` in a chain with select_related."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "select_for_update"
                  and not any(kw.arg == "of" for kw in node.keywords)
                  and "select_related" in _chain(node, parents))


def test_the_check_finds_a_lock_that_takes_the_joined_rows_too():
    assert joined_locks("A.objects.select_for_update(no_key=True).select_related('owner')\n"
                        "B.objects.select_related('x').select_for_update(no_key=True).get()\n"
                        ) == [1, 2]
    assert joined_locks("A.objects.select_for_update(no_key=True, of=('self',))"
                        ".select_related('owner').get(pk=1)\n"
                        "B.objects.select_for_update(no_key=True).get(pk=1)\n") == []


def test_a_lock_on_a_joined_query_names_what_it_locks():
    found = {str(path): lines for path in app_modules()
             if (lines := joined_locks(path.read_text()))}
    assert not found, ("name the locked tables with of=('self',) (or the relations meant): "
                       f"{found}")
