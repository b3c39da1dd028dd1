// A refund agent built with the OpenAI Agents SDK for JavaScript (`Agent` run by the `Runner`) on
// a scripted model provider (no key, no network), governed by agentgov: the lines marked GOVERNED
// are all it takes.
//
//   node agent.mjs register --token OWNER_TOKEN      # proposes manifest.yaml; prints the proposal
//   node agent.mjs run [--orders N] [--pause S]       # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { Agent, Runner, Usage, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";

import { Client } from "agentgov";
import { governOpenAIAgent } from "agentgov/openai-agents";

setTracingDisabled(true); // the SDK's trace exporter would call the network

const HERE = new URL(".", import.meta.url);
const REFUNDS = [120, 80, 640, 45, 310, 900, 60, 150];
// The SDK's function names may not contain dots: the control plane's names for them.
const TOOL_NAMES = { orders_lookup: "orders.lookup", payments_refund: "payments.refund" };
// The control plane's resource behind each tool (checked against the approved data scopes).
const RESOURCES = { "orders.lookup": "orders_db", "payments.refund": "payments" };

/** Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls; once the
 * tools answered, their outputs are the reply. */
class OfflineModel {
  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [{ role: "user", content: request.input }];
    const results = items.filter((item) => item.type === "function_call_result");
    if (results.length) {
      const text = results.map((r) => (typeof r.output === "string" ? r.output : r.output?.text ?? "")).join(" | ");
      return { usage: new Usage(), responseId: "offline", output: [{ type: "message", role: "assistant",
        status: "completed", content: [{ type: "output_text", text }] }] };
    }
    const asked = items.findLast((item) => item.role === "user");
    const words = String(typeof asked?.content === "string" ? asked.content
      : asked?.content?.map((part) => part.text ?? "").join(" ") ?? "").split(/\s+/);
    const calls = [["orders_lookup", { order: words[1] }]];
    if (words[0] === "refund") calls.push(["payments_refund", { order: words[1], amount: Number(words[2]) }]);
    return { usage: new Usage(), responseId: "offline", output: calls.map(([name, args], i) => ({
      type: "function_call", callId: `call-${Date.now()}-${i}`, name, arguments: JSON.stringify(args),
      status: "completed" })) };
  }
  async *getStreamedResponse() { throw new Error("the example runs without streaming"); }
}

const tools = [
  tool({ name: "orders_lookup", description: "Look an order up", parameters: z.object({ order: z.string() }),
    execute: async ({ order }) => `order ${order}: damaged in transit` }),
  tool({ name: "payments_refund", description: "Refund an order",
    parameters: z.object({ order: z.string(), amount: z.number() }),
    execute: async ({ order, amount }) => `refunded ${amount} on ${order}` }),
];

function* requests(orders) {
  for (let number = 1; number <= orders; number += 1) {
    const order = `order-${String(number).padStart(4, "0")}`;
    yield number % 3 === 0 ? `refund ${order} ${REFUNDS[(number / 3 - 1) % REFUNDS.length]}`
      : `lookup ${order}`;
  }
}

function option(args, name, fallback) {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
}

async function register(args) {
  const token = args[args.indexOf("--token") + 1];
  const client = new Client(process.env.AGENTGOV_URL ?? "http://127.0.0.1:8000", token);
  const outcome = await client.applyManifests(readFileSync(new URL("manifest.yaml", HERE), "utf8"));
  console.log(outcome.results[0].proposal ?? "");
}

async function run(args) {
  const model = new OfflineModel();
  const agent = new Agent({ name: "refunds", instructions: "Refund damaged orders.", model, tools });
  const client = Client.fromEnv();                                                 // GOVERNED
  const governed = governOpenAIAgent({ client, agent, toolNames: TOOL_NAMES,       // GOVERNED
    resources: RESOURCES, models: { "gpt-4.1": model }, decisionWait: 120 });
  await governed.start();                                                          // GOVERNED
  const orders = option(args, "--orders", 1000);
  const pause = option(args, "--pause", 1);
  const runner = new Runner({ tracingDisabled: true });
  let stopping = false;
  process.on("SIGINT", () => { stopping = true; });
  process.on("SIGTERM", () => { stopping = true; });
  try {
    for (const text of requests(orders)) {
      if (stopping) break;
      const result = await runner.run(agent, text, { maxTurns: 3 });
      console.log(`${text} -> ${result.finalOutput}`);
      await sleep(pause * 1000);
    }
  } finally {
    await governed.stop();
    await client.close();
  }
}

const [command, ...rest] = process.argv.slice(2);
if (command === "register") await register(rest);
else if (command === "run") await run(rest);
else {
  console.error("usage: agent.mjs register --token OWNER_TOKEN | run [--orders N] [--pause S]");
  process.exitCode = 2;
}
