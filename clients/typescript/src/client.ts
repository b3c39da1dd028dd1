/** The HTTP client of the control plane's v1 API, for agents and their platforms. */

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import {
  AgentGovError, ApiError, RateLimited, Stopped, Unreachable, errorFromResponse,
} from "./errors.js";

export const VERSION = "0.1.0";
export const EVENT_KINDS = ["tool_call", "data_access", "action"] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);
const RETRY_STATUSES_IDEMPOTENT = new Set([500, 502, 503, 504]);
// The connection was never made: the request never left this machine, so a retry cannot do
// anything twice.
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH",
  "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_SOCKET_CONNECT"]);

/** Exponential backoff with full jitter. 429 and requests that never left are retried for
 * every method; lost answers and 5xx only for idempotent requests; other 4xx never. */
export interface RetryPolicy { attempts: number; base: number; cap: number }
export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, base: 0.25, cap: 8 };

export function retryDelay(policy: RetryPolicy, attempt: number): number {
  return Math.random() * Math.min(policy.cap, policy.base * 2 ** (attempt - 1));
}

/** The effective desired state of one agent, as served with its ETag. */
export interface DesiredState {
  agent: string;
  generation: number;
  spec: Record<string, any>;
  running: boolean;
  sha256: string;
  etag: string;
  corrections: string[];
}

/** The control plane's receipt for a reported observed state. */
export interface Observation { changed: boolean; sha256: string; observed_at: string }

/** A runtime decision: `allow`, `deny`, or `pending` while no human has answered. */
export interface Decision {
  id: string;
  outcome: "allow" | "deny" | "pending";
  rule: string | null;
  status: string;
  expires_at: string | null;
  decided_by: string | null;
  raw: Record<string, unknown>;
}

export interface EventsResult {
  accepted: number; duplicates: number; rejected: number; results: Record<string, unknown>[];
}

/** One behaviour event as the events API takes it. */
export interface BehaviourEvent {
  id: string; agent: string; ts: string; kind: EventKind;
  tool?: string; resource?: string; record?: string; action?: string; amount?: number;
  approved_by?: string; decision_id?: string; trace_id?: string; span_id?: string;
}

export interface DecisionRequest {
  /** The tool the agent is about to call (the control plane's name). */
  tool: string;
  /** The action; the tool's name unless the spec names it otherwise. */
  action?: string;
  /** The call's full arguments: the control plane reads the amount from them. */
  arguments: Record<string, unknown>;
  /** How long the agent will wait for a human (shown to the approver), seconds. */
  waitSeconds: number;
  resource?: string;
  record?: string;
  /** The amount the gate read from the arguments, for control planes that take it apart. */
  amount?: number;
  /** Seconds between polls while pending. */
  poll?: number;
}

export interface ClientOptions {
  agent?: string;
  /** Seconds before a request without an answer is given up. */
  timeout?: number;
  retry?: Partial<RetryPolicy>;
  eventBatchSize?: number;
  eventQueueSize?: number;
  /** Seconds between event batches. */
  eventFlushInterval?: number;
  eventRetryBase?: number;
  eventRetryCap?: number;
  fetch?: typeof fetch;
}

interface RequestOptions {
  body?: unknown;
  /** A body sent as it is, with its content type (e.g. YAML manifests). */
  text?: { content: string; type: string };
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  idempotent?: boolean;
  retry?: boolean;
  timeout?: number;
  /** The caller's: when it fires the request ends at once with `Stopped` (a held long-poll
   * too), and is not retried. */
  signal?: AbortSignal;
}

/** Ends when either signal does (AbortSignal.any, from Node.js 20.3). */
function either(timeout: AbortSignal, caller?: AbortSignal): AbortSignal {
  return caller ? AbortSignal.any([timeout, caller]) : timeout;
}

/** The raw answer of a successful request (status < 400, or 304). */
export interface RawResponse { status: number; headers: Headers; text: string; json(): any }

function notSent(error: unknown): boolean {
  let cause: any = error;
  for (let depth = 0; cause && depth < 4; depth += 1) {
    if (typeof cause.code === "string" && NOT_SENT_CODES.has(cause.code)) return true;
    cause = cause.cause;
  }
  return false;
}

function describe(error: unknown): string {
  const parts: string[] = [];
  let cause: any = error;
  for (let depth = 0; cause && depth < 4; depth += 1) {
    parts.push(cause.code ? `${cause.code}: ${cause.message}` : String(cause.message ?? cause));
    cause = cause.cause;
  }
  return parts.join(" <- ");
}

/** Behaviour events, sent in batches in the background. Memory stays bounded while the control
 * plane is down (the oldest are dropped first, and counted); a batch that got no answer is sent
 * again with the same ids, which the server answers `duplicate`, so nothing counts twice. */
export class EventBatcher {
  accepted = 0;
  duplicates = 0;
  rejected = 0;
  dropped = 0;
  failed = 0;
  attempts = 0;
  lastError: unknown = null;
  private queue: BehaviourEvent[] = [];
  private inFlight: BehaviourEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private failures = 0;
  private closed = false;

  constructor(private readonly send: (events: BehaviourEvent[]) => Promise<EventsResult>,
              private readonly options: { batchSize: number; maxQueue: number;
                interval: number; retryBase: number; retryCap: number }) {}

  get queued(): number { return this.queue.length + this.inFlight.length; }

  add(event: BehaviourEvent): void {
    if (this.closed) { this.dropped += 1; return; }
    if (this.queue.length >= this.options.maxQueue) { this.queue.shift(); this.dropped += 1; }
    this.queue.push(event);
    this.schedule(this.queue.length >= this.options.batchSize ? 0 : this.options.interval);
  }

  private schedule(seconds: number): void {
    if (this.timer !== null || this.sending !== null) return;
    this.timer = setTimeout(() => { this.timer = null; void this.pump(); }, seconds * 1000);
    this.timer.unref();
  }

  private pump(): Promise<void> {
    if (this.sending) return this.sending;
    this.sending = (async () => {
      try {
        while (this.queue.length || this.inFlight.length) {
          if (!this.inFlight.length) this.inFlight = this.queue.splice(0, this.options.batchSize);
          this.attempts += 1;
          try {
            const result = await this.send(this.inFlight);
            this.accepted += result.accepted;
            this.duplicates += result.duplicates;
            this.rejected += result.rejected;
            this.inFlight = [];
            this.failures = 0;
          } catch (error) {
            this.lastError = error;
            const retryable = !(error instanceof ApiError) || error instanceof RateLimited
              || error.status >= 500;
            if (!retryable) { // refused as a whole (400, 401, 403): never sent again
              this.failed += this.inFlight.length;
              this.inFlight = [];
              continue;
            }
            this.failures += 1;
            if (this.closed) return;
            const delay = Math.random() * Math.min(this.options.retryCap,
              this.options.retryBase * 2 ** (this.failures - 1));
            await sleep(delay * 1000, undefined, { ref: false });
          }
        }
      } finally {
        this.sending = null;
      }
    })();
    return this.sending;
  }

  /** Send every event queued so far; false if `timeout` seconds ran out first. */
  async flush(timeout = 10): Promise<boolean> {
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    const deadline = Date.now() + timeout * 1000;
    while (this.queued > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      const pending = this.pump();
      const timer = sleep(left, "timeout", { ref: false });
      if ((await Promise.race([pending.then(() => "done"), timer])) === "timeout") return false;
    }
    return true;
  }

  /** Send what is left (for up to `timeout` seconds), then take no more events. */
  async close(timeout = 10): Promise<void> {
    await this.flush(timeout);
    this.closed = true;
    this.dropped += this.queue.length;
    this.queue = [];
  }
}

/** One control plane, one token. `agent` is the agent that agent-facing calls act for. */
export class Client {
  readonly agent: string | undefined;
  readonly retry: RetryPolicy;
  readonly events: EventBatcher;
  baseUrl: string;
  private token: string;
  private readonly timeout: number;
  private readonly fetchImpl: typeof fetch;
  private readonly desiredCache = new Map<string, DesiredState>();

  constructor(url: string, token: string, options: ClientOptions = {}) {
    if (!url) throw new AgentGovError("the control plane's URL is required");
    if (!token) throw new AgentGovError("a token is required");
    this.baseUrl = url.replace(/\/+$/, "");
    this.token = token;
    this.agent = options.agent;
    this.timeout = options.timeout ?? 10;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.fetchImpl = options.fetch ?? fetch;
    this.events = new EventBatcher((batch) => this.postEvents(batch), {
      batchSize: options.eventBatchSize ?? 500, maxQueue: options.eventQueueSize ?? 10_000,
      interval: options.eventFlushInterval ?? 1, retryBase: options.eventRetryBase ?? 0.5,
      retryCap: options.eventRetryCap ?? 30,
    });
  }

  /** Configured by AGENTGOV_URL, AGENTGOV_TOKEN and (optionally) AGENTGOV_AGENT. */
  static fromEnv(options: ClientOptions = {}): Client {
    const url = process.env.AGENTGOV_URL;
    const token = process.env.AGENTGOV_TOKEN;
    if (!url) throw new AgentGovError("set AGENTGOV_URL in the environment");
    if (!token) throw new AgentGovError("set AGENTGOV_TOKEN in the environment");
    return new Client(url, token, { agent: process.env.AGENTGOV_AGENT || undefined, ...options });
  }

  /** Use another token from now on (a rotated one). */
  setToken(token: string): void {
    if (!token) throw new AgentGovError("a token is required");
    this.token = token;
  }

  /** Send the events still queued (waiting up to `timeout` seconds). */
  async close(timeout = 10): Promise<void> {
    await this.events.close(timeout);
  }

  // --- the request core --------------------------------------------------------------------

  /** Send one request, retrying only what is safe to retry; throw the typed error of an error
   * answer, or Unreachable. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse> {
    const idempotent = options.idempotent ?? IDEMPOTENT_METHODS.has(method.toUpperCase());
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = {
      Authorization: `Token ${this.token}`, Accept: "application/json",
      "User-Agent": `agentgov-client-ts/${VERSION}`, ...options.headers,
    };
    let body: string | undefined;
    if (options.text !== undefined) {
      body = options.text.content;
      headers["Content-Type"] = options.text.type;
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    const stopped = () => new Stopped(`${method} ${url.origin}${url.pathname}: stopped`);
    for (let attempt = 1; ; attempt += 1) {
      if (options.signal?.aborted) throw stopped();
      const lastTry = options.retry === false || attempt >= this.retry.attempts;
      let delay: number;
      let response: Response;
      try {
        response = await this.fetchImpl(url, {
          method, headers, body,
          signal: either(AbortSignal.timeout((options.timeout ?? this.timeout) * 1000),
            options.signal),
        });
      } catch (error) {
        if (options.signal?.aborted) throw stopped();
        const safe = notSent(error) || idempotent;
        if (lastTry || !safe) {
          throw new Unreachable(`${method} ${url.origin}${url.pathname}: ${describe(error)}`);
        }
        await sleep(retryDelay(this.retry, attempt) * 1000);
        continue;
      }
      let text: string;
      try {
        text = await response.text();
      } catch (error) { // the answer was lost half way
        if (options.signal?.aborted) throw stopped();
        if (lastTry || !idempotent) {
          throw new Unreachable(`${method} ${url.origin}${url.pathname}: ${describe(error)}`);
        }
        await sleep(retryDelay(this.retry, attempt) * 1000);
        continue;
      }
      if (response.status < 400) {
        return { status: response.status, headers: response.headers, text,
          json: () => JSON.parse(text) };
      }
      const failure = errorFromResponse(response.status, response.headers, text);
      const safe = failure instanceof RateLimited
        || (idempotent && RETRY_STATUSES_IDEMPOTENT.has(response.status));
      if (lastTry || !safe) throw failure;
      delay = retryDelay(this.retry, attempt);
      if (failure.retryAfter !== null) delay = Math.min(failure.retryAfter, this.retry.cap);
      await sleep(delay * 1000);
    }
  }

  agentPath(agent: string | undefined, suffix: string): string {
    const name = agent ?? this.agent;
    if (!name) throw new AgentGovError("no agent: pass it here or to new Client(...)");
    return `/api/v1/agents/${encodeURIComponent(name)}/${suffix}`;
  }

  /** Register agents / propose versions from YAML or JSON manifests (all or nothing). */
  async applyManifests(text: string, options: { dryRun?: boolean } = {}): Promise<any> {
    return (await this.request("POST", "/api/v1/manifests", {
      text: { content: text, type: "application/yaml" },
      query: options.dryRun ? { dry_run: 1 } : undefined,
    })).json();
  }

  // --- for agents and their platforms -------------------------------------------------------

  /** The effective desired state. Sends the last ETag; 304 means unchanged and the cached
   * object is returned. `wait` (seconds) long-polls: the control plane holds the request until
   * the state changes or the wait ends (a control plane without long-polling answers at once).
   * `signal` ends a held poll at once (with `Stopped`). */
  async desiredState(options: { agent?: string; wait?: number; signal?: AbortSignal } = {},
  ): Promise<DesiredState> {
    const path = this.agentPath(options.agent, "desired-state");
    const cached = this.desiredCache.get(path);
    const headers: Record<string, string> = cached?.etag ? { "If-None-Match": cached.etag } : {};
    const wait = cached?.etag && options.wait ? Math.max(0, Math.floor(options.wait)) : 0;
    const response = await this.request("GET", path, {
      headers, query: wait ? { wait } : undefined,
      timeout: this.timeout + wait, signal: options.signal,
    });
    if (response.status === 304 && cached) return cached;
    if (response.status === 304) throw new AgentGovError("304 for a state never fetched");
    const body = response.json();
    const state: DesiredState = {
      agent: body.agent, generation: body.generation, spec: body.spec, running: body.running,
      sha256: body.sha256, etag: response.headers.get("etag") ?? "",
      corrections: body.corrections ?? [],
    };
    this.desiredCache.set(path, state);
    return state;
  }

  /** Report what the agent really runs with. Safe to repeat: an unchanged state only counts as
   * a heartbeat. */
  async reportObserved(state: Record<string, unknown>, agent?: string): Promise<Observation> {
    const response = await this.request("PUT", this.agentPath(agent, "observed-state"),
      { body: state });
    const body = response.json();
    return { changed: body.changed, sha256: body.sha256, observed_at: body.observed_at };
  }

  /** Replace one key (`mcp_servers`) of the latest observed state and keep the rest. */
  async reportObservedPart(key: string, value: unknown, agent?: string): Promise<Observation> {
    const response = await this.request("PUT", this.agentPath(agent, "observed-state"),
      { query: { part: key }, body: { [key]: value } });
    const body = response.json();
    return { changed: body.changed, sha256: body.sha256, observed_at: body.observed_at };
  }

  /** Queue one behaviour event for the background sender; returns its id (a UUID unless given).
   * Never waits on the network. */
  recordEvent(kind: EventKind, fields: Partial<Omit<BehaviourEvent, "kind">> = {}): string {
    if (!EVENT_KINDS.includes(kind)) {
      throw new AgentGovError(`kind must be one of ${EVENT_KINDS.join(", ")}; got ${kind}`);
    }
    const agent = fields.agent ?? this.agent;
    if (!agent) throw new AgentGovError("no agent: pass it here or to new Client(...)");
    const event: Record<string, unknown> = {
      ...fields, id: fields.id ?? randomUUID(), agent, ts: fields.ts ?? new Date().toISOString(),
      kind,
    };
    for (const key of Object.keys(event)) if (event[key] === undefined) delete event[key];
    this.events.add(event as unknown as BehaviourEvent);
    return event.id as string;
  }

  /** Send a batch now (retried: the ids make a repeat harmless). */
  async sendEvents(events: BehaviourEvent[]): Promise<EventsResult> {
    return (await this.request("POST", "/api/v1/events", { body: events, idempotent: true })).json();
  }

  private async postEvents(events: BehaviourEvent[]): Promise<EventsResult> {
    // The batcher does its own backoff, so one attempt per call here.
    return (await this.request("POST", "/api/v1/events",
      { body: events, idempotent: true, retry: false })).json();
  }

  /** Wait until every event queued so far is answered; false if `timeout` ran out. */
  flushEvents(timeout = 10): Promise<boolean> { return this.events.flush(timeout); }

  /** Ask whether the agent may make this call now. A pending answer (a human must sign off) is
   * polled until `waitSeconds` pass; a decision still pending then is returned pending, which is
   * not permission. */
  async decide(request: DecisionRequest, agent?: string): Promise<Decision> {
    const body: Record<string, unknown> = {
      tool: request.tool, action: request.action ?? request.tool, arguments: request.arguments,
      wait_seconds: request.waitSeconds > 0 ? request.waitSeconds : undefined,
      resource: request.resource, record: request.record,
      amount: request.amount,
    };
    for (const key of Object.keys(body)) if (body[key] === undefined) delete body[key];
    // Not idempotent: each call makes a new decision, so only unsent requests are retried.
    const response = await this.request("POST", this.agentPath(agent, "decisions"), { body });
    const decision = toDecision(response.json());
    return this.waitForDecision(decision, request.waitSeconds, request.poll ?? 1);
  }

  /** A decision as it stands now. */
  async decision(id: string): Promise<Decision> {
    return toDecision((await this.request("GET", `/api/v1/decisions/${encodeURIComponent(id)}`))
      .json());
  }

  /** Poll a pending decision until a human answers, it expires, or `timeout` seconds pass. */
  async waitForDecision(decision: Decision | string, timeout: number, poll = 1): Promise<Decision> {
    let current = typeof decision === "string" ? await this.decision(decision) : decision;
    const deadline = Date.now() + timeout * 1000;
    while (current.outcome === "pending") {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(poll * 1000, left));
      current = await this.decision(current.id);
    }
    return current;
  }
}

export function toDecision(body: any): Decision {
  const outcome = body?.outcome;
  if (typeof body?.id !== "string" || !["allow", "deny", "pending"].includes(outcome)) {
    throw new AgentGovError(`not a decision: ${JSON.stringify(body).slice(0, 200)}`);
  }
  return { id: body.id, outcome, rule: body.rule ?? null, status: body.status ?? "",
    expires_at: body.expires_at ?? null, decided_by: body.decided_by ?? null, raw: body };
}
