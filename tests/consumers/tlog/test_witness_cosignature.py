"""Witness cosignatures (C2SP tlog-cosignature, cosignature/v1) as the SDK's offline verifier checks
them (``producers.evidence.cosignature``), and what the submitter keeps of a witness's answer.

The vector below was made with fixed keys and a fixed timestamp and checked with transparency-dev/formats'
``NewVerifierForCosignatureV1`` and golang.org/x/mod/sumdb/note (tests/interop/go-witness), with both the
witness's cosignature/v1 vkey and its plain ed25519 vkey."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.tlog.witness import witness_config_yaml
from producers.evidence.cosignature import (
    WitnessKey,
    add_signature_lines,
    cosign_line,
    cosignature_message,
    verify_witnesses,
    witness_key,
)
from producers.evidence.tlog import open_checkpoint, sign_note
from schemas.errors import ProofInvalid

TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
LOG_SEED, WITNESS_SEED = bytes(range(32, 64)), bytes(range(32))
LOG_VKEY = "example.com/behind-the-sofa+13e30ba2+ASmsuuFBvMrwsi4alNNNC8c2HlJtC/4SyJeUvJMilm3X"
WITNESS_VKEY = "witness.example/w1+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
WITNESS_PLAIN_VKEY = "witness.example/w1+3218362d+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
COSIGNATURE = (
    "\u2014 witness.example/w1 519lMgAAAABm/qTPzUz1lX+p2w1YNtgxc0fcM7+vySJGJRi/NLqbS1mG35zVw57e/RO4XEADDNsv"
    "qKVmrgEnu0XVUXY1GDxFztRKDA==\n"
)
TIMESTAMP = 1727964367


def _note() -> str:
    private = Ed25519PrivateKey.from_private_bytes(LOG_SEED)
    return sign_note(TEXT, name="example.com/behind-the-sofa", private_key=private)


def test_the_vector_cosignature_verifies_with_either_form_of_the_witness_key() -> None:
    witness = Ed25519PrivateKey.from_private_bytes(WITNESS_SEED)
    line = cosign_line(TEXT, name="witness.example/w1", private_key=witness, timestamp=TIMESTAMP)
    assert line == COSIGNATURE  # ed25519 is deterministic: the same bytes Go verified
    assert WitnessKey.from_public("witness.example/w1", witness.public_key()).vkey == WITNESS_VKEY
    blob = base64.b64decode(COSIGNATURE.split(" ")[2])
    assert blob[:4].hex() == "e75f6532" and int.from_bytes(blob[4:12], "big") == TIMESTAMP
    note = add_signature_lines(_note(), [COSIGNATURE])
    assert open_checkpoint(note, LOG_VKEY).size == 20852163  # the log's own signature still verifies
    for vkey in (WITNESS_VKEY, WITNESS_PLAIN_VKEY):
        report = verify_witnesses(note, [vkey], quorum=1)
        assert [(c.witness, c.timestamp) for c in report.cosigned] == [("witness.example/w1", TIMESTAMP)]
    assert witness_key(WITNESS_PLAIN_VKEY) == witness_key(WITNESS_VKEY)  # 0x01 is read as the 0x04 key
    assert cosignature_message(TIMESTAMP, TEXT) == f"cosignature/v1\ntime {TIMESTAMP}\n{TEXT}".encode()


def test_a_changed_checkpoint_or_timestamp_fails_naming_the_witness() -> None:
    note = add_signature_lines(_note(), [COSIGNATURE])
    changed = note.replace("20852163", "20852164")
    with pytest.raises(ProofInvalid, match=r"witness witness.example/w1 does not verify") as caught:
        verify_witnesses(changed, [WITNESS_VKEY], quorum=1)
    assert caught.value.part == "witness"
    blob = bytearray(base64.b64decode(COSIGNATURE.split(" ")[2]))
    blob[11] ^= 1  # the timestamp is signed too
    later = COSIGNATURE.rsplit(" ", 1)[0] + " " + base64.b64encode(bytes(blob)).decode() + "\n"
    with pytest.raises(ProofInvalid, match="does not verify"):
        verify_witnesses(add_signature_lines(_note(), [later]), [WITNESS_VKEY], quorum=1)
    # extension lines are covered as well
    extended = TEXT + "extension line\n"
    witness = Ed25519PrivateKey.from_private_bytes(WITNESS_SEED)
    line = cosign_line(extended, name="witness.example/w1", private_key=witness, timestamp=1)
    note2 = sign_note(extended, name="example.com/behind-the-sofa", private_key=Ed25519PrivateKey.generate())
    verify_witnesses(add_signature_lines(note2, [line]), [WITNESS_VKEY], quorum=1)
    with pytest.raises(ProofInvalid, match="does not verify"):
        verify_witnesses(
            add_signature_lines(note2.replace("extension", "extensiom"), [line]), [WITNESS_VKEY], quorum=1
        )


def test_the_quorum_counts_distinct_listed_witnesses_only() -> None:
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    names = [f"w{i}.example" for i in range(3)]
    vkeys = [WitnessKey.from_public(n, k.public_key()).vkey for n, k in zip(names, keys, strict=True)]
    stranger = cosign_line(TEXT, name="w9.example", private_key=Ed25519PrivateKey.generate(), timestamp=5)
    twice = [cosign_line(TEXT, name=names[0], private_key=keys[0], timestamp=t) for t in (5, 6)]
    note = add_signature_lines(_note(), [*twice, stranger])
    assert len(verify_witnesses(note, vkeys, quorum=1).cosigned) == 1
    with pytest.raises(ProofInvalid, match="cosigned by 1 of the 3 witnesses given, the quorum is 2"):
        verify_witnesses(note, vkeys, quorum=2)  # one witness twice is still one
    # a witness key under another witness's name does not count for it
    impostor = cosign_line(TEXT, name=names[1], private_key=keys[2], timestamp=5)
    with pytest.raises(ProofInvalid, match="quorum is 2"):
        verify_witnesses(add_signature_lines(note, [impostor]), vkeys, quorum=2)
    both = add_signature_lines(note, [cosign_line(TEXT, name=names[1], private_key=keys[1], timestamp=7)])
    assert verify_witnesses(both, vkeys, quorum=2).line().startswith("witnessed by 2 of 3 (quorum 2)")
    with pytest.raises(ProofInvalid, match="a quorum of 4 needs at least that many"):
        verify_witnesses(both, vkeys, quorum=4)


@pytest.mark.parametrize(
    ("vkey", "message"),
    [
        ("witness.example/w1", "not a witness verifier key"),
        ("witness.example/w1+e75f6532+!!!", "not name\\+hex id\\+base64"),
        ("witness.example/w1+00000000+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4", "id does not match"),
        ("witness.example/w1+e75f6532+AgOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4", "not an ed25519"),
        ("bad name+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4", "without spaces"),
    ],
)
def test_a_bad_witness_key_is_refused_saying_what_is_wrong(vkey: str, message: str) -> None:
    with pytest.raises(ProofInvalid, match=message):
        witness_key(vkey)


def test_only_well_formed_signature_lines_of_an_answer_are_kept() -> None:
    answer = [COSIGNATURE, "garbage\n", "\u2014 w not-base64!\n", "\u2014 a b c d\n", COSIGNATURE]
    note = add_signature_lines(_note(), answer)
    assert note.count("\u2014 witness.example/w1 ") == 1 and "garbage" not in note
    assert note.startswith(TEXT + "\n\u2014 example.com/behind-the-sofa ")


def test_the_witness_config_is_omniwitness_additional_logs_yaml() -> None:
    yaml = witness_config_yaml(origin="example.com/log", vkey=LOG_VKEY, url="https://logs.example/x")
    assert yaml == (
        'Logs:\n  - Origin: "example.com/log"\n'
        f'    PublicKey: "{LOG_VKEY}"\n    URL: "https://logs.example/x"\n'
    )
