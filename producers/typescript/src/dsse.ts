/** DSSE v1 pre-authentication encoding (secure-systems-lab/dsse protocol.md), as `producers/evidence/dsse.py`. */
import { utf8Write } from "./avro-write.js";

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

let scratch = Buffer.allocUnsafeSlow(16 * 1024);

/**
 * `pae(payloadType, UTF-8 of text)` written into a buffer this module reuses: valid only until
 * the next call (for a caller that signs it at once). The text is written once, straight after
 * the room the longest header needs, and the header in front of it.
 */
export function paeOfText(payloadType: string, text: string): Buffer {
  const room = paeRoom(payloadType);
  if (scratch.length < room + text.length * 3) scratch = Buffer.allocUnsafeSlow(Math.max(scratch.length * 2, room + text.length * 3));
  const size = utf8Write.call(scratch, text, room, scratch.length - room);
  return paeAround(payloadType, scratch, room, size);
}

/** The room in front of a body that the PAE header of `payloadType` may need. */
export function paeRoom(payloadType: string): number {
  return 42 + Buffer.byteLength(payloadType, "utf8"); // "DSSEv1 " (7) + two lengths of at most 16 digits + type + 3 spaces
}

/** The PAE of the `size` bytes at `room` in `buffer` (room from `paeRoom`): the header written in
 * front of them, and the view of the whole. */
export function paeAround(payloadType: string, buffer: Buffer, room: number, size: number): Buffer {
  const head = `DSSEv1 ${Buffer.byteLength(payloadType, "utf8")} ${payloadType} ${size} `;
  const start = room - Buffer.byteLength(head, "utf8");
  utf8Write.call(buffer, head, start, room - start);
  return buffer.subarray(start, room + size);
}
