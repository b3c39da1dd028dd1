/** LangGraph.js (`@langchain/langgraph`): prebuilt agents (`createReactAgent`) and any graph with
 * `ToolNode`s, subgraphs included. Every `ToolNode` found in the graph is gated where it executes
 * a tool (its `runTool`): the tool it is about to run has its `invoke` routed through the gate
 * first, however and whenever the tool got into the node's `tools`, and a refusal becomes the
 * node's error `ToolMessage` the model reads. What the nodes hold is what is reported; a
 * correction removes tools from the nodes in place.
 *
 *   const app = createReactAgent({ llm, tools });
 *   const governed = governLangGraph({ client, name: "refund-agent", graph: app, model: llm });
 *   await governed.start();
 *   await app.invoke({ messages: [...] });
 *
 * A tool a custom node calls itself (not through a ToolNode) cannot be seen or gated here: give
 * such tools to a ToolNode, or check them with `governed.governor.gate(...)` where they run.
 * This module imports nothing from LangGraph: it recognises the objects by their shape. */

import type { Client } from "../client.js";
import { AgentGovError } from "../errors.js";
import { Binding, Governor, GovernorOptions, McpServerInfo, modelName } from "../governor.js";

/** The shape of a LangChain tool this adapter relies on. */
interface LcTool { name: string; invoke: (input: any, config?: any) => Promise<unknown> }
/** The shape of a ToolNode. */
interface ToolNodeLike {
  tools: LcTool[];
  runTool: (call: any, config: any, state?: any) => Promise<unknown>;
}

export interface LangGraphOptions extends GovernorOptions {
  client: Client;
  /** A compiled graph (e.g. from `createReactAgent`); its ToolNodes (and its subgraphs') are found. */
  graph?: unknown;
  /** ToolNodes to govern besides those found in `graph`. */
  toolNodes?: unknown[];
  /** The chat model the graph runs (reported by its model name). */
  model?: unknown;
}

function isToolNode(value: unknown): value is ToolNodeLike {
  const node = value as ToolNodeLike;
  return Boolean(node) && Array.isArray(node.tools) && typeof node.runTool === "function";
}

/** Every ToolNode of a compiled graph, its subgraphs included. */
export function findToolNodes(graph: unknown, seen = new Set<unknown>()): ToolNodeLike[] {
  if (!graph || typeof graph !== "object" || seen.has(graph)) return [];
  seen.add(graph);
  if (isToolNode(graph)) return [graph];
  const nodes = (graph as { nodes?: Record<string, unknown> }).nodes;
  if (!nodes || typeof nodes !== "object") return [];
  const found: ToolNodeLike[] = [];
  for (const node of Object.values(nodes)) {
    const bound = (node as { bound?: unknown })?.bound ?? node;
    found.push(...findToolNodes(bound, seen));
  }
  return found;
}

class LangGraphBinding implements Binding {
  readonly framework = "langgraph-js";
  constructor(readonly owner: GovernedGraph) {}
  tools(): string[] {
    return [...new Set(this.owner.toolNodes.flatMap((node) => node.tools.map((tool) => tool.name)))];
  }
  model(): unknown { return this.owner.model; }
  setModel(model: unknown): void {
    // A compiled graph holds its model in a closure: it cannot be swapped in place.
    throw new AgentGovError(`the graph's model cannot be swapped in place (wanted ${modelName(model)})`);
  }
  removeTools(names: Set<string>): void {
    for (const node of this.owner.toolNodes) {
      for (let i = node.tools.length - 1; i >= 0; i -= 1) {
        if (names.has(node.tools[i].name)) node.tools.splice(i, 1);
      }
    }
  }
  mcpServers(): (McpServerInfo & { tools: string[] })[] { return []; }
  removeMcpServers(): void {}
}

/** A LangGraph.js graph governed by the control plane. */
export class GovernedGraph {
  readonly toolNodes: ToolNodeLike[];
  model: unknown;
  readonly governor: Governor;
  private readonly gated = new WeakSet<LcTool>();

  constructor(options: LangGraphOptions) {
    this.toolNodes = [...new Set([...findToolNodes(options.graph),
      ...(options.toolNodes ?? []).filter(isToolNode)])];
    if (!this.toolNodes.length) {
      // Nothing to gate: running it would be running ungoverned.
      throw new AgentGovError("no ToolNode found in the graph: the adapter gates tools where a "
        + "ToolNode runs them (createReactAgent's, or your own); pass toolNodes: [...]");
    }
    this.model = options.model;
    this.governor = new Governor(new LangGraphBinding(this), options.client, options);
    for (const node of this.toolNodes) this.install(node);
  }

  /** Route the node's tool executions through the gate. */
  private install(node: ToolNodeLike): void {
    const runTool = node.runTool;
    const governed = this;
    node.runTool = function governedRunTool(this: ToolNodeLike, call, config, state) {
      const tool = node.tools.find((candidate) => candidate.name === call?.name);
      if (tool) governed.gateTool(tool);
      return runTool.call(node, call, config, state);
    };
  }

  private gateTool(tool: LcTool): void {
    if (this.gated.has(tool)) return;
    const invoke = tool.invoke;
    const governor = this.governor;
    tool.invoke = function governedInvoke(input: any, config?: any) {
      const args = input && typeof input === "object" && input.type === "tool_call" ? input.args : input;
      return governor.gate(tool.name, args, () => invoke.call(tool, input, config));
    };
    this.gated.add(tool);
  }

  async start(): Promise<this> {
    await this.governor.start();
    return this;
  }

  async stop(): Promise<void> {
    await this.governor.stop();
  }
}

/** Govern a LangGraph.js graph (its ToolNodes) or ToolNodes of your own. */
export function governLangGraph(options: LangGraphOptions): GovernedGraph {
  return new GovernedGraph(options);
}
