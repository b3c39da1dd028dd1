"""Uploaded manifest text to validated manifests, mapping problems to the documented errors:
malformed YAML 400, too large 413, invalid spec 422 (each error with its pointer and line)."""

from collections.abc import Callable
from typing import Any

from django.conf import settings

from config.errors import Invalid, Malformed, TooLarge
from registry.manifest import (
    Manifest,
    ManifestError,
    ManifestTooLarge,
    canonicalize,
    parse_documents,
    validate_parsed,
)


def _details(error: ManifestError) -> list[dict[str, Any]]:
    return error.details()


def read_manifests(text: str, *,
                   authorise: Callable[[list[Any]], None] | None = None) -> list[Manifest]:
    """Every document of an upload, validated; raises the matching DomainError. `authorise`
    sees the parsed documents before they are validated, so who may send them is decided
    before what is wrong with them is told."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        documents = parse_documents(text, max_bytes=limit)
    except ManifestTooLarge as error:
        raise TooLarge(str(error.errors[0].message), details=_details(error)) from None
    except ManifestError as error:
        raise Malformed(f"The body is not valid YAML or JSON: {error.errors[0]}",
                        details=_details(error)) from None
    if authorise is not None:
        authorise([document.data for document in documents])
    try:
        return validate_parsed(documents)
    except ManifestError as error:
        first = error.errors[0]
        more = f" (and {len(error.errors) - 1} more)" if len(error.errors) > 1 else ""
        raise Invalid(f"{first}{more}", details=_details(error)) from None


def read_spec(raw: Any) -> dict[str, Any]:
    """A spec given as data (a proposal body), canonicalised; pointers are under /spec."""
    try:
        return canonicalize(raw)
    except ManifestError as error:
        details = [{**d, "pointer": f"/spec{d['pointer']}"} for d in _details(error)]
        raise Invalid(f"The spec is not valid: {details[0]['pointer']}: "
                      f"{details[0]['message']}", details=details) from None
