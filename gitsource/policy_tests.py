"""Policy as code, tested like `opa test`: a folder of guardrail documents and, next to them,
test documents that name example manifests and the verdict each guardrail must give them.

    kind: Guardrail     metadata: {name}   spec: {expression, effect, message, selector?,
                                                  required_approvals?}
    kind: PolicyTest    metadata: {name}   spec: {guardrail, cases: [{name, manifest, expect}]}

`manifest` is a file path relative to the test document; `expect` is a guardrail outcome
(passed, warned, denied, requires_approvals, requires_step_up, error). Guardrails are judged
by the registry's own evaluator, exactly as a proposal is.
"""

import posixpath
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from config.errors import DomainError
from config.unicode_text import NOT_TEXT, holds_unstorable_text
from registry.choices import GuardrailEffect, GuardrailOutcome
from registry.grant_clocks import start_clocks
from registry.guardrails import evaluate, selector_matches
from registry.intake import read_manifests

SUFFIXES = (".yaml", ".yml")
GUARDRAIL_KEYS = {"expression", "effect", "message", "selector", "required_approvals",
                  "description", "enabled", "overdue_effect", "safe_tools"}
MAX_FILES = 500
MAX_BYTES = 1_048_576
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

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "case": self.case, "expected": self.expected,
                "got": self.got, "message": self.message, "ok": self.ok}

    @property
    def line(self) -> str:
        """The line `policy_test` prints for it."""
        mark = "ok  " if self.ok else "FAIL"
        said = f" ({self.message})" if self.message and not self.ok else ""
        return f"{mark} {self.test}: {self.case}: expected {self.expected}, got {self.got}{said}"


def read_folder(folder: Path) -> dict[str, str]:
    """Every file under `folder` (path relative to it -> text), as a commit's folder is read."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if len(files) >= MAX_FILES:
            raise PolicyError(f"{folder}: more than {MAX_FILES} files")
        if path.stat().st_size > MAX_BYTES:
            continue
        try:
            files[path.relative_to(folder).as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files


def documents_of(path: str, text: str) -> list[dict]:
    """The YAML documents of one file, each with kind, metadata.name and spec."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as error:
        raise PolicyError(f"{path}: not YAML: {error}") from None
    for index, document in enumerate(documents):
        if holds_unstorable_text(document):  # YAML's "\0": said before any name is echoed
            raise PolicyError(f"{path}: document {index + 1}: every string {NOT_TEXT}")
        if not isinstance(document, dict) or not isinstance(document.get("spec"), dict) or (
                not isinstance((document.get("metadata") or {}).get("name"), str)):
            raise PolicyError(f"{path}: document {index + 1}: expected kind, metadata.name "
                              "and spec")
    return documents


def _guardrail(path: str, document: dict) -> SimpleNamespace:
    spec, name = document["spec"], document["metadata"]["name"]
    unknown = set(spec) - GUARDRAIL_KEYS
    if unknown:
        raise PolicyError(f"{path}: guardrail {name}: unknown field /spec/{sorted(unknown)[0]}")
    if spec.get("effect") not in GuardrailEffect.values:
        raise PolicyError(f"{path}: guardrail {name}: /spec/effect: expected one of "
                          f"{', '.join(GuardrailEffect.values)}")
    if not isinstance(spec.get("expression"), str):
        raise PolicyError(f"{path}: guardrail {name}: /spec/expression: expected CEL text")
    approvals = spec.get("required_approvals", 2)
    if not isinstance(approvals, int) or isinstance(approvals, bool):
        raise PolicyError(f"{path}: guardrail {name}: /spec/required_approvals: expected a "
                          "whole number")
    if not isinstance(spec.get("selector") or {}, dict):
        raise PolicyError(f"{path}: guardrail {name}: /spec/selector: expected label: value")
    return SimpleNamespace(name=name, expression=spec["expression"], effect=spec["effect"],
                           message=str(spec.get("message", "")),
                           selector=spec.get("selector") or {},
                           required_approvals=approvals)


def run_policy_tests(folder: Path, now: datetime) -> list[CaseResult]:
    """Every case of every test document under `folder`, judged by its guardrail."""
    return run_cases(read_folder(folder), now)


def run_cases(files: dict[str, str], now: datetime) -> list[CaseResult]:
    """Every case of every test document among `files` (relative path -> text), judged by its
    guardrail among the same files. Reads nothing else and changes nothing."""
    guardrails: dict[str, SimpleNamespace] = {}
    tests: list[tuple[str, dict]] = []
    for path in sorted(p for p in files if p.endswith(SUFFIXES)):
        for document in documents_of(path, files[path]):
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
            results.append(_run_case(files, path, name, index, case, guardrail, now))
    return results


def _run_case(files: dict[str, str], path: str, test: str, index: int, case: Any,
              guardrail: SimpleNamespace, now: datetime) -> CaseResult:
    where = f"{path}: test {test}: /spec/cases/{index}"
    if not isinstance(case, dict) or set(case) != CASE_KEYS:
        raise PolicyError(f"{where}: expected exactly name, manifest and expect")
    if case["expect"] not in GuardrailOutcome.values:
        raise PolicyError(f"{where}/expect: expected one of {', '.join(GuardrailOutcome.values)}")
    example = posixpath.normpath(posixpath.join(posixpath.dirname(path), str(case["manifest"])))
    if example not in files:
        raise PolicyError(f"{where}/manifest: no file {example} next to the policies")
    try:
        manifests = read_manifests(files[example])
    except DomainError as error:
        raise PolicyError(f"{where}/manifest: {example}: {error.message}") from None
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
