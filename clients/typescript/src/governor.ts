/** The framework-neutral half of every adapter: what the live agent object runs with becomes its
 * observed state, the desired state arriving from the control plane is applied to the object in
 * place, and every tool call passes one gate at the point the framework executes it.
 *
 * The gate fails closed: no approved state, a suspended or retired agent, a token the control
 * plane refused (401/403), an unreachable control plane past the stated grace, an amount it cannot
 * read, or a decision nobody answered in time: each refuses the call with a reason the model is
 * told (a `ToolRefused` error). */

import { setTimeout as sleep } from "node:timers/promises";

import { Client, Decision, DesiredState } from "./client.js";
import { AgentGovError, ApiError, Unreachable, isAuthFailure } from "./errors.js";

export const RECORD_ARGUMENTS = ["record", "order", "order_id", "customer", "customer_id", "id"];
const WINDOW_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** The gate refused a tool call; the message is what the model is told. */
export class ToolRefused extends AgentGovError {
  constructor(readonly tool: string, readonly reason: string) {
    super(`refused by governance: ${reason}`);
  }
}

/** An MCP server as the observed state reports it. */
export interface McpServerInfo { name: string; url?: string; command?: string }

/** How to read and change one framework's live agent object. */
export interface Binding {
  readonly framework: string;
  /** The names (the framework's) of the tools the model can call now, outside MCP servers. */
  tools(): string[];
  /** The model object (or name) the agent runs with now. */
  model(): unknown;
  /** Make the agent run with `model` from its next step on. */
  setModel(model: unknown): void;
  /** Take these tools (framework names) away from the model and the executor. */
  removeTools(names: Set<string>): void;
  /** The MCP servers the agent uses, with the tools each offers now (`tools` undefined when
   * the adapter has not seen the server list them: the control plane keeps the last listing). */
  mcpServers(): McpServerState[];
  /** Take these MCP servers away (by name). */
  removeMcpServers(names: Set<string>): void;
  /** Take these tools of one MCP server away from the model and the executor (the server may
   * still offer them; the agent no longer can call them). */
  removeMcpTools?(server: string, names: Set<string>): void;
  /** Read again what observation needs and cannot read synchronously (an MCP server's tool
   * listing); called before each observation of the loop. A failure keeps the last reading. */
  refresh?(): Promise<void>;
}

/** An MCP server as a binding sees it: where it is, and the tools it offers when known. */
export type McpServerState = McpServerInfo & { tools?: string[] };

/** What the gate enforces: copied from the desired state applied last. */
export interface Rules {
  tools: Set<string>;
  data: Record<string, any>[];
  grants: Record<string, any>[];
  actions: Record<string, Record<string, any>>;
  limits: Record<string, any>[];
  enforcement: Record<string, string>;
  mcpTools: Map<string, Set<string>>;
  running: boolean;
}

export function rulesFrom(desired: DesiredState): Rules {
  const spec = structuredClone(desired.spec ?? {});
  return {
    tools: new Set(spec.tools ?? []), data: spec.data ?? [], grants: spec.grants ?? [],
    actions: spec.actions ?? {}, limits: spec.limits ?? [], enforcement: spec.enforcement ?? {},
    mcpTools: new Map((spec.mcp_servers ?? []).map((server: any) => [server.name,
      new Set((server.tools ?? []).map((tool: any) => tool.name))])),
    running: desired.running === true,
  };
}

/** The name a model object answers to (a string is its own name). */
export function modelName(model: unknown): string | undefined {
  if (model === null || model === undefined) return undefined;
  if (typeof model === "string") return model || undefined;
  const object = model as Record<string, unknown>;
  for (const key of ["modelId", "modelName", "model", "name"]) {
    if (typeof object[key] === "string" && object[key]) return object[key] as string;
  }
  return (model as object).constructor?.name;
}

/** A finite, non-negative amount from a tool argument (a numeric string counts, as the tool's own
 * validation would take it); undefined when there is none or it is not such a number. */
export function readAmount(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value !== "string" || !/^\s*[0-9]+(\.[0-9]+)?\s*$/.test(value)) return undefined;
  const amount = Number(value);
  return Number.isFinite(amount) ? amount : undefined;
}

export function windowSeconds(per: string): number {
  return Number(per.slice(0, -1)) * (WINDOW_UNITS[per.slice(-1)] ?? 3600);
}

/** One tool call as the control plane sees it. */
export interface Call {
  tool: string;
  arguments: Record<string, unknown>;
  resource?: string;
  record?: string;
  amount?: number;
  server?: string;
}

export interface GovernorOptions {
  /** The governed agent's name (the client's agent by default). */
  name?: string;
  /** Framework tool name -> control plane name, where they differ. */
  toolNames?: Record<string, string>;
  /** Control plane tool name -> the data resource it touches. */
  resources?: Record<string, string>;
  /** Model objects by name, so a swapped model can be swapped back. */
  models?: Record<string, unknown>;
  /** Seconds an unreachable control plane is tolerated since the last contact (default 0). */
  failOpenSeconds?: number;
  /** Tools (control plane names) that may keep running while the control plane is unreachable
   * (never after a 401/403). */
  readOnlyTools?: string[];
  /** Seconds the agent waits for a human's answer (shown to the approver). */
  decisionWait?: number;
  decisionPoll?: number;
  /** Seconds between desired-state polls when the control plane answers at once. */
  interval?: number;
  /** Seconds a long-poll of the desired state may be held by the control plane. */
  longPoll?: number;
  /** Seconds between heartbeats (an unchanged report). */
  heartbeat?: number;
  log?: (level: "info" | "warn" | "error", message: string) => void;
}

/** Keeps one live agent object on its approved state and gates its tool calls. */
export class Governor {
  readonly agent: string;
  rules: Rules | null = null;
  applied: DesiredState | null = null;
  /** (tool, why) of every refused call, newest last. */
  readonly refused: { tool: string; reason: string }[] = [];
  /** The 401/403 that closed the gate for good (until `client.setToken` and `restart`). */
  authFailure: ApiError | null = null;
  /** When the control plane last answered (ms since the epoch). */
  lastContact = 0;
  /** Since when the control plane has not answered, if it does not now. */
  unreachableSince: number | null = null;
  private readonly options: Required<Omit<GovernorOptions, "name" | "log">>;
  private readonly models = new Map<string, unknown>();
  private readonly calls: { at: number; resource: string; record?: string }[] = [];
  private reported: string | null = null;
  private reportMcpServers = true;
  private lastReport = 0;
  private abort: AbortController | null = null;
  private loop: Promise<void> | null = null;
  private readonly log: NonNullable<GovernorOptions["log"]>;

  constructor(readonly binding: Binding, readonly client: Client, options: GovernorOptions = {}) {
    const agent = options.name ?? client.agent;
    if (!agent) throw new AgentGovError("name the governed agent: { name: 'refund-agent' }");
    this.agent = agent;
    this.options = {
      toolNames: options.toolNames ?? {}, resources: options.resources ?? {},
      models: options.models ?? {}, failOpenSeconds: options.failOpenSeconds ?? 0,
      readOnlyTools: options.readOnlyTools ?? [], decisionWait: options.decisionWait ?? 300,
      decisionPoll: options.decisionPoll ?? 1, interval: options.interval ?? 2,
      longPoll: options.longPoll ?? 25, heartbeat: options.heartbeat ?? 30,
    };
    if (!(this.options.failOpenSeconds >= 0)) {
      throw new AgentGovError("failOpenSeconds must be a number of seconds, 0 or more");
    }
    this.log = options.log ?? ((level, message) => {
      if (level !== "info") console.warn(`agentgov: ${message}`);
    });
    for (const [name, model] of Object.entries(this.options.models)) this.models.set(name, model);
    this.rememberModel();
  }

  /** The control plane's name of a framework tool. */
  governanceName(tool: string): string {
    return this.options.toolNames[tool] ?? tool;
  }

  private rememberModel(): void {
    const model = this.binding.model();
    const name = modelName(model);
    if (name && typeof model !== "string" && !this.models.has(name)) this.models.set(name, model);
  }

  // --- observe ---------------------------------------------------------------------------------

  /** The observed state, read from the live object and the gate. */
  observe(): Record<string, unknown> {
    this.rememberModel();
    const state: Record<string, unknown> = {
      framework: this.binding.framework,
      tools: [...new Set(this.binding.tools().map((tool) => this.governanceName(tool)))].sort(),
    };
    const model = modelName(this.binding.model());
    if (model) state.model = model;
    const servers = this.binding.mcpServers();
    if (servers.length && this.reportMcpServers) {
      state.mcp_servers = servers.map(({ name, url, command, tools }) => ({
        ...(url ? { name, transport: "http", url } : { name, transport: "stdio", command: command ?? "" }),
        ...(tools ? { tools: [...new Set(tools)].sort() } : {}),
      }));
    }
    const rules = this.rules;
    if (rules) {
      Object.assign(state, {
        data: structuredClone(rules.data), actions: structuredClone(rules.actions),
        limits: structuredClone(rules.limits), running: rules.running,
      });
      if (rules.grants.length) state.grants = structuredClone(rules.grants);
    }
    return state;
  }

  /** Report the observed state now. */
  async report(): Promise<void> {
    let state = this.observe();
    try {
      await this.contact(() => this.client.reportObserved(state, this.agent));
    } catch (error) {
      // A control plane that does not take the MCP servers in an observed state refuses the
      // key: report the rest (the servers' tools are still gated by the spec's mcp_servers).
      if (!(error instanceof ApiError) || !("mcp_servers" in state)
          || !error.pointers.some((pointer) => pointer.startsWith("/mcp_servers"))) throw error;
      this.log("warn", `${this.agent}: the control plane does not take mcp_servers as reported`);
      this.reportMcpServers = false;
      state = this.observe();
      await this.contact(() => this.client.reportObserved(state, this.agent));
    }
    this.reported = JSON.stringify(state);
    this.lastReport = Date.now();
  }

  /** Let the binding read what it reads asynchronously (an MCP server's listing). */
  private async refresh(): Promise<void> {
    try {
      await this.binding.refresh?.();
    } catch (error) {
      this.log("warn", `${this.agent}: ${(error as Error).message}`);
    }
  }

  // --- apply (corrections arrive here) ---------------------------------------------------------

  /** Make the live object match the desired state, in place. */
  apply(desired: DesiredState): void {
    const rules = rulesFrom(desired);
    const unapproved = new Set(this.binding.tools().filter(
      (tool) => !rules.tools.has(this.governanceName(tool))));
    if (unapproved.size) {
      this.log("warn", `${this.agent}: removing unapproved tool(s) ${[...unapproved].join(", ")}`);
      this.binding.removeTools(unapproved);
    }
    const servers = new Set(this.binding.mcpServers().map((server) => server.name)
      .filter((name) => !rules.mcpTools.has(name)));
    if (servers.size) {
      this.log("warn", `${this.agent}: removing unapproved MCP server(s) ${[...servers].join(", ")}`);
      this.binding.removeMcpServers(servers);
    }
    for (const { name, tools } of this.binding.mcpServers()) {
      const approved = rules.mcpTools.get(name);
      const extra = new Set((tools ?? []).filter((tool) => approved && !approved.has(tool)));
      if (extra.size && this.binding.removeMcpTools) {
        this.log("warn", `${this.agent}: removing unapproved tool(s) ${[...extra].join(", ")} `
          + `of MCP server ${name}`);
        this.binding.removeMcpTools(name, extra);
      }
    }
    const wanted = desired.spec?.model || undefined;
    const current = modelName(this.binding.model());
    if (wanted && current && wanted !== current) {
      if (this.models.has(wanted)) {
        this.log("warn", `${this.agent}: swapping model ${current} back to ${wanted}`);
        try {
          this.binding.setModel(this.models.get(wanted));
        } catch (error) {
          this.log("error", `${this.agent}: ${(error as Error).message}`);
        }
      } else {
        this.log("error", `${this.agent}: runs model ${current}, approved ${wanted}, and no `
          + `${wanted} model object is known (pass models: {...})`);
      }
    }
    this.rules = rules;
    this.applied = desired;
    if (!rules.running) this.log("warn", `${this.agent} is suspended: every tool call is refused`);
  }

  // --- contact with the control plane ----------------------------------------------------------

  /** Run one request to the control plane, keeping the gate's view of the contact: an answer
   * (even an error answer) is contact; 401/403 closes the gate for good; no answer starts the
   * unreachable clock. */
  private async contact<T>(send: () => Promise<T>): Promise<T> {
    try {
      const result = await send();
      this.reachable();
      return result;
    } catch (error) {
      if (isAuthFailure(error)) {
        if (!this.authFailure) {
          this.log("error", `${this.agent}: the control plane refused the agent's token `
            + `(${(error as ApiError).status}): every governed call is refused`);
        }
        this.authFailure = error as ApiError;
        this.reachable();
      } else if (error instanceof Unreachable) {
        this.unreachableSince ??= Date.now();
      } else if (error instanceof ApiError) {
        this.reachable();
      }
      throw error;
    }
  }

  private reachable(): void {
    this.lastContact = Date.now();
    this.unreachableSince = null;
  }

  // --- the loop --------------------------------------------------------------------------------

  /** Load the approved rules, report what the object runs with, then keep watching (long-polling
   * the desired state, applying each new one, reporting drift). Throws when the control plane
   * cannot be reached or refuses the token: the gate stays closed. */
  async start(): Promise<this> {
    if (this.loop) return this;
    const desired = await this.contact(() => this.client.desiredState({ agent: this.agent }));
    // The rules, not a correction: a tool present before the first report is reported as drift
    // and corrected by the control plane (with a finding), never removed silently here.
    this.rules = rulesFrom(desired);
    this.applied = desired;
    await this.refresh();
    await this.report();
    this.abort = new AbortController();
    this.loop = this.watch(this.abort.signal);
    return this;
  }

  /** Stop watching (the object keeps its current state; the gate keeps its rules). */
  async stop(): Promise<void> {
    this.abort?.abort();
    await this.loop?.catch(() => undefined);
    this.loop = null;
    this.abort = null;
  }

  /** One round of the loop: pull (long-poll), apply what changed, report drift or a heartbeat.
   * `signal` (the loop's, fired by stop()) ends a held poll at once. */
  async tick(wait = 0, signal?: AbortSignal): Promise<void> {
    const desired = await this.contact(
      () => this.client.desiredState({ agent: this.agent, wait, signal }));
    // Answered as stop() was called: applying it now would change (and report) an agent
    // nobody watches any more.
    if (signal?.aborted) return;
    await this.refresh();
    if (signal?.aborted) return;
    if (!this.applied || desired.sha256 !== this.applied.sha256) {
      this.log("info", `${this.agent}: applying generation ${desired.generation}`);
      this.apply(desired);
      await this.report();
      return;
    }
    const state = JSON.stringify(this.observe());
    if (state !== this.reported) {
      this.log("warn", `${this.agent} drifted from its desired state: reporting it`);
      await this.report();
    } else if (Date.now() - this.lastReport >= this.options.heartbeat * 1000) {
      await this.report();
    }
  }

  private async watch(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const started = Date.now();
      try {
        await this.tick(this.options.longPoll, signal);
      } catch (error) {
        if (signal.aborted) return; // stop(): the held poll ended with it
        if (this.authFailure) return; // nothing the loop can do: the gate stays closed
        // No approved state any more (404), or none the agent may run (409, 410: retired):
        // the gate closes rather than keep the last rules.
        if (error instanceof ApiError && [404, 409, 410].includes(error.status)) this.rules = null;
        this.log("warn", `${this.agent}: control plane: ${(error as Error).message}`);
      }
      const held = Date.now() - started;
      const rest = Math.max(0, this.options.interval * 1000 - held);
      try {
        await sleep(rest, undefined, { signal });
      } catch {
        return;
      }
    }
  }

  // --- the gate --------------------------------------------------------------------------------

  /** The control plane's view of a call. */
  describe(tool: string, args: unknown, server?: string): Call {
    const name = this.governanceName(tool);
    const argumentsObject = args && typeof args === "object" && !Array.isArray(args)
      ? args as Record<string, unknown> : {};
    const recordKey = RECORD_ARGUMENTS.find((key) => argumentsObject[key] !== undefined
      && argumentsObject[key] !== null && argumentsObject[key] !== "");
    return {
      tool: name, arguments: argumentsObject, resource: this.options.resources[name],
      record: recordKey ? String(argumentsObject[recordKey]) : undefined,
      amount: readAmount(argumentsObject.amount), server,
    };
  }

  private refuse(call: Call, reason: string): ToolRefused {
    this.log("warn", `${this.agent}: refused ${call.tool}: ${reason}`);
    this.refused.push({ tool: call.tool, reason });
    return new ToolRefused(call.tool, reason);
  }

  /** Refuse (throws ToolRefused) or allow one call before it runs; returns the decision that
   * allowed it when it needed one. Waits while a human decides. */
  async check(tool: string, args: unknown, server?: string): Promise<Decision | null> {
    const call = this.describe(tool, args, server);
    if (args !== undefined && args !== null && (typeof args !== "object" || Array.isArray(args))) {
      throw this.refuse(call, "the call's arguments are not an object");
    }
    if (this.authFailure) {
      throw this.refuse(call, `the control plane refused this agent's token (${this.authFailure
        .status} ${this.authFailure.code}): every governed call is refused`);
    }
    const rules = this.rules;
    if (!rules) throw this.refuse(call, "the agent has no approved state");
    if (this.unreachableSince !== null) {
      const away = (Date.now() - this.lastContact) / 1000;
      const readOnly = this.options.readOnlyTools.includes(call.tool) && !server;
      if (!readOnly && away > this.options.failOpenSeconds) {
        throw this.refuse(call, `the control plane has been unreachable for ${away.toFixed(1)}s `
          + `(tolerated: ${this.options.failOpenSeconds}s)`);
      }
    }
    if (!rules.running) throw this.refuse(call, "the agent is suspended");
    if (server !== undefined) {
      if (!rules.mcpTools.get(server)?.has(call.tool)) {
        throw this.refuse(call, `tool ${call.tool} of MCP server ${server} is not approved for `
          + "this agent");
      }
    } else if (!rules.tools.has(call.tool)) {
      throw this.refuse(call, `tool ${call.tool} is not approved for this agent`);
    }
    if (call.resource !== undefined) {
      const approved = new Set([...rules.data, ...rules.grants].map((entry) => entry.resource));
      if (!approved.has(call.resource)) throw this.refuse(call, `no approved access to ${call.resource}`);
    }
    this.checkLimits(call, rules);
    return this.checkAction(call, rules);
  }

  private checkLimits(call: Call, rules: Rules): void {
    if (call.resource === undefined) return;
    const now = Date.now();
    for (const limit of rules.limits) {
      if (limit.resource !== call.resource) continue;
      const since = now - windowSeconds(limit.per || "1h") * 1000;
      const seen = this.calls.filter((c) => c.at >= since && c.resource === call.resource);
      if (typeof limit.max_calls === "number" && seen.length >= limit.max_calls) {
        throw this.refuse(call, `more than ${limit.max_calls} calls to ${call.resource} per `
          + `${limit.per || "1h"}`);
      }
      if (typeof limit.max_same_record === "number" && call.record
          && seen.filter((c) => c.record === call.record).length >= limit.max_same_record) {
        throw this.refuse(call, `record ${call.record} read ${limit.max_same_record} times already`);
      }
    }
    this.calls.push({ at: now, resource: call.resource, record: call.record });
    while (this.calls.length && now - this.calls[0].at > 86_400_000) this.calls.shift();
  }

  private async checkAction(call: Call, rules: Rules): Promise<Decision | null> {
    // A tool whose action has a rule is judged by the control plane's one decision function,
    // from the call's own arguments: the gate reads no amount itself, so a value the rule needs
    // and the model spelled another way is the server's deny, not the gate's guess.
    const limits = rules.actions[call.tool];
    if (!limits || (limits.approval_above == null && limits.max == null)) return null;
    const mode = rules.enforcement.actions || rules.enforcement.default || "correct";
    const wait = mode === "block" ? 0 : this.options.decisionWait;
    let decision: Decision;
    try {
      decision = await this.contact(() => this.client.decide({
        tool: call.tool, action: call.tool, arguments: call.arguments,
        waitSeconds: wait, resource: call.resource, record: call.record,
        poll: this.options.decisionPoll,
      }, this.agent));
    } catch (error) {
      if (this.authFailure) {
        throw this.refuse(call, `the control plane refused this agent's token (${this.authFailure
          .status}): every governed call is refused`);
      }
      throw this.refuse(call, `no decision could be had: ${(error as Error).message}`);
    }
    if (decision.outcome === "allow") return decision;
    if (mode === "log") {
      this.log("warn", `${this.agent}: ${call.tool} not allowed (${decision.outcome}) but `
        + "enforcement is log");
      return null;
    }
    // pending: still waiting when our wait ran out; expired: the control plane ended it when
    // our wait (wait_seconds) ran out. Either way nobody answered.
    const why = decision.outcome === "pending" || decision.status === "expired"
      ? `no human answered within ${wait}s` : `denied (${decision.rule || decision.status})`;
    throw this.refuse(call, `${call.tool}: ${why}`);
  }

  /** The behaviour events of a call that ran (queued; never waits). */
  record(tool: string, args: unknown, decision: Decision | null, server?: string): void {
    const call = this.describe(tool, args, server);
    try {
      this.client.recordEvent("tool_call", { tool: call.tool, resource: call.resource,
        record: call.record, agent: this.agent });
      if (this.rules && call.tool in this.rules.actions) {
        this.client.recordEvent("action", { action: call.tool, amount: call.amount,
          resource: call.resource, record: call.record, agent: this.agent,
          decision_id: decision?.id, approved_by: decision?.decided_by ?? undefined });
      }
    } catch (error) {
      this.log("warn", `${this.agent}: event not queued: ${(error as Error).message}`);
    }
  }

  /** Check, run, record: around one tool call at the framework's execution point. */
  async gate<T>(tool: string, args: unknown, run: () => T | Promise<T>, server?: string): Promise<T> {
    const decision = await this.check(tool, args, server);
    const result = await run();
    this.record(tool, args, decision, server);
    return result;
  }
}
