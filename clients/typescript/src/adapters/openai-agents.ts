/** OpenAI Agents SDK for JavaScript (`@openai/agents`): an `Agent`, the agents it hands off to,
 * and their MCP servers. Every tool the runner can execute is handed to it by the agent's
 * `getAllTools` (its own tools and its MCP servers' tools); the governed agent's `getAllTools`
 * gives each function tool back with its `invoke` routed through the gate, so a tool is gated
 * however and whenever it got onto the agent, and so are the tools of every agent reachable by
 * handoff (governed at `start()` and again at each observation, clones included). A refusal is
 * the tool's output the model reads. Tools the adapter cannot gate (hosted, computer, shell,
 * apply-patch) are refused at `start()` and never offered to the model.
 *
 * An MCP server's tools (`mcpServers`: `MCPServerStreamableHttp`, `MCPServerStdio`, ...) are
 * reported under the server as it lists them (`server.listTools()`, read again at each
 * observation and each time the runner lists them) and gated against that server's approved
 * tools: a call the spec does not approve never reaches the server. Connect the servers before
 * `start()`.
 *
 *   const governed = governOpenAIAgent({ client, name: "refund-agent", agent });
 *   await governed.start();
 *   await run(agent, "refund order-0003 120");
 *
 * This module imports nothing from the SDK: it works on the objects' shapes. */

import type { Client } from "../client.js";
import { AgentGovError } from "../errors.js";
import { Binding, Governor, GovernorOptions, McpServerInfo, McpServerState, ToolRefused } from "../governor.js";

interface SdkTool { type: string; name: string; invoke?: (context: any, input: string, details?: any) => Promise<unknown> }
/** The shape of an SDK MCP server this adapter relies on (`MCPServerStreamableHttp` keeps its
 * options in `underlying.params`). */
interface SdkMcpServer {
  name?: string;
  listTools?: () => Promise<{ name: string }[]>;
  params?: Record<string, unknown>;
  underlying?: { params?: Record<string, unknown> };
  [key: string]: unknown;
}
interface SdkAgent {
  name: string;
  model: unknown;
  tools: SdkTool[];
  handoffs?: unknown[];
  mcpServers?: SdkMcpServer[];
  getAllTools: (runContext?: any) => Promise<SdkTool[]>;
  clone: (config: any) => SdkAgent;
}

export interface OpenAIAgentsOptions extends GovernorOptions {
  client: Client;
  /** The agent the runner starts with. */
  agent: unknown;
}

const MARK = Symbol.for("agentgov.governed");
const UNLISTED = "(one the adapter has not seen list its tools)";

/** The name the SDK gives an MCP server (the manifest's `mcp_servers` name when set so). */
function serverName(server: SdkMcpServer): string {
  return String(server.name ?? "mcp");
}

function isAgent(value: unknown): value is SdkAgent {
  const agent = value as SdkAgent;
  return Boolean(agent) && Array.isArray(agent.tools) && typeof agent.getAllTools === "function";
}

/** The agents a run can reach from `root` by handoffs (a Handoff object holds its `agent`). */
function reachable(root: SdkAgent): SdkAgent[] {
  const found: SdkAgent[] = [];
  const queue: unknown[] = [root];
  while (queue.length) {
    const next = queue.shift();
    const agent = isAgent(next) ? next : (next as { agent?: unknown })?.agent;
    if (!isAgent(agent) || found.includes(agent)) continue;
    found.push(agent);
    queue.push(...(agent.handoffs ?? []));
  }
  return found;
}

class OpenAIAgentsBinding implements Binding {
  readonly framework = "openai-agents-js";
  constructor(readonly owner: GovernedOpenAIAgent) {}
  tools(): string[] {
    this.owner.installAll(); // agents reached by a handoff added since are gated from now on
    return [...new Set(reachable(this.owner.agent).flatMap((agent) => agent.tools.map((t) => t.name)))];
  }
  model(): unknown { return this.owner.agent.model; }
  setModel(model: unknown): void { this.owner.agent.model = model; }
  removeTools(names: Set<string>): void {
    for (const agent of reachable(this.owner.agent)) {
      for (let i = agent.tools.length - 1; i >= 0; i -= 1) {
        if (names.has(agent.tools[i].name)) agent.tools.splice(i, 1);
      }
    }
  }
  mcpServers(): McpServerState[] {
    return this.owner.servers().map((server) => this.owner.describeServer(server));
  }
  removeMcpTools(server: string, names: Set<string>): void {
    const withheld = this.owner.withheld.get(server) ?? new Set<string>();
    for (const name of names) withheld.add(name);
    this.owner.withheld.set(server, withheld);
  }
  async refresh(): Promise<void> {
    await this.owner.listServers();
  }
  removeMcpServers(names: Set<string>): void {
    for (const agent of reachable(this.owner.agent)) {
      if (agent.mcpServers) {
        agent.mcpServers = agent.mcpServers.filter((server) => !names.has(String(server.name)));
      }
    }
  }
}

/** An OpenAI Agents SDK agent (and the agents it hands off to) governed by the control plane. */
export class GovernedOpenAIAgent {
  readonly agent: SdkAgent;
  readonly governor: Governor;
  /** MCP server name -> its tools a correction took away (never offered to the model again). */
  readonly withheld = new Map<string, Set<string>>();
  /** The tool names each MCP server offered at its last listing. */
  private readonly listed = new WeakMap<SdkMcpServer, string[]>();
  /** Servers whose listings this governed agent records (one server may serve two agents). */
  private readonly watched = new WeakSet<SdkMcpServer>();

  constructor(options: OpenAIAgentsOptions) {
    if (!isAgent(options.agent)) throw new AgentGovError("agent: an @openai/agents Agent is needed");
    const owner = (options.agent as any)[MARK] as GovernedOpenAIAgent | undefined;
    if (owner) {
      // Governed already (by itself or as another agent's handoff): its calls are gated by that
      // governor, under that agent's name and approvals; a second one would gate nothing.
      throw new AgentGovError(`agent: this Agent is governed already, as ${owner.governor.agent}; `
        + "govern each Agent object once (make a new Agent for another governed agent)");
    }
    this.agent = options.agent;
    this.governor = new Governor(new OpenAIAgentsBinding(this), options.client, options);
    this.installAll();
  }

  /** Govern every agent reachable by handoff (run again at each observation, for new ones). */
  installAll(): void {
    for (const agent of reachable(this.agent)) this.install(agent);
  }

  /** The MCP servers of every agent reachable by handoff, each once. */
  servers(): SdkMcpServer[] {
    return [...new Set(reachable(this.agent).flatMap((agent) => agent.mcpServers ?? []))];
  }

  /** A server as the observed state reports it: name, where, and the tools it offered at its
   * last listing less those a correction took away (unknown before it was listed). */
  describeServer(server: SdkMcpServer): McpServerState {
    const name = serverName(server);
    const params = server.underlying?.params ?? server.params ?? {};
    const where: McpServerInfo = { name };
    if (typeof params.url === "string") where.url = params.url;
    else if (typeof params.fullCommand === "string") where.command = params.fullCommand;
    else if (typeof params.command === "string") {
      where.command = [params.command, ...(Array.isArray(params.args) ? params.args : [])].join(" ");
    }
    const tools = this.listed.get(server);
    const withheld = this.withheld.get(name);
    return { ...where, tools: tools?.filter((tool) => !withheld?.has(tool)) };
  }

  /** Record each listing of the server's tools (the runner's included) as it happens. */
  private watch(server: SdkMcpServer): void {
    if (this.watched.has(server) || typeof server.listTools !== "function") return;
    const listTools = server.listTools;
    const listed = this.listed;
    this.watched.add(server);
    server.listTools = async function governedListing(this: SdkMcpServer) {
      const tools = await listTools.call(server);
      listed.set(server, tools.map((tool) => String(tool.name)));
      return tools;
    };
  }

  /** List every MCP server's tools now (a server that cannot answer keeps its last listing). */
  async listServers(): Promise<void> {
    const servers = this.servers();
    for (const server of servers) this.watch(server);
    const failed = (await Promise.allSettled(servers.map((server) => server.listTools?.())))
      .flatMap((outcome, i) => (outcome.status === "rejected"
        ? [`${serverName(servers[i])}: ${(outcome.reason as Error)?.message ?? outcome.reason}`] : []));
    if (failed.length) throw new AgentGovError(`MCP server(s) not listed: ${failed.join("; ")}`);
  }

  /** The MCP server of `agent` whose last listing offers a tool of this name. */
  private serverOf(agent: SdkAgent, name: string): string | undefined {
    const server = (agent.mcpServers ?? []).find((s) => this.listed.get(s)?.includes(name));
    return server ? serverName(server) : undefined;
  }

  private ungatable(agent: SdkAgent): SdkTool[] {
    return agent.tools.filter((tool) => tool.type !== "function");
  }

  private install(agent: SdkAgent): void {
    if ((agent as any)[MARK]) return; // gated already: by this governor, or its own
    const governed = this;
    const getAllTools = agent.getAllTools;
    const clone = agent.clone;
    Object.defineProperty(agent, MARK, { value: this });
    agent.getAllTools = async function governedTools(this: SdkAgent, runContext?: any) {
      governed.installAll(); // handoffs added since
      for (const server of agent.mcpServers ?? []) governed.watch(server); // servers added since
      const own = new Set(agent.tools);
      const tools = await getAllTools.call(agent, runContext);
      return tools.flatMap((tool) => {
        if (tool.type !== "function" || typeof tool.invoke !== "function") {
          governed.governor.refused.push({ tool: tool.name, reason: `a ${tool.type} tool cannot be gated` });
          return []; // never offered: it would run ungoverned
        }
        if (own.has(tool)) return [governed.gate(tool)];
        // An MCP server's tool, gated against the server that listed it (one the adapter has
        // not seen list it, e.g. from the SDK's cache before it was governed, approves nothing).
        const server = governed.serverOf(agent, tool.name) ?? UNLISTED;
        if (governed.withheld.get(server)?.has(tool.name)) return []; // taken away by a correction
        return [governed.gate(tool, server)];
      });
    };
    agent.clone = function governedClone(this: SdkAgent, config: any) {
      const copy = clone.call(agent, config);
      governed.install(copy);
      return copy;
    };
  }

  private gate(tool: SdkTool, server?: string): SdkTool {
    const governor = this.governor;
    const invoke = tool.invoke!;
    const gated = Object.create(tool) as SdkTool;
    gated.invoke = async (context: any, input: string, details?: any) => {
      let args: unknown;
      try {
        args = input === "" ? {} : JSON.parse(input);
      } catch {
        args = input; // not an object: the gate refuses it
      }
      try {
        return await governor.gate(tool.name, args, () => invoke.call(tool, context, input, details), server);
      } catch (error) {
        if (error instanceof ToolRefused) return error.message; // what the model reads
        throw error;
      }
    };
    return gated;
  }

  /** Refuses to start an agent with tools that cannot be gated; then as every adapter. */
  async start(): Promise<this> {
    const ungatable = reachable(this.agent).flatMap((agent) => this.ungatable(agent)
      .map((tool) => `${agent.name}: ${tool.name} (${tool.type})`));
    if (ungatable.length) {
      throw new AgentGovError(`tools that cannot be gated where they run: ${ungatable.join(", ")}; `
        + "remove them or put them behind agentctl mcp-proxy");
    }
    await this.governor.start();
    return this;
  }

  async stop(): Promise<void> {
    await this.governor.stop();
  }
}

export function governOpenAIAgent(options: OpenAIAgentsOptions): GovernedOpenAIAgent {
  return new GovernedOpenAIAgent(options);
}
