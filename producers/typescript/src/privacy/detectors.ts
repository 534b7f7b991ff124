/**
 * The built-in detectors, as `producers/privacy/detectors.py` defines them (BLACKBOX_REDACT=builtin):
 * EMAIL, PHONE (confirmed by libphonenumber), CARD (Luhn), IBAN (ISO 13616 mod 97), IP (v4 and v6).
 * Spans are JavaScript string indices (UTF-16); the redaction turns them into UTF-8 byte offsets.
 * Overlaps are resolved as `producers/privacy/native_scan.py` does: earliest, then longest, then
 * detector order (email, iban, card, ip, phone).
 *
 * One known difference: Python confirms phone numbers with libphonenumber's STRICT_GROUPING leniency,
 * which libphonenumber-js has not ported; here they are confirmed with VALID, so a valid number
 * written in an unusual grouping ("415 5550 132") is redacted here and not in Python (more is taken
 * out, never less).
 */
import { isIPv6 } from "node:net";
import { PhoneNumberMatcher } from "libphonenumber-js/max";

export interface Finding {
  readonly start: number;
  readonly end: number;
  readonly kind: string;
}

export interface Detector {
  readonly name: string;
  /** Optional: a text with no match of this (non-global) pattern has no finding, so `find` is skipped. */
  readonly trigger?: RegExp;
  find(text: string): Finding[];
}

// What each built-in detector cannot match without: most prose has no digit, "@" or ":" at all
const DIGIT = /[0-9]/;
const AT_SIGN = /@/;
const DIGIT_OR_COLON = /[0-9:]/;

const ALNUM = /^[\p{L}\p{N}]$/u;

/** The code point that ends at `index` (a surrogate pair read whole), or "" at the start. */
function before(text: string, index: number): string {
  if (index <= 0) return "";
  const low = text.charCodeAt(index - 1);
  if (low >= 0xdc00 && low <= 0xdfff && index >= 2) {
    const high = text.charCodeAt(index - 2);
    if (high >= 0xd800 && high <= 0xdbff) return text.slice(index - 2, index);
  }
  return text[index - 1] ?? "";
}

function at(text: string, index: number): string {
  if (index >= text.length) return "";
  return String.fromCodePoint(text.codePointAt(index) ?? 0);
}

function isAlnum(char: string): boolean {
  return char !== "" && ALNUM.test(char);
}

function wordAt(text: string, index: number): boolean {
  const char = at(text, index);
  return isAlnum(char) || char === "_";
}

function wordBefore(text: string, index: number): boolean {
  const char = before(text, index);
  return isAlnum(char) || char === "_";
}

const LOCAL = new Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-");
const DOMAIN = new Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
const ADDRESS = /^[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}$/;

export class EmailDetector implements Detector {
  readonly name = "email";
  readonly trigger = AT_SIGN;

  find(text: string): Finding[] {
    const found: Finding[] = [];
    const size = text.length;
    let sign = text.indexOf("@");
    while (sign !== -1) {
      let start = sign;
      while (start > 0 && LOCAL.has(text[start - 1] as string) && sign - start < 64) start -= 1;
      let end = sign + 1;
      while (end < size && DOMAIN.has(text[end] as string) && end - sign < 255) end += 1;
      while (end > sign + 1 && (text[end - 1] === "." || text[end - 1] === "-")) end -= 1;
      if (ADDRESS.test(text.slice(start, end)) && !wordAt(text, end)) found.push({ start, end, kind: "EMAIL" });
      sign = text.indexOf("@", Math.max(end, sign + 1));
    }
    return found;
  }
}

const PHONE_CANDIDATE = /[+(0-9][0-9 \t\u00a0().+-]{5,24}[0-9]/g;
const DATE = /^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}[./-][0-9]{2}[./-][0-9]{4})$/;

export class PhoneDetector implements Detector {
  readonly name = "phone";
  readonly trigger = DIGIT;
  constructor(readonly region: string = "US") {}

  find(text: string): Finding[] {
    const found: Finding[] = [];
    PHONE_CANDIDATE.lastIndex = 0; // the pattern is this module's: exec from the start (matchAll would copy it per call)
    for (let candidate = PHONE_CANDIDATE.exec(text); candidate !== null; candidate = PHONE_CANDIDATE.exec(text)) {
      const start = candidate.index;
      const raw = candidate[0];
      const end = start + raw.length;
      const previous = before(text, start);
      if ((start > 0 && (isAlnum(previous) || previous === "_" || previous === "+")) || wordAt(text, end)) continue;
      let digits = 0;
      for (const char of raw) if (char >= "0" && char <= "9") digits += 1;
      if (digits < 7 || digits > 15 || DATE.test(raw)) continue;
      found.push(...this.confirm(text, start, end));
    }
    return found;
  }

  /** The phone numbers libphonenumber finds in the candidate `text.slice(start, end)`. */
  confirm(text: string, start: number, end: number): Finding[] {
    // VALID is libphonenumber-js's strictest leniency (its typings omit the option it reads)
    const options = { defaultCountry: this.region, leniency: "VALID", v2: true } as unknown as ConstructorParameters<typeof PhoneNumberMatcher>[1];
    const matcher = new PhoneNumberMatcher(text.slice(start, end), options);
    const found: Finding[] = [];
    while (matcher.hasNext()) {
      const match = matcher.next();
      if (match !== undefined) found.push({ start: start + match.startsAt, end: start + match.endsAt, kind: "PHONE" });
    }
    return found;
  }
}

export function luhnValid(digits: string): boolean {
  let total = 0;
  for (let position = 0; position < digits.length; position++) {
    let value = digits.charCodeAt(digits.length - 1 - position) - 48;
    if (position % 2) {
      value *= 2;
      if (value > 9) value -= 9;
    }
    total += value;
  }
  return total % 10 === 0;
}

const CARD_CANDIDATE = /[0-9][0-9 -]{11,22}[0-9]/g;

export class CardDetector implements Detector {
  readonly name = "card";
  readonly trigger = DIGIT;

  find(text: string): Finding[] {
    const found: Finding[] = [];
    CARD_CANDIDATE.lastIndex = 0; // the pattern is this module's: exec from the start (matchAll would copy it per call)
    for (let candidate = CARD_CANDIDATE.exec(text); candidate !== null; candidate = CARD_CANDIDATE.exec(text)) {
      const start = candidate.index;
      const raw = candidate[0];
      const end = start + raw.length;
      if ((start > 0 && "0123456789-".includes(text[start - 1] as string)) || (end < text.length && "0123456789-".includes(text[end] as string))) continue;
      if (raw.includes("  ") || raw.includes("--") || raw.includes(" -") || raw.includes("- ")) continue;
      const digits = raw.replaceAll(" ", "").replaceAll("-", "");
      if (digits.length >= 13 && digits.length <= 19 && luhnValid(digits)) found.push({ start, end, kind: "CARD" });
    }
    return found;
  }
}

/** The ISO 13616 check of an IBAN without spaces: rotate four, letters to numbers, mod 97 == 1. */
export function ibanValid(compact: string): boolean {
  if (compact.length < 15 || compact.length > 34 || !/^[\p{L}]{2}$/u.test(compact.slice(0, 2)) || !/^[0-9]{2}$/.test(compact.slice(2, 4))) return false;
  const rotated = compact.slice(4) + compact.slice(0, 4);
  let remainder = 0;
  for (const char of rotated) {
    const value = parseInt(char, 36);
    if (Number.isNaN(value) || !/^[0-9A-Za-z]$/.test(char)) return false;
    for (const digit of String(value)) remainder = (remainder * 10 + (digit.charCodeAt(0) - 48)) % 97;
  }
  return remainder === 1;
}

const IBAN_CANDIDATE = /[A-Z][A-Z][0-9][0-9](?: ?[A-Z0-9]){11,30}/g;

export class IbanDetector implements Detector {
  readonly name = "iban";
  readonly trigger = DIGIT;

  find(text: string): Finding[] {
    const found: Finding[] = [];
    IBAN_CANDIDATE.lastIndex = 0; // the pattern is this module's: exec from the start (matchAll would copy it per call)
    for (let candidate = IBAN_CANDIDATE.exec(text); candidate !== null; candidate = IBAN_CANDIDATE.exec(text)) {
      const start = candidate.index;
      if (wordBefore(text, start)) continue;
      const raw = candidate[0];
      let end = raw.length;
      while (end >= 15) {
        if (ibanValid(raw.slice(0, end).replaceAll(" ", ""))) {
          found.push({ start, end: start + end, kind: "IBAN" });
          break;
        }
        const cut = raw.lastIndexOf(" ", end - 1);
        end = cut >= 15 ? cut : end - 1;
      }
    }
    return found;
  }
}

const V4 = /[0-9][0-9]?[0-9]?\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/g;
const V6_CHARS = new Set("0123456789abcdefABCDEF:.");

/** As Python's `ipaddress.IPv4Address`: four decimal octets, 0-255, no leading zeros. */
function ipv4Parses(text: string): boolean {
  const octets = text.split(".");
  return octets.length === 4 && octets.every((octet) => /^(?:0|[1-9][0-9]{0,2})$/.test(octet) && Number(octet) <= 255);
}

export class IpDetector implements Detector {
  readonly name = "ip";
  readonly trigger = DIGIT_OR_COLON;

  find(text: string): Finding[] {
    const found: Finding[] = [];
    if (text.includes(".")) {
      V4.lastIndex = 0; // the pattern is this module's: exec from the start (matchAll would copy it per call)
      for (let match = V4.exec(text); match !== null; match = V4.exec(text)) {
        const start = match.index;
        const end = start + match[0].length;
        if ((start > 0 && (text[start - 1] === "." || wordBefore(text, start))) || wordAt(text, end)) continue;
        if (end + 1 < text.length && text[end] === "." && isDecimal(at(text, end + 1))) continue;
        if (ipv4Parses(match[0])) found.push({ start, end, kind: "IP" });
      }
    }
    const colon = text.indexOf(":");
    if (colon >= 0 && text.indexOf(":", colon + 1) >= 0) found.push(...this.#v6(text)); // two colons (or "::")
    return found;
  }

  #v6(text: string): Finding[] {
    const found: Finding[] = [];
    const size = text.length;
    let colon = text.indexOf(":");
    while (colon !== -1) {
      if ((colon + 1 >= size || !V6_CHARS.has(text[colon + 1] as string)) && (colon === 0 || !V6_CHARS.has(text[colon - 1] as string))) {
        colon = text.indexOf(":", colon + 1);
        continue;
      }
      let start = colon;
      while (start > 0 && V6_CHARS.has(text[start - 1] as string) && colon - start < 40) start -= 1;
      let end = colon;
      while (end < size && V6_CHARS.has(text[end] as string) && end - start < 46) end += 1;
      while (end > colon && text[end - 1] === ".") end -= 1;
      const candidate = text.slice(start, end);
      if (
        (candidate.match(/:/g)?.length ?? 0) >= 2 &&
        !wordBefore(text, start) &&
        !wordAt(text, end) &&
        (end >= size || text[end] !== ":") &&
        isIPv6(candidate)
      ) {
        found.push({ start, end, kind: "IP" });
      }
      colon = text.indexOf(":", Math.max(end, colon + 1));
    }
    return found;
  }
}

function isDecimal(char: string): boolean {
  return /^\p{Nd}$/u.test(char);
}

/** The built-in detectors, in priority order (a card wins over a phone number on the same digits). */
export function builtinDetectors(options: { phoneRegion?: string } = {}): Detector[] {
  return [new EmailDetector(), new IbanDetector(), new CardDetector(), new IpDetector(), new PhoneDetector(options.phoneRegion ?? "US")];
}

const ANY_TRIGGER = new WeakMap<readonly Detector[], { readonly triggers: (RegExp | undefined)[]; readonly any: RegExp | undefined }>();

/** A pattern matching wherever some detector's trigger does; undefined when a detector has none
 * (or one with flags, which a union could not keep). Made once per detector list (and again if
 * the list's triggers changed). */
function anyTrigger(detectors: readonly Detector[]): RegExp | undefined {
  const known = ANY_TRIGGER.get(detectors);
  if (known !== undefined && known.triggers.length === detectors.length) {
    let i = 0;
    while (i < detectors.length && detectors[i]!.trigger === known.triggers[i]) i++;
    if (i === detectors.length) return known.any;
  }
  const triggers = detectors.map((detector) => detector.trigger);
  const usable = triggers.every((trigger) => trigger !== undefined && trigger.flags === "");
  const sources = usable ? [...new Set(triggers.map((trigger) => trigger!.source))] : [];
  const members = sources.map(classMembers);
  // triggers that are each one character (a class or a plain character) unite into one class: one
  // test per position instead of an alternation
  const any = !usable
    ? undefined
    : members.every((inner) => inner !== undefined)
      ? new RegExp(`[${members.join("")}]`)
      : new RegExp(sources.map((source) => `(?:${source})`).join("|"));
  ANY_TRIGGER.set(detectors, { triggers, any });
  return any;
}

/** What goes inside `[...]` to match what `source` matches, when it matches exactly one character
 * from a set (`[0-9:]`, `@`); else undefined. */
function classMembers(source: string): string | undefined {
  const bracket = /^\[((?:\\.|[^\]\\^])(?:\\.|[^\]\\])*)\]$/.exec(source);
  // a range could form across two members ("+-" then "0-9"): leave classes with an edge "-" apart
  if (bracket !== null) return bracket[1]!.startsWith("-") || bracket[1]!.endsWith("-") ? undefined : bracket[1];
  return /^[A-Za-z0-9@:#%&=_,;!~'"<> ]$/.test(source) ? source : undefined;
}

/** Every detector's findings, overlaps resolved: earliest first, then longest, then detector order. */
export function findAll(text: string, detectors: readonly Detector[]): Finding[] {
  // one scan of the text for what every detector needs (most text has none of it), then each trigger once
  const any = anyTrigger(detectors);
  if (any !== undefined && !any.test(text)) return [];
  let candidates: [number, number, number, Finding][] | undefined;
  // each distinct trigger tested once (detectors share them): bits of what was tested and what matched
  let tested = 0;
  let matched = 0;
  for (let rank = 0; rank < detectors.length; rank++) {
    const detector = detectors[rank]!;
    const trigger = detector.trigger;
    if (trigger !== undefined) {
      let at = 0;
      while (at < 31 && at < rank && detectors[at]!.trigger !== trigger) at++;
      const bit = 1 << at;
      if (at < 31 && (tested & bit) !== 0) {
        if ((matched & bit) === 0) continue;
      } else {
        const found = trigger.test(text);
        if (at < 31) {
          tested |= bit;
          if (found) matched |= bit;
        }
        if (!found) continue;
      }
    }
    for (const finding of detector.find(text)) {
      if (finding.start >= 0 && finding.start < finding.end && finding.end <= text.length) (candidates ??= []).push([finding.start, -finding.end, rank, finding]);
    }
  }
  if (candidates === undefined) return [];
  candidates.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  const kept: Finding[] = [];
  let end = 0;
  for (const [, , , finding] of candidates) {
    if (finding.start >= end) {
      kept.push(finding);
      end = finding.end;
    }
  }
  return kept;
}
