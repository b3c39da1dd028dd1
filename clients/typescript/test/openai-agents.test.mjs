// The OpenAI Agents SDK adapter against a real control plane: a real `Agent` run by the real
// `Runner` on a scripted model (offline, no key), its tools and its handoff's tools governed
// where the runner invokes them, an MCP server's too: the SDK's `MCPServerStreamableHttp` talks
// to a real MCP server.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { Agent, MCPServerStreamableHttp, Runner, Usage, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";

import { Client } from "agentgov";
import { governOpenAIAgent } from "agentgov/openai-agents";

import { FAST, api, bobAnswers, control, env, eventually, findings, mcpServerRan, relay,
  noDecisionLeftOpen } from "./harness.mjs";

setTracingDisabled(true); // the SDK's trace exporter would call the network

/** Stands in for gpt-4.1: asks for the calls it is given next, then answers with the results. */
class ScriptedModel {
  // Named as the approved model (as a real model object is): the governor reports the model by
  // its name, and an unnamed one read as the class's name, a drift no correction could end.
  constructor() { this.next = []; this.modelId = "gpt-4.1"; }
  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const results = items.filter((item) => item.type === "function_call_result");
    if (results.length) {
      const text = results.map((r) => (typeof r.output === "string" ? r.output : r.output?.text ?? "")).join(" | ");
      return { usage: new Usage(), responseId: "r", output: [{ type: "message", role: "assistant",
        status: "completed", content: [{ type: "output_text", text }] }] };
    }
    const calls = this.next.map(([name, args], i) => ({ type: "function_call", callId: `c${Date.now()}${i}`,
      name, arguments: JSON.stringify(args), status: "completed" }));
    return { usage: new Usage(), responseId: "r", output: calls };
  }
  async *getStreamedResponse() { throw new Error("the tests run without streaming"); }
}

function refundTools(ran) {
  return [
    tool({ name: "orders_lookup", description: "Look an order up", parameters: z.object({ order: z.string() }),
      execute: async ({ order }) => { ran.push(["orders.lookup", order]); return `order ${order}: damaged`; } }),
    tool({ name: "payments_refund", description: "Refund an order",
      parameters: z.object({ order: z.string(), amount: z.number() }),
      execute: async ({ order, amount }) => { ran.push(["payments.refund", order, amount]); return "refunded"; } }),
  ];
}
// Function names may not have dots here: the control plane's names differ.
const TOOL_NAMES = { orders_lookup: "orders.lookup", payments_refund: "payments.refund" };

const started = [];
after(async () => { for (const governed of started) await governed.stop(); });

async function start(which, options = {}) {
  const { name, token } = env.agents[which];
  const client = new Client(options.url ?? env.url, token, {
    agent: name, retry: { attempts: 2, base: 0.01, cap: 0.05 }, eventFlushInterval: 0.05 });
  const ran = [];
  const model = new ScriptedModel();
  const agent = new Agent({ name: "refunds", instructions: "refund damaged orders", model,
    tools: refundTools(ran), mcpServers: options.mcpServers ?? [] });
  const governed = governOpenAIAgent({ client, name, agent, toolNames: TOOL_NAMES,
    models: { "gpt-4.1": model }, ...FAST, ...options.governor });
  await governed.start();
  started.push(governed);
  return { governed, agent, model, ran, client, name };
}

/** One run asking for `calls`: the tool outputs the model read (an MCP tool's content part as
 * its JSON). */
async function run({ agent, model }, calls) {
  model.next = calls;
  const result = await new Runner({ tracingDisabled: true }).run(agent, "go", { maxTurns: 4 });
  return result.newItems.filter((item) => item.type === "tool_call_output_item")
    .map((item) => (typeof item.output === "string" ? item.output : JSON.stringify(item.output)));
}

describe("OpenAI Agents SDK adapter", () => {
  test("an approved call runs; an unapproved tool and an unreadable amount are refused", async () => {
    const agent = await start("oa-main");
    const outputs = await run(agent, [["orders_lookup", { order: "O-1" }],
      ["payments_refund", { order: "O-1", amount: 120 }]]);
    assert.deepEqual(outputs, ["order O-1: damaged", "refunded"]);
    assert.ok(await agent.client.flushEvents(30));
    assert.ok(agent.client.events.accepted >= 3);

    let exported = false;
    agent.agent.tools.push(tool({ name: "crm_export", description: "Export", parameters: z.object({}),
      execute: async () => { exported = true; return "all"; } }));
    const refused = await run(agent, [["crm_export", {}]]);
    assert.equal(exported, false);
    assert.match(refused[0], /refused by governance: tool crm_export is not approved/);
    agent.agent.tools.pop();
    assert.deepEqual(agent.ran, [["orders.lookup", "O-1"], ["payments.refund", "O-1", 120]]);
  });

  test("a handoff's tools are gated and a clone keeps the gate", async () => {
    const agent = await start("oa-main");
    let deleted = false;
    const helper = new Agent({ name: "helper", model: agent.model, tools: [tool({ name: "files_delete",
      description: "Delete files", parameters: z.object({}), execute: async () => { deleted = true; return "gone"; } })] });
    agent.agent.handoffs.push(helper);
    // governed from the next observation on, and reported as what the agent can call
    await eventually(() => agent.governed.governor.observe().tools.includes("files_delete"));
    agent.model.next = [["files_delete", {}]];
    const direct = await new Runner({ tracingDisabled: true }).run(helper, "go", { maxTurns: 3 });
    const outputs = direct.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => String(i.output));
    assert.match(outputs[0], /not approved/);
    assert.equal(deleted, false);
    agent.agent.handoffs.pop();

    const copy = agent.agent.clone({ name: "copy" });
    agent.model.next = [["payments_refund", { order: "C-1", amount: "a lot" }]];
    const cloned = await new Runner({ tracingDisabled: true }).run(copy, "go", { maxTurns: 3 });
    const clonedOutputs = cloned.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => String(i.output));
    assert.match(clonedOutputs[0], /the rule reads the amount|refused by governance/);
    assert.deepEqual(agent.ran, []);
  });

  test("an Agent governed already, itself or as another's handoff, is refused a second governor", async () => {
    const first = await start("oa-main");
    const { token } = env.agents["oa-main"];
    const client = new Client(env.url, token, { agent: "another-agent" });
    // A second governor would leave the calls to the first, under the first's approvals.
    assert.throws(() => governOpenAIAgent({ client, name: "another-agent", agent: first.agent }),
      /governed already, as .*; govern each Agent object once/);
    const specialist = new Agent({ name: "specialist", instructions: "x", tools: [] });
    const triage = new Agent({ name: "triage", instructions: "x", handoffs: [specialist] });
    governOpenAIAgent({ client: first.client, name: first.name, agent: triage });
    assert.throws(() => governOpenAIAgent({ client, name: "another-agent", agent: specialist }),
      /governed already/);
  });

  test("an $800 refund waits for a human: runs on allow, refused on deny and on timeout", async () => {
    const agent = await start("oa-main", { governor: { decisionWait: 60 } });
    const [allowed] = await Promise.all([
      run(agent, [["payments_refund", { order: "P-1", amount: 800 }]]), bobAnswers(agent.name, "allow")]);
    assert.deepEqual(allowed, ["refunded"]);
    const [denied] = await Promise.all([
      run(agent, [["payments_refund", { order: "P-2", amount: 800 }]]), bobAnswers(agent.name, "deny")]);
    assert.match(denied[0], /payments.refund: denied/);
    const impatient = await start("oa-main", { governor: { decisionWait: 0.5 } });
    const timedOut = await run(impatient, [["payments_refund", { order: "P-3", amount: 800 }]]);
    assert.match(timedOut[0], /no human answered within 0.5s/);
    assert.deepEqual([...agent.ran, ...impatient.ran], [["payments.refund", "P-1", 800]]);
    await noDecisionLeftOpen(agent.name);
  });

  test("a tool added at runtime is reported as drift and removed in place", async () => {
    const agent = await start("oa-drift");
    agent.agent.tools.push(tool({ name: "crm_search", description: "Search", parameters: z.object({}),
      execute: async () => [] }));
    await eventually(async () => (await findings(agent.name)).some((f) => f.pointer === "/tools/crm_search"),
      { timeout: 120, message: "the control plane never saw the gained tool" });
    await eventually(() => !agent.agent.tools.some((t) => t.name === "crm_search"),
      { timeout: 240, message: "the correction never removed it" });
  });

  test("suspension, a revoked token and an unreachable control plane refuse every call", async () => {
    const suspended = await start("oa-suspend");
    control("suspend", suspended.name);
    await eventually(() => suspended.governed.governor.rules && !suspended.governed.governor.rules.running);
    assert.match((await run(suspended, [["orders_lookup", { order: "S-1" }]]))[0], /the agent is suspended/);

    const revoked = await start("oa-revoke");
    await api(env.owner, "POST", `/api/v1/tokens/${env.agents["oa-revoke"].token_id}/revoke`, { reason: "leaked" });
    await eventually(() => revoked.governed.governor.authFailure);
    assert.match((await run(revoked, [["orders_lookup", { order: "R-1" }]]))[0], /refused this agent's token/);

    const cutoff = await relay();
    const away = await start("oa-main", { url: cutoff.url });
    await cutoff.cut();
    await eventually(() => away.governed.governor.unreachableSince !== null);
    assert.match((await run(away, [["orders_lookup", { order: "U-1" }]]))[0], /unreachable/);
    assert.deepEqual([...suspended.ran, ...revoked.ran, ...away.ran], []);
  });

  test("a real MCP server: its tools reported as it lists them, an approved one runs at it, an unapproved one never reaches it", async () => {
    const server = new MCPServerStreamableHttp({ name: "orders", url: env.mcp.url });
    await server.connect();
    try {
      const agent = await start("oa-mcp", { mcpServers: [server] });
      // listed from the connected server at start, and reported under it
      assert.deepEqual(agent.governed.governor.observe().mcp_servers, [{ name: "orders",
        transport: "http", url: env.mcp.url, tools: ["delete_customer", "lookup_order", "refund_order"] }]);

      const outputs = await run(agent, [["lookup_order", { order_id: "O-42" }],
        ["delete_customer", { customer_id: "O-c1" }]]);
      assert.equal(outputs.length, 2);
      assert.match(outputs[0], /order O-42: 2 mugs, delivered broken/);
      assert.match(outputs[1], /refused by governance: tool delete_customer of MCP server orders is not approved/);
      const ran = await mcpServerRan();
      assert.ok(ran.some((c) => c.tool === "lookup_order" && c.arguments.order_id === "O-42"), JSON.stringify(ran));
      assert.ok(!ran.some((c) => c.tool === "delete_customer"), JSON.stringify(ran));

      const drift = await eventually(async () => {
        const mcp = (await findings(agent.name)).filter((f) => f.pointer.startsWith("/mcp_servers"));
        return mcp.length ? mcp : null;
      }, { timeout: 120, message: "the control plane never saw the server's unapproved tool" });
      assert.deepEqual(drift.map((f) => f.pointer), ["/mcp_servers/orders/tools/delete_customer"]);
    } finally {
      await server.close();
    }
  });
});
