"""Every vector of ../shared/vectors/tlog_vectors.json against certd.ledger and certd.signing.

The file is loaded from the repository root's sibling ``shared/vectors`` when the workspace
has it, else from the copy committed in ``tests/vectors/data/`` (a clean clone elsewhere, CI);
``test_committed_copy_matches_shared`` keeps the two identical. When neither exists every test
here fails (never skips) and says where it looked.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from certd.errors import ProofError, SigningError
from certd.signing.dsse import Envelope, pae
from certd.signing.keys import SIG_TYPE_COSIGNATURE_V1, SigningKey, VerifierKey, compute_key_id
from certd.signing.note import (
    add_signature_lines,
    cosign,
    cosignature_message,
    open_note,
    sign_note,
    signature_line,
)
from certd.tlog import (
    EMPTY_ROOT,
    Checkpoint,
    CompactRange,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    open_checkpoint,
    reference_consistency_proof,
    reference_inclusion_proof,
    root_from_leaf_hashes,
    sign_checkpoint,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_PATH = REPO_ROOT / ".." / "shared" / "vectors" / "tlog_vectors.json"
COPY_PATH = REPO_ROOT / "tests" / "vectors" / "data" / "tlog_vectors.json"
VECTORS_PATH = SHARED_PATH if SHARED_PATH.is_file() else COPY_PATH


def _load() -> dict[str, Any] | None:
    try:
        return dict(json.loads(VECTORS_PATH.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


_VECTORS = _load()
_MISSING = f"test vectors not found at {SHARED_PATH.resolve()} nor {COPY_PATH}"


def test_committed_copy_matches_shared() -> None:
    assert COPY_PATH.is_file(), f"missing {COPY_PATH}"
    if SHARED_PATH.is_file():
        assert COPY_PATH.read_bytes() == SHARED_PATH.read_bytes(), "refresh tests/vectors/data"


@pytest.fixture(scope="module")
def v() -> dict[str, Any]:
    if _VECTORS is None:
        pytest.fail(_MISSING)
    return _VECTORS


def _section(name: str, key: str) -> list[dict[str, Any]]:
    """Items for parametrize; one failing placeholder when the file is missing."""
    if _VECTORS is None:
        return [{"__missing__": True}]
    return list(_VECTORS[name][key])


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [str(item.get("file") or item.get("desc") or i) for i, item in enumerate(items)]


def _need(item: dict[str, Any]) -> None:
    if item.get("__missing__"):
        pytest.fail(_MISSING)


H = bytes.fromhex


def _reference_tree(v: dict[str, Any]) -> tuple[list[bytes], dict[tuple[int, int], bytes]]:
    leaves = [leaf_hash(H(x)) for x in v["rfc6962_reference_tree"]["leaf_inputs_hex"]]
    nodes: dict[tuple[int, int], bytes] = {}
    tree = CompactRange()
    for leaf in leaves:
        for level, index, h in tree.append(leaf):
            nodes[level, index] = h
    return leaves, nodes


def _node_fn(nodes: dict[tuple[int, int], bytes]) -> Any:
    def node(level: int, index: int) -> bytes:
        return nodes[level, index]

    return node


# --- RFC 6962 reference tree --------------------------------------------------------------


def test_reference_tree_leaf_hashes(v: dict[str, Any]) -> None:
    ref = v["rfc6962_reference_tree"]
    got = [leaf_hash(H(x)).hex() for x in ref["leaf_inputs_hex"]]
    assert got == ref["leaf_hashes_hex"]


def test_reference_tree_roots_by_size(v: dict[str, Any]) -> None:
    leaves, nodes = _reference_tree(v)
    roots = v["rfc6962_reference_tree"]["root_by_size_hex"]
    assert roots["0"] == EMPTY_ROOT.hex()
    tree = CompactRange()
    for size in range(len(leaves) + 1):
        want = roots[str(size)]
        assert root_from_leaf_hashes(leaves[:size]).hex() == want, size
        assert tree_root(size, _node_fn(nodes)).hex() == want, size
        assert tree.root().hex() == want, size
        if size < len(leaves):
            tree.append(leaves[size])


# --- inclusion and consistency proofs -------------------------------------------------------


def test_inclusion_proof_vectors(v: dict[str, Any]) -> None:
    leaves, nodes = _reference_tree(v)
    for vec in v["inclusion_proofs"]["vectors"]:
        index, size = vec["leaf_index"], vec["tree_size"]
        want = [H(p) for p in vec["proof_hex"]]
        assert leaf_hash(H(vec["leaf_input_hex"])).hex() == vec["leaf_hash_hex"]
        assert inclusion_proof(index, size, _node_fn(nodes)) == want
        assert reference_inclusion_proof(leaves[:size], index) == want
        verify_inclusion(H(vec["leaf_hash_hex"]), index, size, want, H(vec["root_hex"]))


def test_consistency_proof_vectors(v: dict[str, Any]) -> None:
    leaves, nodes = _reference_tree(v)
    for vec in v["consistency_proofs"]["vectors"]:
        size1, size2 = vec["size1"], vec["size2"]
        want = [H(p) for p in vec["proof_hex"]]
        assert consistency_proof(size1, size2, _node_fn(nodes)) == want
        assert reference_consistency_proof(leaves[:size2], size1) == want
        verify_consistency(size1, size2, want, H(vec["root1_hex"]), H(vec["root2_hex"]))


def test_all_proofs_8_leaf_tree(v: dict[str, Any]) -> None:
    leaves, nodes = _reference_tree(v)
    roots = {int(k): H(h) for k, h in v["rfc6962_reference_tree"]["root_by_size_hex"].items()}
    section = v["all_proofs_8_leaf_tree"]
    assert len(section["inclusion"]) == 36 and len(section["consistency"]) == 36
    for vec in section["inclusion"]:
        index, size = vec["leaf_index"], vec["tree_size"]
        want = [H(p) for p in vec["proof_hex"]]
        assert inclusion_proof(index, size, _node_fn(nodes)) == want, (index, size)
        assert reference_inclusion_proof(leaves[:size], index) == want
        verify_inclusion(leaves[index], index, size, want, roots[size])
    for vec in section["consistency"]:
        size1, size2 = vec["size1"], vec["size2"]
        want = [H(p) for p in vec["proof_hex"]]
        assert consistency_proof(size1, size2, _node_fn(nodes)) == want, (size1, size2)
        assert reference_consistency_proof(leaves[:size2], size1) == want
        verify_consistency(size1, size2, want, roots[size1], roots[size2])


_INCLUSION_PROBES = _section("merkle_testdata_probes", "inclusion")
_CONSISTENCY_PROBES = _section("merkle_testdata_probes", "consistency")


@pytest.mark.parametrize("probe", _INCLUSION_PROBES, ids=_ids(_INCLUSION_PROBES))
def test_merkle_testdata_inclusion_probe(probe: dict[str, Any]) -> None:
    _need(probe)
    args = (
        H(probe["leafHash_hex"]),
        probe["leafIdx"],
        probe["treeSize"],
        [H(p) for p in probe["proof_hex"]],
        H(probe["root_hex"]),
    )
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize("probe", _CONSISTENCY_PROBES, ids=_ids(_CONSISTENCY_PROBES))
def test_merkle_testdata_consistency_probe(probe: dict[str, Any]) -> None:
    _need(probe)
    args = (
        probe["size1"],
        probe["size2"],
        [H(p) for p in probe["proof_hex"]],
        H(probe["root1_hex"]),
        H(probe["root2_hex"]),
    )
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


def test_merkle_testdata_probe_counts(v: dict[str, Any]) -> None:
    probes = v["merkle_testdata_probes"]
    assert len(probes["inclusion"]) == 98 and len(probes["consistency"]) == 98
    # The generator lists cases where its own Python implementation disagreed with
    # upstream; there are none, and a new one must be looked at rather than ignored.
    assert probes["python_impl_disagreements"] == []


# --- signed notes -------------------------------------------------------------------------


def test_sumdb_note_sign_exact(v: dict[str, Any]) -> None:
    vec = v["signed_note"]["sumdb_note_vector"]
    key = SigningKey.from_private_string(vec["private_key"])
    assert key.to_private_string() == vec["private_key"]
    assert key.verifier().to_vkey() == vec["vkey"]
    assert signature_line(vec["text"], key) == vec["signature_line"]
    assert sign_note(vec["text"], key) == vec["signed_note"]


def test_sumdb_note_open(v: dict[str, Any]) -> None:
    vec = v["signed_note"]["sumdb_note_vector"]
    vkey = VerifierKey.from_vkey(vec["vkey"])
    assert vkey.to_vkey() == vec["vkey"]
    note = open_note(vec["signed_note"], [vkey])
    assert note.text == vec["text"]
    assert note.signers == ("PeterNeumann",)
    assert note.signatures[0].key_id_hex == "c74f20a3"


def test_sumdb_note_second_key(v: dict[str, Any]) -> None:
    vec = v["signed_note"]["sumdb_note_vector"]
    first = VerifierKey.from_vkey(vec["vkey"])
    second = VerifierKey.from_vkey(vec["second_key_vkey"])
    both = add_signature_lines(vec["signed_note"], [vec["second_key_signature_line"]])
    assert open_note(both, [first, second]).signers == ("PeterNeumann", "EnochRoot")
    assert open_note(both, [second]).signers == ("EnochRoot",)
    with pytest.raises(SigningError, match="expected a signature by a trusted key"):
        open_note(vec["signed_note"], [second])


def test_c2sp_example_note(v: dict[str, Any]) -> None:
    vec = v["signed_note"]["c2sp_example_vector"]
    note = open_note(vec["signed_note"], [VerifierKey.from_vkey(vec["vkey"])])
    assert note.text == vec["text"]
    assert note.signers == ("example.com/foo",)


def test_sumdb_tree_note_is_a_checkpoint(v: dict[str, Any]) -> None:
    text = v["signed_note"]["sumdb_tree_note"]["text"]
    cp = Checkpoint.from_text(text)
    assert cp.origin == "go.sum database tree"
    assert cp.size == 123456789012
    assert cp.root_hash == leaf_hash(b"hello world")
    assert cp.to_text() == text


# --- checkpoints and cosignatures -----------------------------------------------------------


def _seed(v: dict[str, Any]) -> bytes:
    private = v["signed_note"]["sumdb_note_vector"]["private_key"]
    return base64.b64decode(private.split("+", 4)[4])[1:]


def test_checkpoint_generated_sign_exact(v: dict[str, Any]) -> None:
    vec = v["checkpoint_generated"]
    key = SigningKey("example.com/test-log", _seed(v))
    assert key.verifier().to_vkey() == vec["vkey"]
    root8 = H(v["rfc6962_reference_tree"]["root_by_size_hex"]["8"])
    cp = Checkpoint("example.com/test-log", 8, root8)
    assert cp.to_text() == vec["text"]
    assert sign_checkpoint(cp, key) == vec["signed_note"]
    opened = open_checkpoint(vec["signed_note"], [VerifierKey.from_vkey(vec["vkey"])])
    assert opened == cp


def test_cosignature_v1_example_exact(v: dict[str, Any]) -> None:
    vec = v["checkpoint_generated"]
    co = vec["cosignature_v1_example"]
    assert int(co["keyid_type_byte"], 16) == SIG_TYPE_COSIGNATURE_V1
    witness = SigningKey(co["cosigner_name"], _seed(v))
    assert cosignature_message(vec["text"], co["timestamp"]) == co["signed_message"].encode()
    assert cosign(vec["text"], witness, co["timestamp"]) == co["signature_line"]

    blob = base64.b64decode(co["signature_line"].split(" ")[-1])
    assert len(blob) == 4 + 8 + 64  # keyID4 || u64be timestamp || sig64
    assert blob[:4] == compute_key_id(co["cosigner_name"], 0x04, witness.public_key)
    assert int.from_bytes(blob[4:12], "big") == co["timestamp"]

    cosigned = add_signature_lines(vec["signed_note"], [co["signature_line"]])
    note = open_note(cosigned, [witness.cosigner_verifier()])
    assert note.signers == (co["cosigner_name"],)
    assert note.signatures[0].timestamp == co["timestamp"]
    # The same Ed25519 key in the note-signature role (type 0x01) has another key id,
    # so it does not match the cosignature line.
    with pytest.raises(SigningError):
        open_note(cosigned, [witness.verifier()])
    log_key = VerifierKey.from_vkey(vec["vkey"])
    assert open_checkpoint(cosigned, [log_key, witness.cosigner_verifier()]).size == 8


# --- DSSE -----------------------------------------------------------------------------------


def test_dsse_pae_bytes(v: dict[str, Any]) -> None:
    vec = v["dsse"]
    got = pae(vec["payloadType"], vec["payload_utf8"].encode())
    assert got == H(vec["pae_hex"])
    assert got == vec["pae_utf8"].encode()


def test_dsse_envelope_ecdsa_over_our_pae(v: dict[str, Any]) -> None:
    vec = v["dsse"]
    env = Envelope.from_json(json.dumps(vec["envelope"]).encode())
    assert env.payload == vec["payload_utf8"].encode()
    assert env.payload_type == vec["payloadType"]
    (sig,) = env.signatures
    assert sig.keyid == "66301bbf"
    public = ec.EllipticCurvePublicNumbers(
        int(vec["key"]["x"]), int(vec["key"]["y"]), ec.SECP256R1()
    ).public_key()
    assert len(sig.sig) == 64
    der = encode_dss_signature(int.from_bytes(sig.sig[:32]), int.from_bytes(sig.sig[32:]))
    public.verify(der, env.pae(), ec.ECDSA(hashes.SHA256()))  # raises if our PAE is wrong
    # RFC 6979 deterministic ECDSA with the vector's private key reproduces the signature.
    private = ec.derive_private_key(int(vec["key"]["d"]), ec.SECP256R1())
    again = private.sign(env.pae(), ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    r, s = decode_dss_signature(again)
    assert r.to_bytes(32) + s.to_bytes(32) == sig.sig
    assert vec["verified_here"] is True
