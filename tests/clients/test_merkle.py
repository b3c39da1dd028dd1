"""The client's RFC 6962 Merkle tree against the published test vectors (RFC 6962's eight
leaves, as Certificate Transparency and Trillian test them), plus proofs generated and
verified for every pair of sizes up to 40."""

import pytest
from agentgov import merkle

LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]
ROOTS = [bytes.fromhex(h) for h in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]
INCLUSION = [  # (leaf index, tree size, audit path)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CONSISTENCY = [  # (first size, second size, proof)
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
HASHES = [merkle.leaf_hash(leaf) for leaf in LEAVES]
NODE = merkle.list_node_hash(HASHES)


def test_roots_of_every_prefix_match_the_published_vectors():
    assert merkle.root([]).hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert [merkle.root(HASHES[:n]) for n in range(1, 9)] == ROOTS
    assert [merkle.range_hash(0, n, NODE) for n in range(1, 9)] == ROOTS


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION)
def test_inclusion_proofs_match_and_verify(index, size, path):
    proof = merkle.inclusion_proof(index, size, NODE)
    assert [p.hex() for p in proof] == path
    merkle.verify_inclusion(index, size, HASHES[index], proof, ROOTS[size - 1])
    for wrong in ((index ^ 1, size), (index ^ 2, size), (index, size * 2), (index, size // 2)):
        if wrong != (index, size):
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(*wrong, HASHES[index], proof, ROOTS[size - 1])
    for position in range(len(proof)):
        altered = list(proof)
        altered[position] = merkle.EMPTY_ROOT
        with pytest.raises(merkle.ProofError):
            merkle.verify_inclusion(index, size, HASHES[index], altered, ROOTS[size - 1])
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(index, size, HASHES[index], [*proof, ROOTS[0]], ROOTS[size - 1])
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(index, size, HASHES[index], proof[:-1], ROOTS[size - 1])


@pytest.mark.parametrize(("first", "second", "path"), CONSISTENCY)
def test_consistency_proofs_match_and_verify(first, second, path):
    proof = merkle.consistency_proof(first, second, NODE)
    assert [p.hex() for p in proof] == path
    merkle.verify_consistency(first, second, ROOTS[first - 1], ROOTS[second - 1], proof)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(first, second, ROOTS[second - 1], ROOTS[first - 1], proof)
    for position in range(len(proof)):
        altered = list(proof)
        altered[position] = merkle.EMPTY_ROOT
        with pytest.raises(merkle.ProofError):
            merkle.verify_consistency(first, second, ROOTS[first - 1], ROOTS[second - 1], altered)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(first, second, ROOTS[first - 1], ROOTS[second - 1], proof[:-1])


def test_every_proof_up_to_forty_leaves_is_generated_and_verified():
    hashes = [merkle.leaf_hash(str(n).encode()) for n in range(40)]
    node = merkle.list_node_hash(hashes)
    roots = [merkle.root(hashes[:n]) for n in range(41)]
    for size in range(1, 41):
        for index in range(size):
            proof = merkle.inclusion_proof(index, size, node)
            assert len(proof) <= (size - 1).bit_length()
            merkle.verify_inclusion(index, size, hashes[index], proof, roots[size])
        for first in range(0, size + 1):
            proof = merkle.consistency_proof(first, size, node)
            merkle.verify_consistency(first, size, roots[first], roots[size], proof)


def test_the_builder_reports_each_completed_node_with_its_hash():
    builder, stored = merkle.TreeBuilder(), {}
    for leaf in HASHES:
        for level, index, digest in builder.append(leaf):
            stored[(level, index)] = digest
    assert builder.root() == ROOTS[-1]
    assert stored[(3, 0)] == ROOTS[-1] and stored[(2, 1)] == NODE(2, 1)
    proof = merkle.inclusion_proof(5, 7, lambda level, index: stored[(level, index)])
    merkle.verify_inclusion(5, 7, HASHES[5], proof, ROOTS[6])
    assert merkle.nodes_for(merkle.inclusion_ranges(5, 7)) <= set(stored)
