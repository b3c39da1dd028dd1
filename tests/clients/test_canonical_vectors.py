"""The canonical JSON test vectors shipped for verifiers in other languages
(docs/audit-canonical-json-vectors.json) are exactly what the Python implementation, the one the
control plane hashes with, produces: a vector that drifted from it would mislead every port."""

import hashlib
import json

import pytest
from agentgov.entries import HASHED_FIELDS, canonical_json, entry_hash, entry_leaf_hash

from tests.conftest import ROOT

VECTORS = json.loads((ROOT / "docs" / "audit-canonical-json-vectors.json").read_text("utf-8"))


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["name"])
def test_each_vector_is_what_the_writer_hashes(vector):
    made = canonical_json(json.loads(vector["input"]))
    assert made == vector["canonical"]
    assert hashlib.sha256(made.encode("utf-8")).hexdigest() == vector["sha256"]


@pytest.mark.parametrize("case", VECTORS["entries"], ids=lambda c: c["name"])
def test_the_entry_vector_gives_its_chain_hash_and_leaf(case):
    entry = case["entry"]
    assert canonical_json({name: entry[name] for name in HASHED_FIELDS}) == case["payload"]
    assert entry_hash(entry) == case["hash"] == entry["hash"]
    assert canonical_json(entry) == case["leaf_data"]
    assert entry_leaf_hash(entry).hex() == case["leaf_hash"]


def test_the_vectors_cover_what_a_port_gets_wrong_first():
    names = " ".join(v["name"] for v in VECTORS["vectors"])
    for topic in ("key order", "escapes", "integers", "floats", "exponent"):
        assert topic in names
    # 1 and 1.0 differ in the hashed text: a port must keep the input's integer/float kind.
    assert canonical_json(json.loads("[1, 1.0]")) == "[1,1.0]"
