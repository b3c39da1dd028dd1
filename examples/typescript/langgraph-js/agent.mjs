// A refund agent built with LangGraph.js (`createReactAgent`) on a scripted LangChain fake chat
// model (no key, no network), governed by agentgov: the lines marked GOVERNED are all it takes.
//
//   node agent.mjs register --token OWNER_TOKEN      # proposes manifest.yaml; prints the proposal
//   node agent.mjs run [--orders N] [--pause S]       # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { Client } from "agentgov";
import { governLangGraph } from "agentgov/langgraph";

const HERE = new URL(".", import.meta.url);
const REFUNDS = [120, 80, 640, 45, 310, 900, 60, 150];
const RESOURCES = { "orders.lookup": "orders_db", "payments.refund": "payments" };

/** Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls. */
class OfflineChatModel extends FakeStreamingChatModel {
  constructor() { super({}); this.modelName = "gpt-4.1"; }
  bindTools() { return this; }
  async _generate(messages) {
    const last = messages[messages.length - 1];
    if (last instanceof ToolMessage) {
      const results = messages.filter((m) => m instanceof ToolMessage).map((m) => String(m.content));
      return { generations: [{ text: "", message: new AIMessage(results.join(" | ")) }] };
    }
    const words = String(messages.findLast((m) => m instanceof HumanMessage).content).split(/\s+/);
    const calls = [{ name: "orders.lookup", args: { order: words[1] }, id: "lookup", type: "tool_call" }];
    if (words[0] === "refund") {
      calls.push({ name: "payments.refund", args: { order: words[1], amount: Number(words[2]) },
        id: "refund", type: "tool_call" });
    }
    return { generations: [{ text: "", message: new AIMessage({ content: "", tool_calls: calls }) }] };
  }
}

const tools = [
  tool(async ({ order }) => `order ${order}: damaged in transit`,
    { name: "orders.lookup", description: "Look an order up", schema: z.object({ order: z.string() }) }),
  tool(async ({ order, amount }) => `refunded ${amount} on ${order}`,
    { name: "payments.refund", description: "Refund an order",
      schema: z.object({ order: z.string(), amount: z.number() }) }),
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
  const llm = new OfflineChatModel();
  const graph = createReactAgent({ llm, tools });
  const client = Client.fromEnv();                                              // GOVERNED
  const governed = governLangGraph({ client, graph, model: llm, resources: RESOURCES,  // GOVERNED
    decisionWait: 120 });
  await governed.start();                                                       // GOVERNED
  const orders = option(args, "--orders", 1000);
  const pause = option(args, "--pause", 1);
  let stopping = false;
  process.on("SIGINT", () => { stopping = true; });
  process.on("SIGTERM", () => { stopping = true; });
  try {
    for (const text of requests(orders)) {
      if (stopping) break;
      const state = await graph.invoke({ messages: [new HumanMessage(text)] });
      console.log(`${text} -> ${String(state.messages[state.messages.length - 1].content)}`);
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
