/** OpenAI Agents SDK for JavaScript (`@openai/agents`): an `Agent`, the agents it hands off to,
 * and their MCP servers. Every tool the runner can execute is handed to it by the agent's
 * `getAllTools` (its own tools and its MCP servers' tools); the governed agent's `getAllTools`
 * gives each function tool back with its `invoke` routed through the gate, so a tool is gated
 * however and whenever it got onto the agent, and so are the tools of every agent reachable by
 * handoff (governed at `start()` and again at each observation, clones included). A refusal is
 * the tool's output the model reads. Tools the adapter cannot gate (hosted, computer, shell,
 * apply-patch) are refused at `start()` and never offered to the model.
 *
 *   const governed = governOpenAIAgent({ client, name: "refund-agent", agent });
 *   await governed.start();
 *   await run(agent, "refund order-0003 120");
 *
 * This module imports nothing from the SDK: it works on the objects' shapes. */

import type { Client } from "../client.js";
import { AgentGovError } from "../errors.js";
import { Binding, Governor, GovernorOptions, McpServerInfo, ToolRefused } from "../governor.js";

interface SdkTool { type: string; name: string; invoke?: (context: any, input: string, details?: any) => Promise<unknown> }
interface SdkAgent {
  name: string;
  model: unknown;
  tools: SdkTool[];
  handoffs?: unknown[];
  mcpServers?: { name?: string; [key: string]: unknown }[];
  getAllTools: (runContext?: any) => Promise<SdkTool[]>;
  clone: (config: any) => SdkAgent;
}

export interface OpenAIAgentsOptions extends GovernorOptions {
  client: Client;
  /** The agent the runner starts with. */
  agent: unknown;
}

const MARK = Symbol.for("agentgov.governed");

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
  mcpServers(): (McpServerInfo & { tools: string[] })[] {
    return reachable(this.owner.agent).flatMap((agent) => agent.mcpServers ?? [])
      .map((server) => ({ name: String(server.name ?? "mcp"), tools: [] }));
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

  constructor(options: OpenAIAgentsOptions) {
    if (!isAgent(options.agent)) throw new AgentGovError("agent: an @openai/agents Agent is needed");
    this.agent = options.agent;
    this.governor = new Governor(new OpenAIAgentsBinding(this), options.client, options);
    this.installAll();
  }

  /** Govern every agent reachable by handoff (run again at each observation, for new ones). */
  installAll(): void {
    for (const agent of reachable(this.agent)) this.install(agent);
  }

  private ungatable(agent: SdkAgent): SdkTool[] {
    return agent.tools.filter((tool) => tool.type !== "function");
  }

  private install(agent: SdkAgent): void {
    if ((agent as any)[MARK]) return;
    const governed = this;
    const getAllTools = agent.getAllTools;
    const clone = agent.clone;
    Object.defineProperty(agent, MARK, { value: true });
    agent.getAllTools = async function governedTools(this: SdkAgent, runContext?: any) {
      governed.installAll(); // handoffs added since
      const own = new Set(agent.tools);
      const tools = await getAllTools.call(agent, runContext);
      return tools.flatMap((tool) => {
        if (tool.type !== "function" || typeof tool.invoke !== "function") {
          governed.governor.refused.push({ tool: tool.name, reason: `a ${tool.type} tool cannot be gated` });
          return []; // never offered: it would run ungoverned
        }
        return [governed.gate(tool, own.has(tool) ? undefined : governed.mcpServerOf(tool.name))];
      });
    };
    agent.clone = function governedClone(this: SdkAgent, config: any) {
      const copy = clone.call(agent, config);
      governed.install(copy);
      return copy;
    };
  }

  /** The approved MCP server that offers a tool of this name ("unapproved" when none does). */
  mcpServerOf(name: string): string {
    for (const [server, tools] of this.governor.rules?.mcpTools ?? []) if (tools.has(name)) return server;
    return "(an MCP server the spec does not approve)";
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
