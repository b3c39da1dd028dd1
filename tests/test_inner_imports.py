"""Imports inside functions only shrink, and each says why it is not at the top of its module.
One inside a function hides a dependency from the reader and from lint-imports' layers, and an
import cycle behind it fails only when the function first runs. The ones left are where the top
cannot be: an app's `AppConfig.ready` and the `audit` package's `record` (they load before the
models), a cycle not yet broken, a heavy package only one path loads (boto3, plotly, daphne).

Moving one to the top (or breaking its cycle): lower INNER_IMPORTS. Adding one needs a reason a
reviewer accepts, written on its line or the line above, and shows in this diff. Counted over
the apps' modules (pyproject's import-linter root packages), migrations left out."""

import ast
import io
import re
import tokenize
import tomllib
from pathlib import Path

from tests.conftest import ROOT

INNER_IMPORTS = 14
NOQA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?")


def app_modules() -> list[Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return sorted(path for package in config["root_packages"]
                  for path in (ROOT / package).rglob("*.py")
                  if "migrations" not in path.relative_to(ROOT).parts)


def inner_imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """Each import statement inside a function, in line order (one in a nested function
    counts once)."""
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.update((id(inner), inner) for inner in ast.walk(node)
                         if isinstance(inner, ast.Import | ast.ImportFrom))
    return sorted(found.values(), key=lambda node: node.lineno)


def comments(source: str) -> dict[int, str]:
    """The comment on each line that has one (a `#` inside a string is not one)."""
    return {token.start[0]: token.string
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT}


def says_why(comment: str) -> bool:
    """A comment of a few words, besides any `noqa`."""
    return len(re.findall(r"[A-Za-z]{2,}", NOQA.sub("", comment.lstrip("#")))) >= 3


def unexplained(source: str) -> list[int]:
    """The line of each import inside a function with no reason on its lines or the line
    above."""
    said = comments(source)
    return [node.lineno for node in inner_imports(source)
            if not any(says_why(said.get(line, ""))
                       for line in range(node.lineno - 1, node.end_lineno + 1))]


def found_in_apps() -> list[tuple[str, int, str]]:
    return [(str(path.relative_to(ROOT)), node.lineno, ast.unparse(node))
            for path in app_modules() for node in inner_imports(path.read_text())]


def test_the_count_sees_each_import_inside_a_function_once():
    source = ("import json\n"
              "class Config:\n"
              "    from os import path\n"
              "    def ready(self):\n"
              "        from app import receivers\n"
              "        def later():\n"
              "            import app.jobs, app.models\n"
              "        return later\n"
              "async def page():\n"
              "    from app.pages import (\n"
              "        one, two)\n")
    assert [node.lineno for node in inner_imports(source)] == [5, 7, 10]


def test_a_reason_is_a_comment_of_words_on_the_import_or_above_it():
    source = ("def ready(self):\n"
              "    from app import a  # apps.py loads before the models\n"
              "    # cycle: app.jobs imports this module\n"
              "    from app import b\n"
              "    from app import c  # noqa: F401\n"
              "    from app import (  # noqa: F401  (connects the signal receivers)\n"
              "        d)\n"
              "    x = '# not a comment, a string'\n"
              "    from app import e\n"
              "    from app import f  # why\n")
    assert unexplained(source) == [5, 9, 10]


def test_the_imports_inside_functions_only_shrink():
    found = found_in_apps()
    assert len(found) == INNER_IMPORTS, (
        f"{len(found)} imports inside functions, {INNER_IMPORTS} expected: lower INNER_IMPORTS "
        "when you moved one to the top; a new one needs a reason (an import cycle is broken "
        "where it is cheap, not hidden in a function):\n"
        + "\n".join(f"{path}:{line}  {statement}" for path, line, statement in found))


def test_each_import_inside_a_function_says_why():
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in app_modules()
                 for line in unexplained(path.read_text())]
    assert offenders == [], (
        "say on the import's line or the line above why it is not at the top of the module "
        "(`# cycle: ...`, apps.py before the models, a heavy package one path loads): "
        + ", ".join(offenders))
