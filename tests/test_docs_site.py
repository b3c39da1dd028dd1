"""The documentation builds offline with strict link checking, and reads as the users' own."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))


def test_the_docs_site_builds_with_every_link_resolved(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "configuration.html").exists()


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [page.name for page in PAGES if page.name not in nav] == []


def test_the_readme_is_short_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) < 300
    head = "\n".join(readme[:6])
    assert "make demo" in head and "make test" in head


def test_no_page_cites_issue_numbers_or_files_outside_the_repository():
    found = []
    for page in [ROOT / "README.md", *PAGES]:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if re.search(r"\bissues? \d+|shared/DESIGN|/work/|DESIGN\.md", line):
                found.append(f"{page.name}:{number}: {line.strip()[:100]}")
    assert found == []
