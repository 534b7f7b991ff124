"""The verifier's side of the log (``producers.evidence.tlog``) against RFC 6962 computed the long way,
and the C2SP formats against the examples in their specs (c2sp.org/signed-note, tlog-checkpoint,
tlog-tiles)."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.tlog.frontier import Frontier, object_key
from consumers.tlog.tiles import TreeReader, tile_key, tile_path, tile_width
from producers.blobstore import LocalBlobStore
from producers.evidence.keys import public_raw
from producers.evidence.merkle import leaf_hash, merkle_root
from producers.evidence.tlog import (
    Checkpoint,
    log_key,
    open_checkpoint,
    open_note,
    root_from_inclusion,
    sign_note,
    verify_consistency,
    verify_inclusion,
    vkey,
)
from schemas.errors import ProofInvalid

# c2sp.org/signed-note, "Verifier keys / Example"
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n"
    "\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)
# c2sp.org/tlog-checkpoint, the example's note text
SPEC_CHECKPOINT_TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def _leaves(n: int) -> list[bytes]:
    return [f"leaf {i}".encode() for i in range(n)]


def _stored_tree(tmp_path: Path, sizes: list[int]) -> tuple[LocalBlobStore, list[bytes]]:
    """A log appended in steps ending at each of ``sizes``, stored as tiles."""
    store = LocalBlobStore(tmp_path)
    leaves = _leaves(sizes[-1])
    frontier = Frontier()
    for size in sizes:
        frontier, objects, order = frontier.extend(leaves[frontier.size : size])
        for name in order:
            store.put(object_key("log", name), objects[name])
    return store, leaves


# --- the C2SP formats ---------------------------------------------------------------------------------
def test_the_signed_note_spec_example_verifies_and_a_changed_byte_does_not() -> None:
    assert open_note(SPEC_NOTE, log_key(SPEC_VKEY)) == "This is an example message.\n"
    with pytest.raises(ProofInvalid, match="changed after signing"):
        open_note(SPEC_NOTE.replace("example message", "exemple message"), log_key(SPEC_VKEY))


def test_our_vkey_and_signature_lines_follow_the_spec() -> None:
    raw = base64.b64decode(SPEC_VKEY.split("+")[2])[1:]
    assert vkey("example.com/foo", raw) == SPEC_VKEY  # key id = sha256(name || \n || 0x01 || key)[:4]
    private = Ed25519PrivateKey.generate()
    note = sign_note(SPEC_CHECKPOINT_TEXT, name="example.com/behind-the-sofa", private_key=private)
    text, _, signature = note.partition("\n\n")
    assert text + "\n" == SPEC_CHECKPOINT_TEXT
    dash, name, blob = signature.rstrip("\n").split(" ")
    assert dash == "\u2014" and name == "example.com/behind-the-sofa"
    assert len(base64.b64decode(blob)) == 4 + 64
    key = vkey("example.com/behind-the-sofa", public_raw(private.public_key()))
    assert open_checkpoint(note, key) == Checkpoint.parse(SPEC_CHECKPOINT_TEXT)
    # a signature by an unknown key is ignored; none by the log's key is a rejection
    other = sign_note(SPEC_CHECKPOINT_TEXT, name="witness.example", private_key=Ed25519PrivateKey.generate())
    with pytest.raises(ProofInvalid, match="no signature by the log key"):
        open_checkpoint(other, key)


def test_the_checkpoint_spec_example_parses() -> None:
    checkpoint = Checkpoint.parse(SPEC_CHECKPOINT_TEXT)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert len(checkpoint.root) == 32 and checkpoint.text() == SPEC_CHECKPOINT_TEXT
    for bad in ("o\n012\n" + "A" * 44 + "\n", "o\n1\nnot base64\n", "o\n1\n"):
        with pytest.raises(ProofInvalid):
            Checkpoint.parse(bad)


def test_tile_paths_and_widths_follow_tlog_tiles() -> None:
    assert tile_path(1234067) == "x001/x234/067" and tile_path(0) == "000" and tile_path(1000) == "x001/000"
    assert tile_key("p", 1, 5, 17) == "p/tile/1/005.p/17"
    # "a tree of size 70,000 ... 273 full level 0 tiles, one partial level 0 tile of width 112, one full
    # level 1 tile, one partial level 1 tile of width 17, and one partial level 2 tile of width 1"
    size = 70_000
    assert [tile_width(size, 0, n) for n in range(274)] == [256] * 273 + [112]
    assert (tile_width(size, 1, 0), tile_width(size, 1, 1), tile_width(size, 2, 0)) == (256, 17, 1)
    assert (tile_width(256, 0, 0), tile_width(256, 1, 0)) == (256, 1)


# --- proofs against the definition ---------------------------------------------------------------------
def test_every_inclusion_and_consistency_proof_of_small_trees_verifies(tmp_path: Path) -> None:
    sizes = [*range(1, 70), 255, 256, 257, 300, 511, 512, 513]
    store, leaves = _stored_tree(tmp_path, sizes)
    for size in sizes:
        reader = TreeReader(store, "log", size)
        root = merkle_root(leaves[:size])
        assert reader.root() == root, size
        for i in range(size) if size < 70 else random.Random(size).sample(range(size), 20):
            assert root_from_inclusion(i, size, leaf_hash(leaves[i]), reader.inclusion(i)) == root
        for old in (s for s in sizes if s <= size and (size < 70 or s % 7 == 0 or s > 250)):
            verify_consistency(old, size, merkle_root(leaves[:old]), root, reader.consistency(old))


def test_a_rewritten_or_shortened_log_fails_consistency(tmp_path: Path) -> None:
    store, leaves = _stored_tree(tmp_path, [10, 37])
    reader = TreeReader(store, "log", 37)
    old_root = merkle_root(leaves[:10])
    rewritten = [*leaves[:4], *leaves[5:], b"padding"]  # leaf 4 removed, one added to keep the size
    with pytest.raises(ProofInvalid, match="rewritten or removed"):
        verify_consistency(10, 37, old_root, merkle_root(rewritten), reader.consistency(10))
    with pytest.raises(ProofInvalid, match="shrank"):
        verify_consistency(37, 10, merkle_root(leaves), old_root, [])


def test_the_frontier_reloads_from_partial_tiles_and_keeps_the_root(tmp_path: Path) -> None:
    rng = random.Random(7)
    sizes, at = [], 0
    while at < 70_000:
        at += rng.choice([1, 3, 255, 256, 257, 4000])
        sizes.append(at)
    store, leaves = _stored_tree(tmp_path, sizes)
    for size in [*rng.sample(sizes, 5), sizes[-1]]:
        frontier = Frontier.load(store, "log", size)
        assert frontier.root() == merkle_root(leaves[:size])


def test_verify_inclusion_names_the_part_that_fails(tmp_path: Path) -> None:
    store, leaves = _stored_tree(tmp_path, [100])
    private = Ed25519PrivateKey.generate()
    reader = TreeReader(store, "log", 100)
    note = sign_note(
        Checkpoint("log.example/a", 100, reader.root()).text(), name="log.example/a", private_key=private
    )
    proof = {
        "leafIndex": 42,
        "treeSize": 100,
        "hashes": [base64.b64encode(h).decode() for h in reader.inclusion(42)],
        "checkpoint": note,
        "leaf": base64.b64encode(leaves[42]).decode(),
    }
    key = vkey("log.example/a", public_raw(private.public_key()))
    assert verify_inclusion(leaves[42], proof, key).size == 100
    assert verify_inclusion(leaves[42], proof, private.public_key()).origin == "log.example/a"
    cases = {
        "leaf": (leaves[41], proof),
        "inclusion": (leaves[42], {**proof, "leafIndex": 41, "leaf": base64.b64encode(leaves[42]).decode()}),
        "checkpoint": (leaves[42], {**proof, "checkpoint": note.replace("\n100\n", "\n101\n")}),
    }
    for part, (leaf, bad) in cases.items():
        with pytest.raises(ProofInvalid) as caught:
            verify_inclusion(leaf, bad, key)
        assert caught.value.part == part, (part, caught.value)
    with pytest.raises(ProofInvalid) as caught:
        verify_inclusion(
            leaves[42], proof, vkey("log.example/a", public_raw(Ed25519PrivateKey.generate().public_key()))
        )
    assert caught.value.part == "checkpoint"


def test_an_inclusion_proof_verifies_with_the_sdk_modules_alone(tmp_path: Path) -> None:
    """``producers.evidence.tlog`` imports nothing of the services (the wheel-level check of the SDK's
    imports is tests/test_packaging.py): here the server packages are made unimportable."""
    import json
    import subprocess
    import sys

    from ingest_testdata import make_capture, new_signer, sealed

    from producers.evidence.tlog import capture_leaf

    capture = sealed(make_capture(3, size=200), new_signer())
    leaves = [*_leaves(6), capture_leaf(capture), *_leaves(3)]
    store = LocalBlobStore(tmp_path / "blobs")
    frontier, objects, order = Frontier().extend(leaves)
    for name in order:
        store.put(object_key("log", name), objects[name])
    private = Ed25519PrivateKey.generate()
    reader = TreeReader(store, "log", len(leaves))
    proof = {
        "leafIndex": 6,
        "treeSize": len(leaves),
        "hashes": [base64.b64encode(h).decode() for h in reader.inclusion(6)],
        "checkpoint": sign_note(
            Checkpoint("o.example/l", len(leaves), frontier.root()).text(),
            name="o.example/l",
            private_key=private,
        ),
        "leaf": base64.b64encode(leaves[6]).decode(),
    }
    (tmp_path / "in.json").write_text(
        json.dumps(
            {"capture": capture, "proof": proof, "key": vkey("o.example/l", public_raw(private.public_key()))}
        )
    )
    program = (
        "import json, sys\n"
        "BLOCKED = ('consumers', 'chdb', 'httpx', 'minio', 'zstandard', 'rfc3161_client', 'typer', 'pyarrow', 'cel')\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from producers.evidence.tlog import capture_leaf, verify_inclusion\n"
        "d = json.load(open(sys.argv[1]))\n"
        "print(verify_inclusion(capture_leaf(d['capture']), d['proof'], d['key']).size)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "in.json")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "10", out.stderr
