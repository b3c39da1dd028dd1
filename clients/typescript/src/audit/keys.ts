/** Trusted Ed25519 keys for the offline verifier, as the auditor configures them: never taken
 * from the file being verified. A key's id is the first 16 hex characters of SHA-256 of its raw
 * 32-byte public key. */

import { KeyObject, createHash, createPublicKey, verify } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** A key the auditor trusts, with the range of tree sizes it may sign. */
export interface TrustedKey {
  keyId: string;
  raw: Buffer;
  key: KeyObject;
  /** The smallest and largest tree size a checkpoint it signs may have. */
  minSize: number;
  maxSize: number;
  /** Where the trust comes from (the auditor's configuration, or a proven rotation). */
  source: string;
}

export class KeyError extends Error {}

export function keyIdOf(raw: Buffer): string {
  return createHash("sha256").update(raw).digest("hex").slice(0, 16);
}

export function keyFromRaw(raw: Buffer, source: string, minSize = 0,
                           maxSize = Number.MAX_SAFE_INTEGER): TrustedKey {
  if (raw.length !== 32) throw new KeyError(`${source}: an Ed25519 public key is 32 bytes, got ${raw.length}`);
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: "der",
    type: "spki" });
  return { keyId: keyIdOf(raw), raw, key, minSize, maxSize, source };
}

function strictBase64(text: string): Buffer | undefined {
  const clean = text.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(clean) || clean.length % 4 !== 0) return undefined;
  return Buffer.from(clean, "base64");
}

function fromPublished(entry: any, source: string): TrustedKey {
  if (typeof entry !== "object" || entry === null || typeof entry.public_key !== "string") {
    throw new KeyError(`${source}: expected a published key {"key_id", "public_key", ...}`);
  }
  if (entry.algorithm !== undefined && entry.algorithm !== "ed25519") {
    throw new KeyError(`${source}: only ed25519 keys verify offline (got ${entry.algorithm})`);
  }
  const raw = strictBase64(entry.public_key);
  if (!raw) throw new KeyError(`${source}: public_key is not base64`);
  const size = (name: string, fallback: number): number => {
    const value = entry[name];
    if (value === undefined || value === null) return fallback;
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new KeyError(`${source}: ${name} must be a tree size (a whole number, 0 or more)`);
    }
    return value;
  };
  const key = keyFromRaw(raw, source, size("min_size", 0), size("max_size", Number.MAX_SAFE_INTEGER));
  if (entry.key_id !== undefined && entry.key_id !== key.keyId) {
    throw new KeyError(`${source}: key_id ${entry.key_id} is not this key's id (${key.keyId})`);
  }
  return key;
}

/** `--public-key KEY`: the base64 of the raw 32 bytes, a PEM (SubjectPublicKeyInfo) file, or a
 * JSON file with one published key, a list of them, or {"keys": [...]}; a published key may carry
 * `min_size`/`max_size`, the tree sizes it may sign. */
export function loadKeys(spec: string): TrustedKey[] {
  const raw = strictBase64(spec);
  if (raw && raw.length === 32) return [keyFromRaw(raw, "--public-key")];
  if (!existsSync(spec)) throw new KeyError(`--public-key ${spec}: neither a base64 key nor a file`);
  const text = readFileSync(spec, "utf8");
  if (text.includes("-----BEGIN")) {
    let key: KeyObject;
    try {
      key = createPublicKey(text);
    } catch (error) {
      throw new KeyError(`${spec}: not a PEM public key (${(error as Error).message})`);
    }
    if (key.asymmetricKeyType !== "ed25519") throw new KeyError(`${spec}: not an Ed25519 key`);
    const der = key.export({ format: "der", type: "spki" });
    return [keyFromRaw(Buffer.from(der.subarray(der.length - 32)), spec)];
  }
  let document: any;
  try {
    document = JSON.parse(text);
  } catch {
    throw new KeyError(`${spec}: neither PEM nor JSON`);
  }
  const list = Array.isArray(document) ? document : Array.isArray(document?.keys) ? document.keys
    : [document];
  return list.map((entry: unknown, i: number) => fromPublished(entry, `${spec}[${i}]`));
}

export function verifySignature(key: TrustedKey, message: string, signature: unknown): boolean {
  if (typeof signature !== "string") return false;
  const bytes = strictBase64(signature);
  if (!bytes || bytes.length !== 64) return false;
  try {
    return verify(null, Buffer.from(message, "utf8"), key.key, bytes);
  } catch {
    return false;
  }
}
