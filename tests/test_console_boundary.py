"""The console imports the domain apps and none of them imports it: every module of registry,
reconciliation and audit (and any domain package split out of them later) is read as source,
imports inside functions included, so a page helper cannot creep back into an API, a job or an
action, and the pages cannot make an import cycle between the apps again."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Top-level folders that are not domain code: the front app itself, the project shell (its
# urls.py includes the console), and everything that is not the control plane.
NOT_DOMAIN = {"console", "config", "tests", "bench", "clients", "examples", "docs", "deploy",
              "var"}


def domain_packages() -> list[Path]:
    """Every top-level Python package of the control plane except the console and config."""
    return sorted(path.parent for path in ROOT.glob("*/__init__.py")
                  if path.parent.name not in NOT_DOMAIN and not path.parent.name.startswith("."))


def console_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import of `console` in `source`, wherever it is in the module;
    `importlib.import_module("console...")` and `__import__` count too."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found += [(node.lineno, name) for name in names
                  if name == "console" or name.startswith("console.")]
    return found


def test_the_check_sees_an_import_hidden_in_a_function():
    source = ("import json\n"
              "def badge(user):\n"
              "    from console.reconciliation_pages import inbox_counts\n"
              "    return inbox_counts(user)\n"
              "def page():\n"
              "    import console.forms\n"
              "    return importlib.import_module('console.inbox_pages')\n")
    assert console_imports(source) == [
        (3, "console.reconciliation_pages"), (6, "console.forms"), (7, "console.inbox_pages")]
    assert console_imports("from consoles import x\nimport console_log\n") == []


def test_no_domain_module_imports_the_console():
    packages = domain_packages()
    assert {"registry", "reconciliation", "audit"} <= {path.name for path in packages}
    offenders, modules = [], 0
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            modules += 1
            offenders += [f"{path.relative_to(ROOT)}:{line} imports {name}"
                          for line, name in console_imports(path.read_text())]
    assert modules > 100  # the domain apps were read, not an empty folder
    assert offenders == []


def test_the_pages_live_in_the_console():
    """No page module is left behind in a domain app (a views.py, *_pages.py, *_views.py or
    forms.py, or template tags)."""
    left = [str(path.relative_to(ROOT)) for package in domain_packages()
            for path in package.rglob("*.py")
            if path.name in ("views.py", "forms.py", "context_processors.py")
            or path.stem.endswith(("_pages", "_views")) or "templatetags" in path.parts]
    assert left == []
