"""A minimal RFC 3161 time-stamping authority on loopback, for the tests: a root CA, a TSA certificate
(critical extended key usage id-kp-timeStamping) and an HTTP endpoint answering
``application/timestamp-query`` with a granted ``TimeStampResp`` (CMS SignedData over a TSTInfo, with
the content-type, message-digest and signing-certificate-v2 signed attributes), built with asn1crypto.
``clock`` sets the genTime, so a test can move the TSA's time."""

from __future__ import annotations

import datetime as dt
import hashlib
import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from asn1crypto import algos, cms, core, tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Tsa:
    url: str
    root_pem: bytes
    requests: list[bytes]
    clock: Callable[[], dt.datetime]

    def write_roots(self, path: Path) -> Path:
        path.write_bytes(self.root_pem)
        return path


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _response(
    request_der: bytes,
    *,
    cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    when: dt.datetime,
    serial: int,
) -> bytes:
    request = tsp.TimeStampReq.load(request_der)
    info = tsp.TSTInfo(
        {
            "version": "v1",
            "policy": "1.3.6.1.4.1.55555.1",
            "message_imprint": request["message_imprint"],
            "serial_number": serial,
            "gen_time": when.astimezone(dt.UTC).replace(microsecond=0),
            "nonce": request["nonce"].native if request["nonce"].native is not None else core.Void(),
        }
    )
    info_der = info.dump()
    cert_der = cert.public_bytes(serialization.Encoding.DER)
    asn1_cert = asn1_x509.Certificate.load(cert_der)
    signed_attrs = cms.CMSAttributes(
        [
            cms.CMSAttribute({"type": "content_type", "values": ["tst_info"]}),
            cms.CMSAttribute({"type": "message_digest", "values": [hashlib.sha256(info_der).digest()]}),
            cms.CMSAttribute(
                {
                    "type": "signing_certificate_v2",
                    "values": [
                        tsp.SigningCertificateV2(
                            {"certs": [tsp.ESSCertIDv2({"cert_hash": hashlib.sha256(cert_der).digest()})]}
                        )
                    ],
                }
            ),
        ]
    )
    signature = key.sign(signed_attrs.dump(), ec.ECDSA(hashes.SHA256()))
    signer_info = cms.SignerInfo(
        {
            "version": "v1",
            "sid": cms.SignerIdentifier(
                {
                    "issuer_and_serial_number": cms.IssuerAndSerialNumber(
                        {"issuer": asn1_cert.issuer, "serial_number": asn1_cert.serial_number}
                    )
                }
            ),
            "digest_algorithm": algos.DigestAlgorithm({"algorithm": "sha256"}),
            "signed_attrs": signed_attrs,
            "signature_algorithm": algos.SignedDigestAlgorithm({"algorithm": "sha256_ecdsa"}),
            "signature": signature,
        }
    )
    signed = cms.SignedData(
        {
            "version": "v3",
            "digest_algorithms": [algos.DigestAlgorithm({"algorithm": "sha256"})],
            "encap_content_info": {"content_type": "tst_info", "content": core.ParsableOctetString(info_der)},
            "certificates": [asn1_cert],
            "signer_infos": [signer_info],
        }
    )
    return tsp.TimeStampResp(
        {
            "status": tsp.PKIStatusInfo({"status": "granted"}),
            "time_stamp_token": cms.ContentInfo({"content_type": "signed_data", "content": signed}),
        }
    ).dump()


@contextmanager
def running_tsa(clock: Callable[[], dt.datetime] | None = None) -> Iterator[Tsa]:
    root_key = ec.generate_private_key(ec.SECP256R1())
    root = _cert("blackbox test root", root_key, None, root_key, ca=True)
    tsa_key = ec.generate_private_key(ec.SECP256R1())
    tsa_cert = _cert("blackbox test tsa", tsa_key, root.subject, root_key, ca=False)
    requests: list[bytes] = []
    state = Tsa(
        "",
        root.public_bytes(serialization.Encoding.PEM),
        requests,
        clock or (lambda: dt.datetime.now(dt.UTC)),
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            requests.append(body)
            if self.headers.get("Content-Type") != "application/timestamp-query":
                self.send_response(415)
                self.end_headers()
                return
            answer = _response(body, cert=tsa_cert, key=tsa_key, when=state.clock(), serial=len(requests))
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/tsa"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
