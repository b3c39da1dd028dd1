"""The control library as plain data: the shipped frameworks load, a malformed file is refused
by name, the colours follow the documented table, and compliance's versions overlay the files."""

import pytest

from compliance.frameworks import LibraryError, colour, library, read_file, with_custom


def test_the_three_frameworks_ship_with_every_control_mapped():
    shipped = library()
    assert sorted(shipped) == ["eu-ai-act", "iso-42001", "nist-ai-rmf"]
    assert [c.id for c in shipped["eu-ai-act"].controls] == [
        "art-12", "art-14", "art-26.1", "art-26.2", "art-26.5", "art-26.6"]
    assert {c.id.split("-")[0] for c in shipped["nist-ai-rmf"].controls} == {
        "GOVERN", "MAP", "MEASURE", "MANAGE"}
    assert all(c.queries for f in shipped.values() for c in f.controls)


@pytest.mark.parametrize("text", [
    "framework: x\ntitle: X\ncontrols:\n  - {id: a, title: A, queries: [vibes]}\n",
    "framework: x\ntitle: X\ncontrols:\n  - {id: a, title: A, queries: []}\n",
    "framework: x\ntitle: X\ncontrols:\n  - {id: a, title: A, queries: [drift_corrected],"
    " weight: 2}\n",
    "framework: X Y\ntitle: X\ncontrols: []\n",
    "framework: x\ntitle: X\ncontrols:\n  - {id: a, title: A, queries: [drift_corrected]}\n"
    "  - {id: a, title: B, queries: [drift_corrected]}\n",
])
def test_a_malformed_control_file_is_refused(tmp_path, text):
    path = tmp_path / "ours.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LibraryError, match="ours.yaml"):
        read_file(path)


@pytest.mark.parametrize("statuses, expected", [
    (["met"], "green"), (["met", "met"], "green"), (["met", "partial"], "amber"),
    (["met", "none"], "amber"), (["partial"], "amber"), (["failed", "met"], "amber"),
    (["failed"], "red"), (["none"], "red"), (["none", "failed"], "red"),
])
def test_colours_follow_the_documented_table(statuses, expected):
    assert colour(statuses) == expected


def test_custom_versions_add_replace_and_retire_controls():
    rows = [
        {"framework": "eu-ai-act", "control_id": "art-12", "version": 2, "title": "Ours",
         "queries": ["drift_corrected"], "retired": False},
        {"framework": "eu-ai-act", "control_id": "art-14", "version": 1, "title": "",
         "queries": [], "retired": True},
        {"framework": "house", "control_id": "h-1", "version": 1, "title": "House rule",
         "queries": ["approvals_four_eyes"], "retired": False},
    ]
    merged = with_custom(library(), rows)
    eu = [(c.id, c.origin) for c in merged["eu-ai-act"].controls]
    assert eu[0] == ("art-12", "custom v2") and "art-14" not in dict(eu)
    # a shipped control retired is named, never silently gone (a custom one just goes)
    assert merged["eu-ai-act"].retired == ("art-14 (custom v1)",)
    assert merged["house"].retired == ()
    assert merged["eu-ai-act"].controls[0].queries == ("drift_corrected",)
    assert [c.id for c in merged["house"].controls] == ["h-1"]
    assert library()["eu-ai-act"].controls[0].origin == "library"  # the files are untouched


@pytest.mark.django_db
def test_a_stored_mapping_to_a_query_the_product_no_longer_has_is_red_not_an_error(people):
    from datetime import timedelta

    from django.utils import timezone

    from compliance.framework_report import report
    from compliance.models import FrameworkControl

    FrameworkControl.objects.create(  # as a version saved before the query was removed
        framework="house", control_id="h-1", version=1, title="Old rule",
        queries=["retired_query"], reason="years ago", changed_by=people.dana,
        changed_at=timezone.now())
    now = timezone.now()
    (control,) = report("house", "", now - timedelta(days=1), now)["controls"]
    assert control["colour"] == "red"
    assert "unknown evidence query 'retired_query'" in control["queries"][0]["items"][0][
        "summary"]
