// The LangGraph.js adapter against a real control plane: a real `createReactAgent` graph (and a
// bare ToolNode) on a scripted LangChain fake chat model (offline), governed where its ToolNode
// runs each tool.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { ToolNode, createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { Client } from "agentgov";
import { governLangGraph } from "agentgov/langgraph";

import { FAST, api, bobAnswers, control, env, eventually, findings, relay, noDecisionLeftOpen } from "./harness.mjs";

/** Stands in for gpt-4.1: asks for the calls it is given next, then answers with the results. */
class ScriptedChatModel extends FakeStreamingChatModel {
  constructor() {
    super({});
    this.modelName = "gpt-4.1";
    this.next = [];
  }

  bindTools() { return this; }

  async _generate(messages) {
    const last = messages[messages.length - 1];
    if (ToolMessage.isInstance?.(last) ?? last instanceof ToolMessage) {
      const results = messages.filter((m) => m instanceof ToolMessage).map((m) => String(m.content));
      return { generations: [{ text: "", message: new AIMessage({ content: results.join(" | ") }) }] };
    }
    const calls = this.next.map(([name, args], i) => ({ name, args, id: `call-${Date.now()}-${i}`,
      type: "tool_call" }));
    return { generations: [{ text: "", message: new AIMessage({ content: "", tool_calls: calls }) }] };
  }
}

function refundTools(ran) {
  return [
    tool(async ({ order }) => { ran.push(["orders.lookup", order]); return `order ${order}: damaged`; },
      { name: "orders.lookup", description: "Look an order up", schema: z.object({ order: z.string() }) }),
    // lax, as many tools are: the gate must not rely on the tool to reject a bad amount
    tool(async ({ order, amount }) => { ran.push(["payments.refund", order, Number(amount)]); return "refunded"; },
      { name: "payments.refund", description: "Refund an order",
        schema: z.object({ order: z.string(), amount: z.any() }) }),
  ];
}

const started = [];
after(async () => { for (const governed of started) await governed.stop(); });

async function start(which, options = {}) {
  const { name, token } = env.agents[which];
  const client = new Client(options.url ?? env.url, token, {
    agent: name, retry: { attempts: 2, base: 0.01, cap: 0.05 }, eventFlushInterval: 0.05 });
  const ran = [];
  const llm = new ScriptedChatModel();
  const graph = createReactAgent({ llm, tools: refundTools(ran) });
  const governed = governLangGraph({ client, name, graph, model: llm, ...FAST, ...options.governor });
  await governed.start();
  started.push(governed);
  return { governed, graph, llm, ran, client, name };
}

/** One turn of the graph asking for `calls`; the tool messages it produced. */
async function run({ graph, llm }, calls) {
  llm.next = calls;
  const state = await graph.invoke({ messages: [new HumanMessage("go")] });
  const tools = state.messages.filter((m) => m instanceof ToolMessage);
  return { ok: tools.filter((m) => m.status !== "error").map((m) => String(m.content)),
    errors: tools.filter((m) => m.status === "error").map((m) => String(m.content)) };
}

describe("LangGraph.js adapter", () => {
  test("an approved call runs and is recorded; an unapproved tool is refused", async () => {
    const agent = await start("lg-main");
    assert.deepEqual(agent.governed.governor.observe().tools, ["orders.lookup", "payments.refund"]);
    assert.equal(agent.governed.governor.observe().model, "gpt-4.1");
    const first = await run(agent, [["orders.lookup", { order: "L-1" }],
      ["payments.refund", { order: "L-1", amount: 120 }]]);
    assert.deepEqual(first.errors, []);
    assert.deepEqual(agent.ran, [["orders.lookup", "L-1"], ["payments.refund", "L-1", 120]]);
    assert.ok(await agent.client.flushEvents(30));
    assert.ok(agent.client.events.accepted >= 3);

    let exported = false;
    agent.governed.toolNodes[0].tools.push(tool(async () => { exported = true; return "all"; },
      { name: "crm.export", description: "Export the CRM", schema: z.object({}) }));
    const second = await run(agent, [["crm.export", {}]]);
    assert.equal(exported, false);
    assert.match(second.errors[0], /refused by governance: tool crm.export is not approved/);
    agent.governed.toolNodes[0].tools.pop();
  });

  test("an amount the gate cannot read is refused", async () => {
    const agent = await start("lg-main");
    for (const amount of ["800 dollars", "NaN", null, -5]) {
      const outcome = await run(agent, [["payments.refund", { order: "L-2", amount }]]);
      assert.match(outcome.errors[0] ?? "", /the rule reads the amount|refused by governance/, String(amount));
    }
    assert.deepEqual(agent.ran, []);
  });

  test("an $800 refund waits for a human: runs on allow, refused on deny and on timeout", async () => {
    const agent = await start("lg-main", { governor: { decisionWait: 60 } });
    const [allowed] = await Promise.all([
      run(agent, [["payments.refund", { order: "M-1", amount: 800 }]]), bobAnswers(agent.name, "allow")]);
    assert.deepEqual(allowed.errors, []);
    const [denied] = await Promise.all([
      run(agent, [["payments.refund", { order: "M-2", amount: "800" }]]), bobAnswers(agent.name, "deny")]);
    assert.match(denied.errors[0], /payments.refund: denied/);
    const impatient = await start("lg-main", { governor: { decisionWait: 0.5 } });
    const timedOut = await run(impatient, [["payments.refund", { order: "M-3", amount: 800 }]]);
    assert.match(timedOut.errors[0], /no human answered within 0.5s/);
    assert.deepEqual([...agent.ran, ...impatient.ran], [["payments.refund", "M-1", 800]]);
    await noDecisionLeftOpen(agent.name);
  });

  test("a tool added to the ToolNode at runtime is reported as drift and removed in place", async () => {
    const agent = await start("lg-drift");
    let searched = false;
    const node = agent.governed.toolNodes[0];
    node.tools.push(tool(async () => { searched = true; return []; },
      { name: "crm.search", description: "Search the CRM", schema: z.object({ q: z.string() }) }));
    const early = await run(agent, [["crm.search", { q: "x" }]]);
    assert.match(early.errors[0], /not approved/);
    await eventually(async () => (await findings(agent.name)).some((f) => f.pointer === "/tools/crm.search"),
      { timeout: 120, message: "the control plane never saw the gained tool" });
    await eventually(() => !node.tools.some((t) => t.name === "crm.search"),
      { timeout: 240, message: "the correction never removed it" });
    assert.equal(searched, false);
  });

  test("a bare ToolNode in a graph of your own is gated the same way", async () => {
    const { name, token } = env.agents["lg-main"];
    const client = new Client(env.url, token, { agent: name });
    const ran = [];
    const node = new ToolNode(refundTools(ran));
    const governed = governLangGraph({ client, name, toolNodes: [node], ...FAST });
    await governed.start();
    started.push(governed);
    const message = new AIMessage({ content: "", tool_calls: [
      { name: "orders.lookup", args: { order: "T-1" }, id: "t1", type: "tool_call" },
      { name: "payments.refund", args: { order: "T-1", amount: 6000 }, id: "t2", type: "tool_call" }] });
    const output = await node.invoke({ messages: [message] });
    const results = output.messages.map((m) => [m.status, String(m.content)]);
    assert.equal(results[0][0], "success");
    assert.match(results[1][1], /refused by governance: payments.refund: denied \(actions\/payments.refund\/max/);
    assert.deepEqual(ran, [["orders.lookup", "T-1"]]);
  });

  test("suspension refuses every call", async () => {
    const agent = await start("lg-suspend");
    assert.deepEqual((await run(agent, [["orders.lookup", { order: "S-1" }]])).errors, []);
    control("suspend", agent.name);
    await eventually(() => agent.governed.governor.rules && !agent.governed.governor.rules.running,
      { message: "the suspension never reached the agent" });
    const afterwards = await run(agent, [["orders.lookup", { order: "S-2" }],
      ["payments.refund", { order: "S-2", amount: 10 }]]);
    assert.equal(afterwards.errors.length, 2);
    for (const error of afterwards.errors) assert.match(error, /the agent is suspended/);
    assert.deepEqual(agent.ran, [["orders.lookup", "S-1"]]);
  });

  test("a revoked token and an unreachable control plane fail closed", async () => {
    const revoked = await start("lg-revoke", { governor: { readOnlyTools: ["orders.lookup"] } });
    await api(env.owner, "POST", `/api/v1/tokens/${env.agents["lg-revoke"].token_id}/revoke`,
      { reason: "leaked" });
    await eventually(() => revoked.governed.governor.authFailure);
    assert.match((await run(revoked, [["orders.lookup", { order: "R-1" }]])).errors[0],
      /refused this agent's token \(401/);
    assert.deepEqual(revoked.ran, []);

    const cutoff = await relay();
    const away = await start("lg-main", { url: cutoff.url });
    await cutoff.cut();
    await eventually(() => away.governed.governor.unreachableSince !== null);
    assert.match((await run(away, [["orders.lookup", { order: "U-1" }]])).errors[0],
      /control plane has been unreachable/);
    assert.deepEqual(away.ran, []);
  });
});
