"""One owner per protocol: every Redis key of the reconcile work queue is spelled in
`reconciliation/controller/work_queue.py` only, so the collapse, lock and verify rules cannot
drift apart between the module that queues a pass and the one that runs it."""

import ast
from pathlib import Path

from tests.conftest import ROOT

OWNER = ROOT / "reconciliation" / "controller" / "work_queue.py"
PREFIXES = ("reconcile:queued", "reconcile:lock", "reconcile:verify", "reconcile:requeue")


def key_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.startswith(PREFIXES)]


def test_only_the_work_queue_module_names_the_work_queues_keys():
    sources = [path for top in ("reconciliation", "registry", "audit", "config", "runtime",
                                "sandbox", "console", "bench")
               for path in (ROOT / top).rglob("*.py")
               if ".venv" not in path.parts and "migrations" not in path.parts]
    assert OWNER in sources
    assert len(key_literals(OWNER)) == len(PREFIXES)
    strays = [hit for path in sources if path != OWNER for hit in key_literals(path)]
    assert not strays, strays
