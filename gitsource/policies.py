"""Policy as code: the documents of a source's policy folder (guardrails, group rules, toxic
combinations, review intervals, and the PolicyTest cases kept next to them), read and checked
as the API checks the same rules, and the plan that turns the rules in force into them.

    kind: Guardrail         metadata: {name}   spec: the fields of POST /api/v1/guardrails
    kind: GroupRule         metadata: {name}   spec: the fields of POST /api/v1/group-rules
    kind: ToxicCombination  metadata: {name}   spec: the fields of POST /api/v1/toxic-combinations
    kind: ReviewInterval    metadata: {name: low|medium|high}   spec: {interval, risk_from?}
    kind: PolicyTest        (gitsource/policy_tests.py)
    kind: Agent             an example manifest a PolicyTest names (not a policy)

A folder states the whole of the rules it manages: a rule this source applied before and the
folder no longer holds is deleted by the plan; a rule nobody wrote here is left alone unless
the folder names it. Nothing here writes: gitsource.actions applies a plan.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import models

from config.strict_input import ModelSerializer
from gitsource.policy_tests import SUFFIXES, PolicyError, documents_of
from reconciliation.toxic_api import ToxicCombinationSerializer
from registry.api import GuardrailSerializer
from registry.models import Guardrail, ToxicCombination
from registry.recertification import intervals
from registry.recertification_api import IntervalSerializer
from runtime.group_rules_api import GroupRuleSerializer
from runtime.models import GroupRule

RULE_KINDS: dict[str, tuple[str, type[models.Model], type[ModelSerializer]]] = {
    "Guardrail": ("guardrail", Guardrail, GuardrailSerializer),
    "GroupRule": ("group_rule", GroupRule, GroupRuleSerializer),
    "ToxicCombination": ("toxic_combination", ToxicCombination, ToxicCombinationSerializer),
}
REVIEW_INTERVAL = "review_interval"
IGNORED_KINDS = ("PolicyTest", "Agent")
# What each kind's plan compares and its actions take (the serializers' writable fields).
NOT_SET = ("name", "created_by", "created_at", "updated_at", "revision")


@dataclass
class PolicySet:
    """Every rule a policy folder states, by kind (`guardrail`, ...) and name, in the form the
    kind's create action takes."""

    rules: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    where: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> path

    def names(self) -> dict[str, list[str]]:
        return {kind: sorted(rules) for kind, rules in self.rules.items()}


def _fields(serializer: type[ModelSerializer]) -> list[str]:
    return [f for f in serializer.Meta.fields if f not in NOT_SET]


def _errors(path: str, what: str, errors: Any, prefix: str = "/spec") -> PolicyError:
    if isinstance(errors, dict):
        name, problems = next(iter(errors.items()))
        message = problems[0] if isinstance(problems, list) else problems
        if isinstance(message, dict):  # a nested field (a dict of lists)
            return _errors(path, what, message, f"{prefix}/{name}")
        return PolicyError(f"{path}: {what}: {prefix}/{name}: {message}")
    return PolicyError(f"{path}: {what}: {prefix}: {errors}")


def _rule(path: str, kind: str, name: str, spec: dict) -> dict[str, Any]:
    """One rule's fields, checked by the API's own serializer (types, choices, lengths) with
    every field the API would default filled in."""
    label, model, serializer_class = RULE_KINDS[kind]
    what = f"{label.replace('_', ' ')} {name}"
    writable = _fields(serializer_class)
    unknown = sorted(set(spec) - set(writable))
    if unknown:
        raise PolicyError(f"{path}: {what}: unknown field /spec/{unknown[0]}")
    instance = model.objects.filter(name=name).first()
    checked = serializer_class(instance=instance, data={"name": name, **spec})
    if not checked.is_valid():
        errors = dict(checked.errors)
        if "name" in errors:
            raise _errors(path, what, {"name": errors["name"]}, "/metadata")
        raise _errors(path, what, errors)
    values = dict(checked.validated_data)
    values.pop("name", None)
    for name_ in writable:
        if name_ not in values:
            values[name_] = model._meta.get_field(name_).get_default()
    return {k: values[k] for k in writable}


def _interval(path: str, level: str, spec: dict) -> dict[str, Any]:
    what = f"review interval {level}"
    if level not in ("low", "medium", "high"):
        raise PolicyError(f"{path}: {what}: /metadata/name: expected low, medium or high")
    unknown = sorted(set(spec) - {"interval", "risk_from"})
    if unknown:
        raise PolicyError(f"{path}: {what}: unknown field /spec/{unknown[0]}")
    checked = IntervalSerializer(data=spec)
    if not checked.is_valid():
        raise _errors(path, what, dict(checked.errors))
    current = intervals()[level]
    risk_from = 0 if level == "low" else checked.validated_data.get("risk_from",
                                                                   current["risk_from"])
    return {"seconds": checked.validated_data["interval"], "risk_from": risk_from}


def read_policies(files: dict[str, str]) -> PolicySet:
    """The rules the YAML files (path -> text) state; PolicyError naming the file and field
    for anything that cannot be read, an unknown kind, or a rule named twice."""
    found = PolicySet()
    for path in sorted(p for p in files if p.endswith(SUFFIXES)):
        for document in documents_of(path, files[path]):
            kind, name = document.get("kind"), document["metadata"]["name"]
            if kind in IGNORED_KINDS:
                continue
            if kind == "ReviewInterval":
                label, values = REVIEW_INTERVAL, _interval(path, name, document["spec"])
            elif kind in RULE_KINDS:
                label, values = RULE_KINDS[kind][0], _rule(path, kind, name, document["spec"])
            else:
                raise PolicyError(f"{path}: /kind: expected one of Guardrail, GroupRule, "
                                  "ToxicCombination, ReviewInterval, PolicyTest or Agent; got "
                                  f"{kind!r}")
            if (label, name) in found.where:
                raise PolicyError(f"{path}: {kind} {name} is also in "
                                  f"{found.where[(label, name)]}")
            found.rules.setdefault(label, {})[name] = values
            found.where[(label, name)] = path
    table = {**intervals(), **found.rules.get(REVIEW_INTERVAL, {})}
    if REVIEW_INTERVAL in found.rules and table["high"]["risk_from"] <= table["medium"][
            "risk_from"]:
        raise PolicyError(f"{found.where.get((REVIEW_INTERVAL, 'high'), path)}: review interval "
                          "high: /spec/risk_from: expected high above medium")
    return found


def _current(label: str) -> dict[str, dict[str, Any]]:
    if label == REVIEW_INTERVAL:
        return intervals()
    _, model, serializer_class = next(v for v in RULE_KINDS.values() if v[0] == label)
    writable = _fields(serializer_class)
    return {rule.name: {k: getattr(rule, k) for k in writable} for rule in model.objects.all()}


def plan(policies: PolicySet, managed: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The steps from the rules in force to the folder's: create, update, or delete (only a
    rule this source manages, `managed` being the names its last applied change stated)."""
    steps: list[dict[str, Any]] = []
    labels = [v[0] for v in RULE_KINDS.values()] + [REVIEW_INTERVAL]
    for label in labels:
        current, wanted = _current(label), policies.rules.get(label, {})
        for name in sorted(wanted):
            before = current.get(name)
            if before is None:
                steps.append({"kind": label, "name": name, "op": "create", "before": None,
                              "after": wanted[name]})
            elif _jsonable(before) != _jsonable(wanted[name]):
                steps.append({"kind": label, "name": name, "op": "update",
                              "before": _jsonable(before), "after": wanted[name]})
        if label == REVIEW_INTERVAL:
            continue  # a level always has an interval: dropping the file keeps the last one
        for name in sorted(set(managed.get(label, [])) - set(wanted)):
            if name in current:
                steps.append({"kind": label, "name": name, "op": "delete",
                              "before": _jsonable(current[name]), "after": None})
    return [{**step, "after": _jsonable(step["after"])} for step in steps]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def describe(step: dict[str, Any]) -> str:
    """One step in words: "create guardrail no-gpt-5"."""
    return f"{step['op']} {step['kind'].replace('_', ' ')} {step['name']}"
