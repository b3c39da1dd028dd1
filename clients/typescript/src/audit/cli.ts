#!/usr/bin/env node
/** `agentgov-audit verify FILE... [--public-key KEY]... [--witness DIR] [--chain-only]`: the
 * offline auditor's verifier (docs/audit-format.md), with no server and no dependency. Its exit
 * statuses and first lines are `agentctl audit verify`'s. */

import { KeyError, TrustedKey, loadKeys } from "./keys.js";
import { UsageError, firstLine, verifyFiles } from "./verify.js";

export const EXIT_PROVEN = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_CHAIN_ONLY = 3;

const HELP = `usage: agentgov-audit verify FILE... [--public-key KEY]... [--witness DIR] [--chain-only]
                              [--format jsonl|csv|evidence] [--head HASH]

Verify an audit export (JSONL or CSV) or an evidence bundle offline. Several FILEs are archive
files (oldest first) and then the live export (or a CSV export of it), verified as one trail.

  --public-key KEY  a key you trust: base64 of the raw 32-byte Ed25519 key, a PEM file, or a JSON
                    file of published keys (each may say min_size/max_size, the tree sizes it may
                    sign); repeat for several. Keys in the file itself are never trusted.
  --witness DIR     a directory witness (checkpoint-<size>.json): every copy in it is held
                    against the file, and every checkpoint of the file must be in it; with
                    --public-key its signed copies also prove a CSV or entries-only JSONL, and
                    an evidence bundle must prove each smaller copy a prefix of its tree (its
                    consistency proofs). A directory that is not there holds no copies.
  --chain-only      check only the hash chain of a CSV or entries-only JSONL (or of a CSV after
                    archives): nothing is proven by a signature.
  --head HASH       also require the trail to end at this hash.

First line and exit status:
  OK N entries, head H                              0  every entry proven by a trusted signature
  CHAIN ONLY N entries, head H: chain only, ...     3  --chain-only: nothing proven by a signature
  FAILED at seq S: REASON: ...  or  BROKEN at seq S 1  (on stderr) the first thing wrong:
                                                       edited, deleted, truncated, rehashed,
                                                       witness-mismatch, witness-missing,
                                                       unknown-key, retired-key, unsigned
  error: ...                                        2  a usage mistake (a v1 export without
                                                       --public-key; a CSV with neither
                                                       --public-key nor --chain-only)
Given a key, whatever no trusted signature covers fails as "unsigned".
`;

export function main(argv: string[], out = process.stdout, err = process.stderr): number {
  if (argv[0] === "--help" || argv[0] === "-h" || argv.length === 0) {
    (argv.length ? out : err).write(HELP);
    return argv.length ? EXIT_PROVEN : EXIT_USAGE;
  }
  if (argv[0] !== "verify") {
    err.write(`unknown command ${argv[0]}\n${HELP}`);
    return EXIT_USAGE;
  }
  const files: string[] = [];
  const keys: TrustedKey[] = [];
  let witness: string | undefined;
  let chainOnly = false;
  let format: "jsonl" | "csv" | "evidence" | undefined;
  let head: string | undefined;
  const args = argv.slice(1);
  try {
    for (let i = 0; i < args.length; i += 1) {
      const arg = args[i];
      const [flag, inline] = arg.startsWith("--") && arg.includes("=")
        ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
      const value = (): string => {
        const v = inline ?? args[++i];
        if (v === undefined) throw new UsageError(`${flag} needs a value`);
        return v;
      };
      if (flag === "--public-key") keys.push(...loadKeys(value()));
      else if (flag === "--witness") witness = value();
      else if (flag === "--chain-only") chainOnly = true;
      else if (flag === "--head") head = value();
      else if (flag === "--format") {
        const v = value();
        if (v !== "jsonl" && v !== "csv" && v !== "evidence") throw new UsageError(`--format ${v}?`);
        format = v;
      } else if (flag === "--help" || flag === "-h") { out.write(HELP); return EXIT_PROVEN; }
      else if (flag.startsWith("-")) throw new UsageError(`unknown option ${flag}`);
      else files.push(arg);
    }
    if (!files.length) throw new UsageError("give a FILE (or archive files, then the live export)");
    if (files.length > 1 && format) throw new UsageError("--format is for one FILE");
    const verdict = verifyFiles(files, { keys, witness, chainOnly, format });
    if (verdict.failure) {
      err.write(`${firstLine(verdict)}\n`);
      return EXIT_FAILED;
    }
    out.write([firstLine(verdict), ...verdict.skipped, ...verdict.proven].map((l) => `${l}\n`).join(""));
    if (head !== undefined && head !== verdict.head) {
      err.write(`HEAD MISMATCH: the file ends at ${verdict.head}, expected ${head}\n`);
      return EXIT_FAILED;
    }
    return verdict.outcome === "chain-only" ? EXIT_CHAIN_ONLY : EXIT_PROVEN;
  } catch (error) {
    if (error instanceof UsageError || error instanceof KeyError) {
      err.write(`error: ${error.message}\n`);
      return EXIT_USAGE;
    }
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      err.write(`error: ${(error as Error).message}\n`);
      return EXIT_USAGE;
    }
    throw error;
  }
}

process.exitCode = main(process.argv.slice(2));
