/** Vercel AI SDK (`ai`): a governed agent holds the model and the tool set that `generateText`,
 * `streamText` or an `Experimental_Agent` are given. The tool set is live: every tool in it,
 * however and whenever it was put there (including MCP tools from an MCP client), is gated where
 * the SDK executes it, because the SDK reads each tool through the governed set, which hands out
 * the tool with its `execute` wrapped. What is in the set is what is reported; a correction from
 * the control plane removes tools (and MCP servers) from it and swaps the model back in place.
 *
 *   const agent = governVercelAI({ client, name: "refund-agent", model, tools });
 *   await agent.start();
 *   await generateText({ model: agent.model, tools: agent.tools, prompt, stopWhen: stepCountIs(4) });
 *
 * This module imports nothing from `ai`: it works on the SDK's plain tool objects. */

import type { Client } from "../client.js";
import { Binding, Governor, GovernorOptions, McpServerInfo, McpServerState, ToolRefused } from "../governor.js";

/** The shape of an AI SDK tool that this adapter relies on. */
export interface SdkTool {
  execute?: (input: any, options: any) => unknown;
  [key: string]: unknown;
}
export type ToolSet = Record<string, SdkTool>;

interface McpEntry { info: McpServerInfo; tools: ToolSet }

export interface VercelAIOptions extends GovernorOptions {
  client: Client;
  /** The language model (an object with `modelId`, or a gateway model id string). */
  model: unknown;
  /** The tools the model may call, by the name the model calls them. */
  tools?: ToolSet;
  /** MCP servers: each one's tools as its MCP client lists them (`await mcpClient.tools()`). */
  mcpServers?: { server: McpServerInfo; tools: ToolSet }[];
}

class VercelAIBinding implements Binding {
  readonly framework = "vercel-ai";
  constructor(readonly owner: GovernedAgent) {}
  tools(): string[] { return Object.keys(this.owner.rawTools); }
  model(): unknown { return this.owner.model; }
  setModel(model: unknown): void { this.owner.model = model; }
  removeTools(names: Set<string>): void {
    for (const name of names) delete this.owner.rawTools[name];
  }
  mcpServers(): McpServerState[] {
    return [...this.owner.mcp.values()].map(({ info, tools }) => ({
      ...info, tools: Object.keys(tools) }));
  }
  removeMcpServers(names: Set<string>): void {
    for (const name of names) this.owner.mcp.delete(name);
  }
  removeMcpTools(server: string, names: Set<string>): void {
    const entry = this.owner.mcp.get(server);
    for (const name of names) if (entry) delete entry.tools[name];
  }
}

/** A Vercel AI SDK agent governed by the control plane. */
export class GovernedAgent {
  /** The model to hand to `generateText`/`streamText` (swapped back in place on correction). */
  model: unknown;
  /** The tools as the owner put them (ungated): read by observation. */
  readonly rawTools: ToolSet;
  /** MCP servers by name, with their tools. */
  readonly mcp = new Map<string, McpEntry>();
  readonly governor: Governor;
  /** The tool set to hand to the SDK: live, every tool gated at execution. Tools set on it are
   * governed from that moment on (and reported as drift if not approved). */
  readonly tools: ToolSet;
  private readonly gated = new WeakMap<SdkTool, SdkTool>();

  constructor(options: VercelAIOptions) {
    this.model = options.model;
    this.rawTools = { ...(options.tools ?? {}) };
    for (const { server, tools } of options.mcpServers ?? []) this.addMcpServer(server, tools);
    this.governor = new Governor(new VercelAIBinding(this), options.client, options);
    this.tools = this.liveToolSet();
  }

  /** Add an MCP server's tools (as its MCP client lists them); they are gated against the
   * server's approved tools in the spec's `mcp_servers`, and reported under the server. */
  addMcpServer(server: McpServerInfo, tools: ToolSet): void {
    if (!server?.name) throw new TypeError("an MCP server needs a name (the manifest's)");
    this.mcp.set(server.name, { info: { ...server }, tools: { ...tools } });
  }

  /** Where a tool name comes from: an MCP server's name, or undefined for the agent's own. */
  private locate(name: string): { tool: SdkTool; server?: string } | undefined {
    if (Object.hasOwn(this.rawTools, name)) return { tool: this.rawTools[name] };
    for (const [server, entry] of this.mcp) {
      if (Object.hasOwn(entry.tools, name)) return { tool: entry.tools[name], server };
    }
    return undefined;
  }

  private names(): string[] {
    const names = new Set(Object.keys(this.rawTools));
    for (const entry of this.mcp.values()) for (const name of Object.keys(entry.tools)) names.add(name);
    return [...names];
  }

  /** The tool with its `execute` routed through the gate (a tool the SDK could not run here,
   * one without `execute`, is refused rather than handed back to the caller ungoverned). */
  private gate(name: string, tool: SdkTool, server?: string): SdkTool {
    const cached = this.gated.get(tool);
    if (cached) return cached;
    const governor = this.governor;
    const execute = tool.execute;
    const wrapped: SdkTool = {
      ...tool,
      execute: async (input: unknown, options: unknown) => governor.gate(name, input, () => {
        if (typeof execute !== "function") {
          throw new ToolRefused(name, `tool ${name} has no execute function, so it cannot be `
            + "gated where it runs");
        }
        return execute.call(tool, input, options);
      }, server),
    };
    this.gated.set(tool, wrapped);
    return wrapped;
  }

  private liveToolSet(): ToolSet {
    const owner = this;
    return new Proxy(this.rawTools, {
      get(_target, key) {
        if (typeof key !== "string") return undefined;
        const found = owner.locate(key);
        return found ? owner.gate(key, found.tool, found.server) : undefined;
      },
      has(_target, key) { return typeof key === "string" && owner.locate(key) !== undefined; },
      ownKeys() { return owner.names(); },
      getOwnPropertyDescriptor(_target, key) {
        if (typeof key !== "string") return undefined;
        const found = owner.locate(key);
        if (!found) return undefined;
        return { value: owner.gate(key, found.tool, found.server), writable: true,
          enumerable: true, configurable: true };
      },
      set(target, key, value) {
        if (typeof key !== "string") return false;
        target[key] = value as SdkTool;
        return true;
      },
      deleteProperty(target, key) {
        if (typeof key === "string") delete target[key];
        return true;
      },
      defineProperty(target, key, descriptor) {
        if (typeof key !== "string" || !("value" in descriptor)) return false;
        target[key] = descriptor.value as SdkTool;
        return true;
      },
    });
  }

  /** Load the approved state, report, and keep watching. */
  async start(): Promise<this> {
    await this.governor.start();
    return this;
  }

  async stop(): Promise<void> {
    await this.governor.stop();
  }
}

/** Govern a Vercel AI SDK agent: its model, its tools, its MCP servers' tools. */
export function governVercelAI(options: VercelAIOptions): GovernedAgent {
  return new GovernedAgent(options);
}
