/** JSON as the audit format hashes it. Canonical JSON (docs/audit-format.md) is the control
 * plane's: keys sorted, no whitespace, non-ASCII written as itself. Numbers are kept exactly as
 * the file spells them (`800.0` stays `800.0`), because the hash covers their spelling, and a
 * JavaScript number would lose it. */

/** A JSON number with its spelling. */
export class JsonNumber {
  constructor(readonly text: string) {}
  get value(): number { return Number(this.text); }
  toJSON(): number { return Number(this.text); }
}

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[]
  | { [key: string]: JsonValue };

export class JsonError extends Error {}

/** Parse JSON text, keeping numbers' spelling; duplicate keys are an error (the hash could not
 * say which one was meant). */
export function parseJson(text: string): JsonValue {
  let at = 0;
  const fail = (what: string): never => { throw new JsonError(`${what} at character ${at}`); };
  const space = () => { while (at < text.length && " \t\n\r".includes(text[at])) at += 1; };
  const value = (): JsonValue => {
    space();
    const c = text[at];
    if (c === "{") {
      at += 1;
      const object: Record<string, JsonValue> = Object.create(null);
      space();
      if (text[at] === "}") { at += 1; return object; }
      for (;;) {
        space();
        if (text[at] !== "\"") fail("expected a key");
        const key = string();
        if (Object.hasOwn(object, key)) fail(`duplicate key ${JSON.stringify(key)}`);
        space();
        if (text[at] !== ":") fail("expected ':'");
        at += 1;
        object[key] = value();
        space();
        if (text[at] === ",") { at += 1; continue; }
        if (text[at] === "}") { at += 1; return object; }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      at += 1;
      const array: JsonValue[] = [];
      space();
      if (text[at] === "]") { at += 1; return array; }
      for (;;) {
        array.push(value());
        space();
        if (text[at] === ",") { at += 1; continue; }
        if (text[at] === "]") { at += 1; return array; }
        fail("expected ',' or ']'");
      }
    }
    if (c === "\"") return string();
    for (const [word, result] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, at)) { at += word.length; return result; }
    }
    const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(at, at + 400));
    if (!match) fail("unexpected character");
    at += match![0].length;
    return new JsonNumber(match![0]);
  };
  const string = (): string => {
    const start = at;
    at += 1;
    while (at < text.length && text[at] !== "\"") {
      if (text[at] === "\\") at += 1;
      else if (text.charCodeAt(at) < 0x20) fail("control character in a string");
      at += 1;
    }
    if (at >= text.length) fail("unterminated string");
    at += 1;
    return JSON.parse(text.slice(start, at)) as string;
  };
  const result = value();
  space();
  if (at !== text.length) fail("trailing characters");
  return result;
}

function compareCodePoints(a: string, b: string): number {
  // Python sorts keys by code point; JavaScript's default sort is by UTF-16 unit.
  const left = [...a].map((c) => c.codePointAt(0)!);
  const right = [...b].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(left.length, right.length); i += 1) {
    if (left[i] !== right[i]) return left[i] - right[i];
  }
  return left.length - right.length;
}

/** Canonical JSON text of a value (from `parseJson`, or plain JavaScript values). */
export function canonical(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (value instanceof JsonNumber) return value.text;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new JsonError("NaN and infinities are not JSON");
    if (!Number.isInteger(value)) throw new JsonError("a non-integer number needs its spelling");
    return String(value);
  }
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (typeof value === "object") {
    const object = value as Record<string, unknown>;
    const keys = Object.keys(object).filter((k) => object[k] !== undefined).sort(compareCodePoints);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(object[k])}`).join(",")}}`;
  }
  throw new JsonError(`not JSON: ${typeof value}`);
}

export function isObject(value: unknown): value is Record<string, JsonValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    && !(value instanceof JsonNumber);
}

/** An integer field (a JSON number without fraction or exponent), or undefined. */
export function integer(value: unknown): number | undefined {
  if (!(value instanceof JsonNumber) || !/^-?[0-9]+$/.test(value.text)) return undefined;
  const number = Number(value.text);
  return Number.isSafeInteger(number) ? number : undefined;
}
