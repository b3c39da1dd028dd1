"""The control library: which of the product's evidence shows which control of a framework.

The frameworks (EU AI Act, ISO/IEC 42001 Annex A, NIST AI RMF) ship as YAML files in
compliance/controls/; compliance staff add controls or change a control's mapping in the
database (FrameworkControl, versioned), and the newest version of a (framework, control) wins
over the file. Judging a control is pure: each of its evidence queries gives items, each item
met or not, and the colours follow from them (docs/frameworks.md)."""

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from compliance.choices import ControlColour, EvidenceQuery, QueryStatus

LIBRARY = Path(__file__).parent / "controls"
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
CONTROL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_]{0,39}$")
MAX_TITLE = 200


class LibraryError(ValueError):
    """A control file that does not say what a control file must."""


@dataclass(frozen=True)
class Control:
    """One control of a framework and the evidence queries that show it."""

    framework: str
    id: str
    title: str
    queries: tuple[str, ...]
    origin: str = "library"  # or "custom v<N>" (a compliance person's version)


@dataclass(frozen=True)
class Framework:
    """A framework and its controls, in the order they are reported."""

    id: str
    title: str
    controls: tuple[Control, ...] = field(default=())
    # Controls of the shipped library that compliance retired ("<id> (custom v<N>)"): a report
    # says so beside its colours, so dropping a red control never passes for a green report.
    retired: tuple[str, ...] = field(default=())


def _control(framework: str, raw: Any, where: str) -> Control:
    if not isinstance(raw, dict) or set(raw) != {"id", "title", "queries"}:
        raise LibraryError(f"{where}: a control has exactly id, title and queries")
    queries = raw["queries"]
    if (not isinstance(raw["id"], str) or not CONTROL_ID.match(raw["id"])
            or not isinstance(raw["title"], str) or not raw["title"].strip()
            or not isinstance(queries, list) or not queries
            or any(q not in EvidenceQuery.values for q in queries)):
        raise LibraryError(f"{where}: control {raw.get('id')!r} is malformed or names an "
                           f"unknown evidence query")
    return Control(framework, raw["id"], raw["title"].strip(), tuple(queries))


def read_file(path: Path) -> Framework:
    """One framework from its YAML file, or LibraryError."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or set(raw) != {"framework", "title", "controls"} \
            or not isinstance(raw["framework"], str) or not SLUG.match(raw["framework"]):
        raise LibraryError(f"{path.name}: expected framework, title and controls")
    controls = tuple(_control(raw["framework"], c, path.name) for c in raw["controls"])
    if len({c.id for c in controls}) != len(controls):
        raise LibraryError(f"{path.name}: a control id is used twice")
    return Framework(raw["framework"], str(raw["title"]), controls)


@cache
def library() -> dict[str, Framework]:
    """The frameworks shipped with the product, by id."""
    frameworks = [read_file(path) for path in sorted(LIBRARY.glob("*.yaml"))]
    return {f.id: f for f in frameworks}


def with_custom(shipped: dict[str, Framework], custom: list[dict[str, Any]]
                ) -> dict[str, Framework]:
    """The library overlaid with the newest custom version of each (framework, control): a
    new id is added at the end, a known id replaced in place, a retired one removed. A
    framework the library does not know is a compliance team's own."""
    frameworks = {k: list(v.controls) for k, v in shipped.items()}
    titles = {k: v.title for k, v in shipped.items()}
    shipped_ids = {(k, c.id) for k, v in shipped.items() for c in v.controls}
    retired: dict[str, list[str]] = {}
    for row in custom:
        controls = frameworks.setdefault(row["framework"], [])
        titles.setdefault(row["framework"], f"{row['framework']} (our own controls)")
        at = next((i for i, c in enumerate(controls) if c.id == row["control_id"]), None)
        if row["retired"]:
            if at is not None:
                del controls[at]
            if (row["framework"], row["control_id"]) in shipped_ids:
                retired.setdefault(row["framework"], []).append(
                    f"{row['control_id']} (custom v{row['version']})")
            continue
        control = Control(row["framework"], row["control_id"], row["title"],
                          tuple(row["queries"]), origin=f"custom v{row['version']}")
        if at is None:
            controls.append(control)
        else:
            controls[at] = control
    return {k: Framework(k, titles[k], tuple(v), tuple(retired.get(k, ())))
            for k, v in frameworks.items() if v}


def query_status(oks: list[bool]) -> str:
    """What a query's items add up to: none, all met, some met, or none met."""
    if not oks:
        return QueryStatus.NONE
    if all(oks):
        return QueryStatus.MET
    return QueryStatus.PARTIAL if any(oks) else QueryStatus.FAILED


def colour(statuses: list[str]) -> str:
    """Green when every query is met; red when no query has a single met item; amber between
    (partial evidence: a query with nothing in the period, or one with a miss)."""
    if statuses and all(s == QueryStatus.MET for s in statuses):
        return ControlColour.GREEN
    if all(s in (QueryStatus.NONE, QueryStatus.FAILED) for s in statuses):
        return ControlColour.RED
    return ControlColour.AMBER
