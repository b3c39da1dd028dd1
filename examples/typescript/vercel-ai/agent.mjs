// A refund agent built with the Vercel AI SDK (`generateText` with tools) on the SDK's offline
// mock model (no key, no network), governed by agentgov: the lines marked GOVERNED are all it
// takes.
//
//   node agent.mjs register --token OWNER_TOKEN      # proposes manifest.yaml; prints the proposal
//   node agent.mjs run [--orders N] [--pause S]       # AGENTGOV_URL, AGENTGOV_TOKEN, AGENTGOV_AGENT

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV2 } from "ai/test";
import { z } from "zod";

import { Client } from "agentgov";
import { governVercelAI } from "agentgov/vercel-ai";

const HERE = new URL(".", import.meta.url);
const REFUNDS = [120, 80, 640, 45, 310, 900, 60, 150];
// The control plane's resource behind each tool (checked against the approved data scopes).
const RESOURCES = { "orders.lookup": "orders_db", "payments.refund": "payments" };

/** Stands in for gpt-4.1: "lookup ORDER" and "refund ORDER AMOUNT" become tool calls. */
function offlineModel() {
  return new MockLanguageModelV2({
    modelId: "gpt-4.1",
    doGenerate: async ({ prompt }) => {
      const last = prompt[prompt.length - 1];
      const usage = { inputTokens: 20, outputTokens: 10, totalTokens: 30 };
      if (last.role === "tool") {
        const results = last.content.map((part) => JSON.stringify(part.output?.value ?? part.output));
        return { content: [{ type: "text", text: results.join(" | ") }], finishReason: "stop", usage, warnings: [] };
      }
      const words = last.content.map((part) => part.text ?? "").join(" ").split(/\s+/);
      const calls = [{ type: "tool-call", toolCallId: "lookup", toolName: "orders.lookup",
        input: JSON.stringify({ order: words[1] }) }];
      if (words[0] === "refund") {
        calls.push({ type: "tool-call", toolCallId: "refund", toolName: "payments.refund",
          input: JSON.stringify({ order: words[1], amount: Number(words[2]) }) });
      }
      return { content: calls, finishReason: "tool-calls", usage, warnings: [] };
    },
  });
}

const tools = {
  "orders.lookup": tool({
    description: "Look an order up", inputSchema: z.object({ order: z.string() }),
    execute: async ({ order }) => ({ order, status: "damaged in transit" }),
  }),
  "payments.refund": tool({
    description: "Refund an order", inputSchema: z.object({ order: z.string(), amount: z.number() }),
    execute: async ({ order, amount }) => `refunded ${amount} on ${order}`,
  }),
};

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
  const client = Client.fromEnv();                                   // GOVERNED
  const agent = governVercelAI({ client, model: offlineModel(), tools,  // GOVERNED
    resources: RESOURCES, decisionWait: 120 });
  await agent.start();                                               // GOVERNED
  const orders = option(args, "--orders", 1000);
  const pause = option(args, "--pause", 1);
  let stopping = false;
  process.on("SIGINT", () => { stopping = true; });
  process.on("SIGTERM", () => { stopping = true; });
  try {
    for (const text of requests(orders)) {
      if (stopping) break;
      const result = await generateText({ model: agent.model, tools: agent.tools, prompt: text,
        stopWhen: stepCountIs(3) });
      const refused = result.steps.flatMap((s) => s.content).filter((p) => p.type === "tool-error")
        .map((p) => String(p.error?.message ?? p.error));
      console.log(`${text} -> ${result.text}${refused.length ? ` [${refused.join("; ")}]` : ""}`);
      await sleep(pause * 1000);
    }
  } finally {
    await agent.stop();
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
