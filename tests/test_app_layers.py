"""The app layers have no exceptions left but the project's wiring. `lint-imports` (run by `make
test` after ruff) holds the layers contract in pyproject.toml, whose `ignore_imports` lets no
back-edge through any more. Adding one needs a reason a reviewer accepts, and shows in this diff
(raising the number here)."""

import tomllib

from tests.conftest import ROOT

# config's urls, asgi and cron are the project's wiring (every app's routes, consumers, jobs).
WIRING = ("config.urls ", "config.cron ", "config.asgi ")
BACK_EDGES = 0


def contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_no_back_edge_is_let_through():
    ignored = contracts()["layers"]["ignore_imports"]
    back_edges = [entry for entry in ignored if not entry.startswith(WIRING)]
    assert len(back_edges) == BACK_EDGES, (
        f"{len(back_edges)} back-edges are ignored, {BACK_EDGES} expected: a lower app that needs "
        "a higher one announces (a signal) or asks what it registered from its ready")
    assert len(set(ignored)) == len(ignored)


def test_the_layers_run_from_the_pages_down_to_config():
    layers = contracts()["layers"]["layers"]
    assert layers[0] == "console" and layers[-3:] == ["registry", "audit", "config"]
    assert contracts()["console-on-top"]["forbidden_modules"] == ["console"]


def test_config_names_no_app_outside_the_wiring():
    wiring_only = [entry for entry in contracts()["layers"]["ignore_imports"]
                   if entry.startswith("config.") and not entry.startswith(WIRING)]
    assert wiring_only == []
