"""Policy as code, tested like `opa test`: a folder of guardrail documents and, next to them,
test documents that name example manifests and the verdict each guardrail must give them.

    kind: Guardrail     metadata: {name}   spec: {expression, effect, message, selector?,
                                                  required_approvals?}
    kind: PolicyTest    metadata: {name}   spec: {guardrail, cases: [{name, manifest, expect}]}

`manifest` is a file path relative to the test document; `expect` is a guardrail outcome
(passed, warned, denied, requires_approvals, requires_step_up, error). Guardrails are judged
by the registry's own evaluator, exactly as a proposal is.
"""

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from config.errors import DomainError
from registry.choices import GuardrailEffect, GuardrailOutcome
from registry.grant_clocks import start_clocks
from registry.guardrails import evaluate, selector_matches
from registry.intake import read_manifests

SUFFIXES = (".yaml", ".yml")
GUARDRAIL_KEYS = {"expression", "effect", "message", "selector", "required_approvals"}
CASE_KEYS = {"name", "manifest", "expect"}


class PolicyError(ValueError):
    """A policy or test document that cannot be read; names the file and the field."""


@dataclass(frozen=True)
class CaseResult:
    """One case: what was expected, what the guardrail said, and why."""

    test: str
    case: str
    expected: str
    got: str
    message: str

    @property
    def ok(self) -> bool:
        return self.expected == self.got


def _documents(path: Path) -> list[dict]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise PolicyError(f"{path}: not YAML: {error}") from None
    for index, document in enumerate(documents):
        if not isinstance(document, dict) or not isinstance(document.get("spec"), dict) or (
                not isinstance((document.get("metadata") or {}).get("name"), str)):
            raise PolicyError(f"{path}: document {index + 1}: expected kind, metadata.name "
                              "and spec")
    return documents


def _guardrail(path: Path, document: dict) -> SimpleNamespace:
    spec, name = document["spec"], document["metadata"]["name"]
    unknown = set(spec) - GUARDRAIL_KEYS
    if unknown:
        raise PolicyError(f"{path}: guardrail {name}: unknown field /spec/{sorted(unknown)[0]}")
    if spec.get("effect") not in GuardrailEffect.values:
        raise PolicyError(f"{path}: guardrail {name}: /spec/effect: expected one of "
                          f"{', '.join(GuardrailEffect.values)}")
    if not isinstance(spec.get("expression"), str):
        raise PolicyError(f"{path}: guardrail {name}: /spec/expression: expected CEL text")
    return SimpleNamespace(name=name, expression=spec["expression"], effect=spec["effect"],
                           message=str(spec.get("message", "")),
                           selector=spec.get("selector") or {},
                           required_approvals=int(spec.get("required_approvals", 2)))


def run_policy_tests(folder: Path, now: datetime) -> list[CaseResult]:
    """Every case of every test document under `folder`, judged by its guardrail."""
    guardrails: dict[str, SimpleNamespace] = {}
    tests: list[tuple[Path, dict]] = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file()):
        for document in _documents(path):
            if document.get("kind") == "Guardrail":
                guardrails[document["metadata"]["name"]] = _guardrail(path, document)
            elif document.get("kind") == "PolicyTest":
                tests.append((path, document))
    results = []
    for path, document in tests:
        name, spec = document["metadata"]["name"], document["spec"]
        guardrail = guardrails.get(spec.get("guardrail"))
        if guardrail is None:
            raise PolicyError(f"{path}: test {name}: /spec/guardrail names no guardrail here")
        for index, case in enumerate(spec.get("cases") or []):
            results.append(_run_case(path, name, index, case, guardrail, now))
    return results


def _run_case(path: Path, test: str, index: int, case: Any, guardrail: SimpleNamespace,
              now: datetime) -> CaseResult:
    where = f"{path}: test {test}: /spec/cases/{index}"
    if not isinstance(case, dict) or set(case) != CASE_KEYS:
        raise PolicyError(f"{where}: expected exactly name, manifest and expect")
    if case["expect"] not in GuardrailOutcome.values:
        raise PolicyError(f"{where}/expect: expected one of {', '.join(GuardrailOutcome.values)}")
    example = (path.parent / str(case["manifest"])).resolve()
    try:
        manifests = read_manifests(example.read_text(encoding="utf-8"))
    except OSError as error:
        raise PolicyError(f"{where}/manifest: {error}") from None
    except DomainError as error:
        raise PolicyError(f"{where}/manifest: {example.name}: {error.message}") from None
    worst = CaseResult(test, str(case["name"]), case["expect"], GuardrailOutcome.PASSED, "")
    for manifest in manifests:
        context = {"owner": manifest.owner, "labels": manifest.labels,
                   "description": manifest.description, "name": manifest.name}
        if not selector_matches(guardrail.selector, manifest.labels):
            continue
        judged, _ = start_clocks(manifest.spec, now)
        result = evaluate(guardrail, judged, context, now)
        if result.outcome != GuardrailOutcome.PASSED:
            worst = CaseResult(test, str(case["name"]), case["expect"], result.outcome,
                               result.message)
    return worst
