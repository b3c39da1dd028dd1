// What the tests share: the control plane the Python harness started (tests/clients/
// test_typescript.py passes it in AGENTGOV_TEST), the people acting on it over its API, a
// scripted offline model, and a TCP relay that can cut the agent off from the control plane.

import { execFileSync } from "node:child_process";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export const env = JSON.parse(process.env.AGENTGOV_TEST ?? "null");
if (!env) {
  throw new Error("AGENTGOV_TEST is not set: run these tests through "
    + "tests/clients/test_typescript.py (it starts the control plane they need)");
}

export const RESOURCES = { "orders.lookup": "orders_db", "payments.refund": "payments" };
export const FAST = { interval: 0.2, longPoll: 0, heartbeat: 30, decisionPoll: 0.1,
  resources: RESOURCES, log: () => {} };

/** Poll `check` until it returns something truthy; fail after `timeout` seconds. */
export async function eventually(check, { timeout = 60, message = "" } = {}) {
  const deadline = Date.now() + timeout * 1000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(message || `not met within ${timeout}s`);
    await sleep(100);
  }
}

/** A request as a person (alice the owner, bob the approver). */
export async function api(token, method, path, body) {
  const response = await fetch(env.url + path, {
    method, headers: { Authorization: `Token ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 400) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The agent's pending decisions ended with its wait: none is left open in bob's queue (the
 * control plane expired it when the agent stopped waiting). */
export async function noDecisionLeftOpen(agent) {
  await eventually(async () => {
    const page = await api(env.approver, "GET", "/api/v1/escalations?status=open&page_size=100");
    return !page.results.some((e) => e.agent === agent && e.decision);
  }, { message: `a decision of ${agent} stayed open after the agent stopped waiting` });
}

/** bob answers the open escalation of the agent's pending decision (`allow` or `deny`). */
export async function bobAnswers(agent, resolution) {
  const escalation = await eventually(async () => {
    const page = await api(env.approver, "GET", "/api/v1/escalations?status=open&page_size=100");
    return page.results.find((e) => e.agent === agent && e.decision);
  }, { message: `no pending decision of ${agent} reached bob` });
  return api(env.approver, "POST", `/api/v1/escalations/${escalation.id}/resolve`,
    { resolution, comment: "checked the photo" });
}

/** Things only the control plane's operators do (suspend an agent): manage.py-level actions. */
export function control(...args) {
  return execFileSync(env.control[0], [...env.control.slice(1), ...args],
    { cwd: env.root, encoding: "utf8" });
}

/** The drift findings the control plane holds for an agent (through its API, as alice). */
export async function findings(agent) {
  return (await api(env.approver, "GET", `/api/v1/findings?agent=${agent}&page_size=100`)).results;
}

/** A TCP relay in front of the control plane; `cut()` drops every connection and refuses new
 * ones (the control plane becomes unreachable for whoever talks through it). */
export async function relay() {
  const target = new URL(env.url);
  const sockets = new Set();
  const server = net.createServer((socket) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(socket); sockets.add(upstream);
    socket.pipe(upstream); upstream.pipe(socket);
    const end = () => { socket.destroy(); upstream.destroy(); };
    socket.on("error", end); upstream.on("error", end);
    socket.on("close", end); upstream.on("close", end);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cut: () => new Promise((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    }),
  };
}

let callIds = 0;
/** A tool call part of a scripted model's answer. */
export function toolCall(toolName, input) {
  callIds += 1;
  return { type: "tool-call", toolCallId: `call-${callIds}`, toolName, input: JSON.stringify(input) };
}

/** An HTTP relay in front of the control plane that plays the faults scripted for the next
 * requests: a status (answered without forwarding), or "lose" (forwarded, processed, and the
 * connection dropped before the answer). Records each request's method and path. */
export async function scriptedRelay(...faults) {
  const { createServer, request } = await import("node:http");
  const target = new URL(env.url);
  const seen = [];
  const server = createServer((incoming, outgoing) => {
    seen.push(`${incoming.method} ${incoming.url.split("?")[0]}`);
    const fault = faults.shift();
    if (typeof fault === "number") {
      outgoing.writeHead(fault, { "Content-Type": "application/json", "Retry-After": "0" });
      outgoing.end(JSON.stringify({ error: { code: "unavailable", message: "scripted", details: [] } }));
      return;
    }
    const upstream = request({ host: target.hostname, port: target.port, path: incoming.url,
      method: incoming.method, headers: incoming.headers }, (answer) => {
      if (fault === "lose") {
        answer.resume();
        answer.on("end", () => outgoing.socket?.destroy());
        return;
      }
      outgoing.writeHead(answer.statusCode, answer.headers);
      answer.pipe(outgoing);
    });
    incoming.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, seen,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

/** An HTTP relay in front of the control plane that keeps each request's fate: answered (the
 * control plane's answer reached the client) or abandoned (the client closed the connection
 * before an answer came). */
export async function recordingRelay() {
  const { createServer, request } = await import("node:http");
  const target = new URL(env.url);
  const requests = [];
  const server = createServer((incoming, outgoing) => {
    const seen = { method: incoming.method, url: incoming.url, answered: false, abandoned: false };
    requests.push(seen);
    const upstream = request({ host: target.hostname, port: target.port, path: incoming.url,
      method: incoming.method, headers: incoming.headers }, (answer) => {
      if (seen.abandoned) return answer.resume();
      seen.answered = true;
      outgoing.writeHead(answer.statusCode, answer.headers);
      answer.pipe(outgoing);
    });
    upstream.on("error", () => outgoing.destroy());
    outgoing.on("close", () => {
      if (!seen.answered) { seen.abandoned = true; upstream.destroy(); }
    });
    incoming.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

/** What the MCP server the harness started really ran: one {tool, arguments} per call, from the
 * server's own record (tests/clients/mcp_upstream.py appends a line for each tool that runs). */
export async function mcpServerRan() {
  const { readFile } = await import("node:fs/promises");
  const text = await readFile(env.mcp.calls, "utf8").catch((error) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
  return text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
}
