"""The configuration reference documents every setting the code reads, and nothing else."""

import ast
from pathlib import Path

from config import settings_reference as reference

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_APPS = ("config", "audit", "registry", "reconciliation", "runtime", "sandbox", "console",
                "siem", "chat", "sources", "gitsource", "compliance")


def test_every_setting_the_code_reads_has_a_note():
    names = {s.name for s in reference.read_settings(reference.SETTINGS.read_text())}
    notes = reference.read_notes(reference.NOTES.read_text())
    assert sorted(names - notes.keys()) == [], "settings without a note in setting_notes.yaml"
    assert sorted(notes.keys() - names) == [], "notes for settings the code no longer reads"


def test_the_committed_page_is_the_generated_one():
    page = (ROOT / "docs" / "configuration.md").read_text()
    generated = reference.render(reference.read_settings(reference.SETTINGS.read_text()),
                                 reference.read_notes(reference.NOTES.read_text()))
    assert page == generated, ("docs/configuration.md is stale: run "
                               "`python -m config.settings_reference > docs/configuration.md`")


def test_a_setting_added_without_a_note_shows_as_undocumented():
    source = 'X = env_int("NEW_KNOB", 3, minimum=1)\nY = env_bool("DEBUG", True)\n'
    settings = reference.read_settings(source)
    assert [(s.name, s.default, s.bound) for s in settings] == [
        ("NEW_KNOB", "`3`", "minimum 1"), ("DEBUG", "`True`", "")]
    page = reference.render(settings, {"DEBUG": "debug mode"})
    assert "| `NEW_KNOB` | whole number, minimum 1 | `3` | (undocumented) |" in page


def _environment_reads(path: Path) -> set[str]:
    """Names read with os.environ.get("NAME") / os.environ["NAME"] / env.get("NAME") in a file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and ast.unparse(node.func.value) in ("os.environ", "env")):
            names.add(node.args[0].value)
    return names


def test_variables_read_outside_the_settings_are_documented_too():
    page = (ROOT / "docs" / "configuration.md").read_text()
    read = set()
    for app in PRODUCT_APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts and path.name != "settings.py":
                read |= _environment_reads(path)
    # Django's own, and the variables a process passes to the ones it starts.
    read -= {"DJANGO_SETTINGS_MODULE", "PYTHONPATH", "PATH", "REDIS_URL", "DATABASE_URL"}
    assert sorted(name for name in read if f"`{name}`" not in page) == []
