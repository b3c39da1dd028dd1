"""The API's request bodies read as strictly as a manifest (DESIGN §8, deny by default): a field
the body's serializer does not declare is refused, never ignored (a misspelled optional field
would leave its default in force: `"reasn"` for `"reason"`, `"expires"` for `"duration"`), and
a value of the wrong JSON type is refused, never converted (`"5"` where a number belongs,
`"false"` where a boolean does, `1` where text does). A field the serializer declares read-only
(an `id`, a `created_at` a client read and sends back) is ignored, as Kubernetes ignores an
object's status on an update.

Every serializer that reads a body derives from `Serializer` or `ModelSerializer` here (ruff's
banned-api holds the app code to it). Query strings, whose every value is text, are read by
`QuerySerializer`, which converts as DRF does."""

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models
from rest_framework import fields, relations, serializers

from config.found import described

NUMBER = "a number"
TEXT = "a string"

# A field's class -> (what a value of it must be in JSON, the Python types that are that),
# the first match in order (subclasses before their bases: a BooleanField is no CharField).
JSON_TYPES: tuple[tuple[type, str, tuple[type, ...]], ...] = (
    (fields.BooleanField, "true or false", (bool,)),
    (fields.IntegerField, "a whole number", (int,)),
    (fields.FloatField, NUMBER, (int, float)),
    (fields.DecimalField, NUMBER, (int, float)),
    (fields.MultipleChoiceField, "a list", (list,)),
    (fields.ChoiceField, TEXT, (str,)),
    (fields.DateTimeField, TEXT, (str, dt.datetime)),
    (fields.DateField, TEXT, (str, dt.date)),
    (fields.ListField, "a list", (list,)),
    (relations.ManyRelatedField, "a list", (list,)),
    (serializers.ListSerializer, "a list", (list,)),
    (fields.DictField, "a mapping", (dict,)),  # HStoreField too
    (serializers.BaseSerializer, "a mapping", (dict,)),
    (relations.SlugRelatedField, TEXT, (str,)),
    (fields.CharField, TEXT, (str,)),
    (fields.TimeField, TEXT, (str,)),
    (fields.DurationField, TEXT, (str,)),
    (fields.UUIDField, TEXT, (str,)),
)


def type_problem(field: fields.Field, value: Any) -> Any:
    """Why `value` is not of the JSON type `field` takes (a message, or for a list or mapping
    field a {index or key: message} of its items), or None when it is or the field takes
    anything (JSONField, a field this table does not know, which checks its own values).
    A null is the field's own to allow or refuse."""
    if value is None or isinstance(field, fields.JSONField):
        return None
    if isinstance(field, relations.PrimaryKeyRelatedField):
        want = ("a whole number", (int,)) if _integer_key(field) else (TEXT, (str,))
    else:
        want = next(((name, types) for kind, name, types in JSON_TYPES
                     if isinstance(field, kind)), None)
    if want is None:
        return None
    name, types = want
    if (isinstance(field, fields.ChoiceField) and not isinstance(field, fields.MultipleChoiceField)
            and any(type(choice) is int for choice in field.choices)):
        name, types = "a whole number", (int,)  # choices of numbers take a number
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        return f"expected {name}; got {described(value)}"
    return _item_problems(field, value)


def _item_problems(field: fields.Field, value: Any) -> dict[Any, Any] | None:
    child = getattr(field, "child", None)
    if child is None or isinstance(field, serializers.ListSerializer):
        return None  # a nested serializer checks its own items
    items = enumerate(value) if isinstance(value, list) else value.items()
    problems = {key: problem for key, item in items
                if (problem := type_problem(child, item)) is not None}
    return problems or None


def _integer_key(field: relations.PrimaryKeyRelatedField) -> bool:
    """Whether the related model's key is a number (every AutoField is an IntegerField)."""
    return field.queryset is None or isinstance(field.queryset.model._meta.pk,
                                                models.IntegerField)


class StrictBody:
    """A serializer of a request's body: unknown fields and wrong JSON types refused."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            self.refuse_unreadable(data)
        return super().to_internal_value(data)  # type: ignore[misc]

    def refuse_unreadable(self, data: Mapping) -> None:
        """A 400 naming each unknown field and each value of the wrong JSON type in `data`
        (for a view that judges the rest of the body itself, as a what-if does)."""
        errors = self._problems(data)
        if errors:
            raise serializers.ValidationError(errors)

    def _problems(self, data: Mapping) -> dict[str, Any]:
        declared = self.fields  # type: ignore[attr-defined]
        writable = sorted(name for name, field in declared.items() if not field.read_only)
        errors: dict[str, Any] = {}
        for key in data:
            if key not in declared:
                errors[str(key)] = [f"unknown field; expected one of {', '.join(writable)}"
                                    if writable else "unknown field; this takes no fields"]
        for name in writable:
            field = declared[name]
            if name in data and (problem := type_problem(field, data[name])) is not None:
                errors[name] = problem if isinstance(problem, dict) else [problem]
        return errors


class Serializer(StrictBody, serializers.Serializer):  # noqa: TID251 - the strict base itself
    """A request body's fields, read strictly (see the module)."""


class ModelSerializer(StrictBody, serializers.ModelSerializer):  # noqa: TID251 - the base
    """A model's fields in a request body, read strictly (see the module)."""


class QuerySerializer(serializers.Serializer):  # noqa: TID251 - query strings are text
    """A query string's parameters: every value arrives as text, converted as DRF does;
    parameters it does not name (a page, a cursor) are the view's."""
