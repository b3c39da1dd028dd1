// The Vercel AI SDK adapter against a real control plane: real `generateText` runs on the SDK's
// own mock language model (offline), with the agent's tools governed where the SDK executes them,
// MCP tools included: the SDK's MCP client (`@ai-sdk/mcp`) talks to a real MCP server.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { experimental_createMCPClient as createMCPClient } from "@ai-sdk/mcp";
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV2 } from "ai/test";
import { z } from "zod";

import { Client } from "agentgov";
import { governVercelAI } from "agentgov/vercel-ai";

import { FAST, api, bobAnswers, control, env, eventually, findings, mcpServerRan, recordingRelay,
  relay, toolCall, noDecisionLeftOpen } from "./harness.mjs";

/** A model that answers with each step's script in turn (tool calls, then text). */
function scripted(...steps) {
  let step = 0;
  const model = new MockLanguageModelV2({
    modelId: "gpt-4.1",
    doGenerate: async () => {
      const content = steps[Math.min(step, steps.length - 1)];
      step += 1;
      const calls = content.some((part) => part.type === "tool-call");
      return { content, finishReason: calls ? "tool-calls" : "stop", warnings: [],
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } };
    },
  });
  return model;
}

/** The refund agent's tools, counting what really ran. */
function refundTools(ran) {
  return {
    "orders.lookup": tool({
      description: "Look an order up", inputSchema: z.object({ order: z.string() }),
      execute: async ({ order }) => { ran.push(["orders.lookup", order]); return { order, total: 900 }; },
    }),
    "payments.refund": tool({
      description: "Refund an order",
      // lax, as many tools are: the gate must not rely on the tool to reject a bad amount
      inputSchema: z.object({ order: z.string(), amount: z.any() }),
      execute: async ({ order, amount }) => { ran.push(["payments.refund", order, Number(amount)]); return "refunded"; },
    }),
  };
}

function agentFor(which, options = {}) {
  const { name, token } = env.agents[which];
  const client = new Client(options.url ?? env.url, token, {
    agent: name, retry: { attempts: 2, base: 0.01, cap: 0.05 }, eventFlushInterval: 0.05 });
  const ran = [];
  const agent = governVercelAI({ client, name, model: scripted({ type: "text", text: "ok" }),
    tools: refundTools(ran), ...FAST, ...options.governor });
  return { agent, client, ran, name };
}

/** One run of generateText on the governed agent with a scripted first step. */
async function run(agent, calls) {
  agent.model = scripted(calls, [{ type: "text", text: "done" }]);
  const result = await generateText({ model: agent.model, tools: agent.tools, prompt: "go",
    stopWhen: stepCountIs(3) });
  const parts = result.steps.flatMap((s) => s.content);
  return {
    results: parts.filter((p) => p.type === "tool-result"),
    errors: parts.filter((p) => p.type === "tool-error").map((p) => String(p.error?.message ?? p.error)),
  };
}

const started = [];
after(async () => { for (const agent of started) await agent.stop(); });

async function start(which, options) {
  const made = agentFor(which, options);
  await made.agent.start();
  started.push(made.agent);
  return made;
}

describe("Vercel AI SDK adapter", () => {
  test("an approved call runs, is reported and recorded; an unapproved tool is refused", async () => {
    const { agent, client, ran, name } = await start("main");
    const first = await run(agent, [toolCall("orders.lookup", { order: "A-1" }),
      toolCall("payments.refund", { order: "A-1", amount: 120 })]);
    assert.deepEqual(first.errors, []);
    assert.deepEqual(ran, [["orders.lookup", "A-1"], ["payments.refund", "A-1", 120]]);
    assert.ok(await client.flushEvents(30));
    assert.ok(client.events.accepted >= 3, `events accepted: ${client.events.accepted}`);

    // A tool the model calls that the spec does not approve never runs.
    let exported = false;
    agent.rawTools["crm.export"] = tool({ description: "Export the CRM", inputSchema: z.object({}),
      execute: async () => { exported = true; return "all customers"; } });
    const second = await run(agent, [toolCall("crm.export", {})]);
    assert.equal(exported, false);
    assert.match(second.errors[0], /refused by governance: tool crm.export is not approved/);
    delete agent.rawTools["crm.export"];
    assert.equal(name, env.agents.main.name);
  });

  test("an amount the gate cannot read is refused, never allowed", async () => {
    const { agent, ran } = await start("main");
    for (const amount of ["800 dollars", "NaN", null, -5]) {
      const outcome = await run(agent, [toolCall("payments.refund", { order: "A-2", amount })]);
      assert.match(outcome.errors[0] ?? "", /the rule reads the amount|refused/, String(amount));
    }
    const missing = await run(agent, [toolCall("payments.refund", { order: "A-2" })]);
    assert.match(missing.errors[0] ?? "", /refused/);
    assert.equal(ran.filter(([t]) => t === "payments.refund").length, 0);
  });

  test("an $800 refund waits for a human: runs on allow, refused on deny and on timeout", async () => {
    const { agent, ran, name } = await start("main", { governor: { decisionWait: 60 } });
    const [allowed] = await Promise.all([
      run(agent, [toolCall("payments.refund", { order: "B-1", amount: 800 })]),
      bobAnswers(name, "allow"),
    ]);
    assert.deepEqual(allowed.errors, []);
    assert.deepEqual(ran, [["payments.refund", "B-1", 800]]);

    const [denied] = await Promise.all([
      run(agent, [toolCall("payments.refund", { order: "B-2", amount: "800" })]),
      bobAnswers(name, "deny"),
    ]);
    assert.match(denied.errors[0], /refused by governance: payments.refund: denied/);

    const impatient = await start("main", { governor: { decisionWait: 0.5 } });
    const timedOut = await run(impatient.agent, [toolCall("payments.refund", { order: "B-3", amount: 800 })]);
    assert.match(timedOut.errors[0], /no human answered within 0.5s/);
    assert.deepEqual(ran, [["payments.refund", "B-1", 800]]);
    assert.deepEqual(impatient.ran, []);
    // the unanswered decision is bob's to close: deny it so later tests see no open one
    await noDecisionLeftOpen(name);
  });

  test("a tool added at runtime is reported as drift and removed in place", async () => {
    const { agent, name } = await start("drift");
    let searched = false;
    agent.tools["crm.search"] = tool({ description: "Search the CRM",
      inputSchema: z.object({ q: z.string() }), execute: async () => { searched = true; return []; } });
    // gated from the moment it is there
    const early = await run(agent, [toolCall("crm.search", { q: "x" })]);
    assert.match(early.errors[0], /not approved/);
    await eventually(async () => (await findings(name)).some((f) => f.pointer === "/tools/crm.search"),
      { timeout: 120, message: "the control plane never saw the gained tool" });
    await eventually(() => !("crm.search" in agent.tools), { timeout: 240, message: "the correction never removed it" });
    assert.equal(searched, false);
    assert.deepEqual(Object.keys(agent.tools).sort(), ["orders.lookup", "payments.refund"]);
  });

  test("suspension refuses every call", async () => {
    const { agent, ran, name } = await start("suspend");
    const before = await run(agent, [toolCall("orders.lookup", { order: "S-1" })]);
    assert.deepEqual(before.errors, []);
    control("suspend", name);
    await eventually(() => agent.governor.rules && !agent.governor.rules.running,
      { message: "the suspension never reached the agent" });
    const afterwards = await run(agent, [toolCall("orders.lookup", { order: "S-2" }),
      toolCall("payments.refund", { order: "S-2", amount: 10 })]);
    assert.equal(afterwards.errors.length, 2);
    for (const error of afterwards.errors) assert.match(error, /the agent is suspended/);
    assert.deepEqual(ran, [["orders.lookup", "S-1"]]);
  });

  test("a revoked token fails closed at once, read-only tools included", async () => {
    const { agent, ran, name } = await start("revoke", { governor: { readOnlyTools: ["orders.lookup"],
      failOpenSeconds: 3600 } });
    await api(env.owner, "POST", `/api/v1/tokens/${env.agents.revoke.token_id}/revoke`,
      { reason: "leaked" });
    await eventually(() => agent.governor.authFailure, { message: "the 401 never reached the gate" });
    const outcome = await run(agent, [toolCall("orders.lookup", { order: "R-1" })]);
    assert.match(outcome.errors[0], /refused this agent's token \(401/);
    assert.deepEqual(ran, []);
    assert.ok(name);
  });

  test("stop() ends the loop's held long-poll instead of waiting it out", async () => {
    const recorded = await recordingRelay();
    try {
      const { agent } = agentFor("main", { url: recorded.url, governor: { longPoll: 60 } });
      await agent.start();
      // the loop's poll, held by the control plane (nothing changes for a minute)
      const held = await eventually(() => recorded.requests.find(
        (r) => r.url.includes("/desired-state") && r.url.includes("wait=60")),
      { message: "the loop never long-polled" });
      await agent.stop();
      assert.equal(held.answered, false, "stop() waited for the control plane's answer");
      await eventually(() => held.abandoned, { message: "the held poll was not closed" });
    } finally {
      await recorded.close();
    }
  });

  test("a desired state answered as stop() is called is neither applied nor reported", async () => {
    // The held poll's answer (the operator's suspension) arrives, then the owner stops the
    // loop before it goes on: what it would apply now reaches an agent nobody watches.
    const { name, token } = env.agents.stop;
    let agent = null;
    let held = false;
    let stopping = null;
    const afterStop = [];
    const fetchThenStop = async (url, init) => {
      if (stopping) afterStop.push(`${init?.method ?? "GET"} ${url}`);
      const polling = String(url).includes("wait=60");
      held ||= polling;
      const response = await fetch(url, init);
      if (!polling || response.status !== 200) return response;
      const body = await response.text(); // answered in full, then stopped
      stopping = agent.stop();
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const client = new Client(env.url, token, { agent: name, fetch: fetchThenStop,
      retry: { attempts: 2, base: 0.01, cap: 0.05 } });
    agent = governVercelAI({ client, name, model: scripted({ type: "text", text: "ok" }),
      tools: refundTools([]), ...FAST, longPoll: 60 });
    await agent.start();
    const before = agent.governor.applied.sha256;
    await eventually(() => held, { message: "the loop never long-polled" });
    control("suspend", name);
    await eventually(() => stopping !== null, { message: "the held poll never answered" });
    await stopping;
    assert.equal(agent.governor.applied.sha256, before, "applied after stop()");
    assert.deepEqual(afterStop, [], "sent after stop()");
  });

  test("an unreachable control plane fails closed (read-only tools may run, if the owner says)", async () => {
    const cutoff = await relay();
    const { agent, ran } = await start("main", { url: cutoff.url,
      governor: { readOnlyTools: ["orders.lookup"] } });
    const before = await run(agent, [toolCall("payments.refund", { order: "U-1", amount: 10 })]);
    assert.deepEqual(before.errors, []);
    await cutoff.cut();
    await eventually(() => agent.governor.unreachableSince !== null,
      { message: "the gate never noticed the control plane was gone" });
    const outcome = await run(agent, [toolCall("payments.refund", { order: "U-2", amount: 10 }),
      toolCall("orders.lookup", { order: "U-2" })]);
    assert.equal(outcome.errors.length, 1);
    assert.match(outcome.errors[0], /control plane has been unreachable for .* \(tolerated: 0s\)/);
    assert.deepEqual(ran, [["payments.refund", "U-1", 10], ["orders.lookup", "U-2"]]);
  });

  test("within a stated grace an unreachable control plane is tolerated, a human's decision never", async () => {
    const cutoff = await relay();
    const { agent, ran } = await start("main", { url: cutoff.url, governor: { failOpenSeconds: 3600 } });
    await cutoff.cut();
    await eventually(() => agent.governor.unreachableSince !== null);
    // A lookup runs inside the grace; a refund its rule must judge needs the decision function,
    // out of reach, so even a small one is refused (no gate judges an amount on its own).
    const outcome = await run(agent, [toolCall("orders.lookup", { order: "G-1" }),
      toolCall("payments.refund", { order: "G-2", amount: 10 })]);
    assert.deepEqual(ran, [["orders.lookup", "G-1"]]);
    assert.equal(outcome.errors.length, 1);
    assert.match(outcome.errors[0], /no decision could be had/);
  });

  test("a real MCP client's tools: an approved one runs at the server, an unapproved one never reaches it and is drift", async () => {
    const mcpClient = await createMCPClient({ transport: { type: "http", url: env.mcp.url } });
    try {
      const server = { name: "orders", url: env.mcp.url };
      const { agent, name } = await start("mcp",
        { governor: { mcpServers: [{ server, tools: await mcpClient.tools() }] } });
      const outcome = await run(agent, [toolCall("lookup_order", { order_id: "V-42" }),
        toolCall("delete_customer", { customer_id: "V-c1" })]);
      // the approved tool ran at the server, and the server's answer is the tool's result
      assert.equal(outcome.results.length, 1);
      assert.deepEqual(outcome.results[0].output.content,
        [{ type: "text", text: "order V-42: 2 mugs, delivered broken" }]);
      assert.equal(outcome.errors.length, 1);
      assert.match(outcome.errors[0],
        /refused by governance: tool delete_customer of MCP server orders is not approved/);
      const ran = await mcpServerRan();
      assert.ok(ran.some((c) => c.tool === "lookup_order" && c.arguments.order_id === "V-42"), JSON.stringify(ran));
      assert.ok(!ran.some((c) => c.tool === "delete_customer"), JSON.stringify(ran));

      // reported under the server as its MCP client listed them: the unapproved one is drift
      assert.deepEqual(agent.governor.observe().mcp_servers, [{ name: "orders", transport: "http",
        url: env.mcp.url, tools: ["delete_customer", "lookup_order", "refund_order"] }]);
      const drift = await eventually(async () => {
        const mcp = (await findings(name)).filter((f) => f.pointer.startsWith("/mcp_servers"));
        return mcp.length ? mcp : null;
      }, { timeout: 120, message: "the control plane never saw the server's unapproved tool" });
      assert.deepEqual(drift.map((f) => f.pointer), ["/mcp_servers/orders/tools/delete_customer"]);
    } finally {
      await mcpClient.close();
    }
  });

  test("a correction takes an MCP server's unapproved tool out of the set in place", async () => {
    const mcpClient = await createMCPClient({ transport: { type: "http", url: env.mcp.url } });
    try {
      const { agent, name } = await start("mcp-fix", { governor: { mcpServers: [
        { server: { name: "orders", url: env.mcp.url }, tools: await mcpClient.tools() }] } });
      assert.ok("delete_customer" in agent.tools);
      await eventually(async () => (await findings(name)).some(
        (f) => f.pointer === "/mcp_servers/orders/tools/delete_customer"),
      { timeout: 120, message: "the control plane never saw the server's unapproved tool" });
      await eventually(() => !("delete_customer" in agent.tools),
        { timeout: 240, message: "the correction never took the tool away" });
      assert.deepEqual(Object.keys(agent.tools).sort(),
        ["lookup_order", "orders.lookup", "payments.refund", "refund_order"]);
      assert.deepEqual(agent.governor.observe().mcp_servers[0].tools, ["lookup_order", "refund_order"]);
    } finally {
      await mcpClient.close();
    }
  });
});
