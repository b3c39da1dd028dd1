/** Typed errors. An `ApiError` carries the control plane's JSON error document
 * (`{"error": {"code", "message", "details": [{"pointer", "message"}]}}`). */

/** Anything this client throws. */
export class AgentGovError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No answer from the control plane (refused, timed out, connection dropped). */
export class Unreachable extends AgentGovError {}

/** The caller stopped the request (its `signal` fired): ended at once, never retried. */
export class Stopped extends AgentGovError {}

/** One problem of an error, with the JSON pointer of what it is about. */
export interface ErrorDetail {
  pointer: string;
  message: string;
  [extra: string]: unknown;
}

/** The control plane answered with an error status. */
export class ApiError extends AgentGovError {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[];
  readonly retryAfter: number | null;
  readonly detailMessage: string;

  constructor(status: number, code: string, message: string, details: ErrorDetail[] = [],
              retryAfter: number | null = null) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.detailMessage = message;
    this.details = details;
    this.retryAfter = retryAfter;
  }

  /** The JSON pointers the error names, in order. */
  get pointers(): string[] {
    return this.details.map((detail) => detail.pointer);
  }
}

/** 400: the request is malformed. */
export class BadRequest extends ApiError {}
/** 401: no token, or a wrong, expired or revoked one. */
export class Unauthenticated extends ApiError {}
/** 403: the token may not do this. */
export class Forbidden extends ApiError {}
/** 404: no such agent, proposal or decision. */
export class NotFound extends ApiError {}
/** 409: a conflict, e.g. a stale generation or no approved state yet. */
export class Conflict extends ApiError {}
/** 413: the body is over the server's limit. */
export class TooLarge extends ApiError {}
/** 422: invalid content, or a guardrail's denial. */
export class Invalid extends ApiError {}
/** 429: too many requests; `retryAfter` says when to come back, if the server said. */
export class RateLimited extends ApiError {}
/** 5xx: the control plane failed or is unavailable. */
export class ServerError extends ApiError {}

const BY_STATUS: Record<number, typeof ApiError> = {
  400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
  413: TooLarge, 422: Invalid, 429: RateLimited,
};

/** The Retry-After header in seconds (only the delta-seconds form). */
export function retryAfterSeconds(headers: Headers): number | null {
  const value = headers.get("retry-after");
  if (value === null || value.trim() === "") return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) ? Math.max(0, seconds) : null;
}

/** The typed error for an error answer, from its JSON document when it has one. */
export function errorFromResponse(status: number, headers: Headers, text: string): ApiError {
  let code = `http_${status}`;
  let message = text.slice(0, 500) || `HTTP ${status}`;
  let details: ErrorDetail[] = [];
  try {
    const document = JSON.parse(text)?.error;
    if (document && typeof document.code === "string" && typeof document.message === "string") {
      code = document.code;
      message = document.message;
      details = Array.isArray(document.details)
        ? document.details.map((d: Record<string, unknown>) => ({
          ...d, pointer: String(d?.pointer ?? ""), message: String(d?.message ?? ""),
        }))
        : [];
    }
  } catch {
    // not JSON: keep the text as the message
  }
  const Kind = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new Kind(status, code, message, details, retryAfterSeconds(headers));
}

/** Whether an error means the control plane refused this agent's credentials (never tolerated). */
export function isAuthFailure(error: unknown): boolean {
  return error instanceof Unauthenticated || error instanceof Forbidden;
}
