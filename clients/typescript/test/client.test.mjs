// The client against the real control plane, with faults played by a relay in front of it:
// what is retried (idempotent requests, 429, lost answers of idempotent requests) and what is
// not (a decision request whose answer may have been lost), and the error bodies as typed errors.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { BadRequest, Client, NotFound, ServerError, Unauthenticated, Unreachable } from "agentgov";

import { env, scriptedRelay } from "./harness.mjs";

const FAST = { attempts: 3, base: 0.01, cap: 0.05 };

function client(url, token = env.agents.main.token) {
  return new Client(url, token, { agent: env.agents.main.name, retry: FAST, timeout: 10 });
}

describe("the client", () => {
  test("an idempotent read is retried through 5xx; the desired state's ETag gives 304s", async () => {
    const relay = await scriptedRelay(503, 502);
    try {
      const agent = client(relay.url);
      const state = await agent.desiredState();
      assert.equal(state.agent, env.agents.main.name);
      assert.equal(relay.seen.length, 3);
      assert.ok(state.etag);
      const again = await agent.desiredState();
      assert.equal(again, state); // the 304 gives back the same object
    } finally { await relay.close(); }
  });

  test("a decision request is not repeated after a 5xx or a lost answer; 429 is retried", async () => {
    const relay = await scriptedRelay(503);
    try {
      const agent = client(relay.url);
      const request = { tool: "orders.lookup", arguments: { order: "X-1" }, waitSeconds: 0 };
      await assert.rejects(agent.decide(request), ServerError);
      assert.deepEqual(relay.seen, [`POST /api/v1/agents/${env.agents.main.name}/decisions`]);

      const lost = await scriptedRelay("lose");
      try {
        await assert.rejects(client(lost.url).decide(request), Unreachable);
        assert.equal(lost.seen.length, 1);
      } finally { await lost.close(); }

      const limited = await scriptedRelay(429);
      try {
        const decision = await client(limited.url).decide(request);
        assert.equal(decision.outcome, "allow");
        assert.equal(limited.seen.length, 2);
      } finally { await limited.close(); }
    } finally { await relay.close(); }
  });

  test("an observed-state report whose answer was lost is sent again (PUT is idempotent)", async () => {
    const relay = await scriptedRelay("lose");
    try {
      const receipt = await client(relay.url).reportObserved({ framework: "vercel-ai",
        tools: ["orders.lookup", "payments.refund"] });
      assert.equal(typeof receipt.sha256, "string");
      assert.equal(relay.seen.length, 2);
    } finally { await relay.close(); }
  });

  test("event batches are sent with ids, and a repeat is answered as duplicates", async () => {
    const agent = client(env.url);
    const id = agent.recordEvent("tool_call", { tool: "orders.lookup" });
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.ok(await agent.flushEvents(30));
    assert.equal(agent.events.accepted, 1);
    const again = await agent.sendEvents([{ id, agent: env.agents.main.name,
      ts: new Date().toISOString(), kind: "tool_call", tool: "orders.lookup" }]);
    assert.equal(again.duplicates, 1);
  });

  test("error bodies become typed errors with their code and pointers", async () => {
    await assert.rejects(client(env.url).desiredState({ agent: "no-such-agent" }),
      (error) => error instanceof NotFound || error.status === 403);
    await assert.rejects(client(env.url, "not-a-token").desiredState(), (error) =>
      error instanceof Unauthenticated && error.status === 401 && typeof error.code === "string");
    await assert.rejects(client(env.url).reportObserved({ tools: "orders.lookup" }), (error) => {
      assert.ok(error instanceof BadRequest || error.status === 422, String(error));
      assert.ok(error.pointers.some((pointer) => pointer.startsWith("/tools")), error.pointers.join());
      return true;
    });
  });
});
