"""The audit trail is a foundation every app writes to: it imports no other app (only config,
which holds the roles and API plumbing its views check), so it can be verified, exported and
reasoned about on its own. import-linter's layers contract holds it too (pyproject.toml); this
test also reads imports inside functions."""

import ast
from pathlib import Path

from tests.conftest import ROOT

DOMAIN_APPS = {"registry", "reconciliation", "runtime", "console", "sandbox", "sources",
               "gitsource", "compliance", "siem", "chat"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_the_audit_app_imports_no_other_app():
    offending = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "audit").rglob("*.py") if "migrations" not in path.parts
        for name in imported_modules(path) if name.split(".")[0] in DOMAIN_APPS
    }
    assert not offending, sorted(offending)
