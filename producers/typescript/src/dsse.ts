/** DSSE v1 pre-authentication encoding (secure-systems-lab/dsse protocol.md), as `producers/evidence/dsse.py`. */

/** `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in bytes, ASCII decimal. */
export function pae(payloadType: string, payload: Buffer): Buffer {
  const type = Buffer.from(payloadType, "utf8");
  return Buffer.concat([
    Buffer.from(`DSSEv1 ${type.length} `, "ascii"),
    type,
    Buffer.from(` ${payload.length} `, "ascii"),
    payload,
  ]);
}
