// A TypeScript agent's MCP side, on the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`,
// a dev dependency: the client never imports it): it connects to an MCP server over streamable
// HTTP (here, the governed proxy in front of it), lists the tools, and makes the calls it is
// given, printing one JSON line of what it saw. tests/clients/test_typescript_mcp.py runs it.
//
//   node test/mcp-agent.mjs URL '[["lookup_order", {"order_id": "42"}], ...]'

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, calls = "[]"] = process.argv.slice(2);
const client = new Client({ name: "refund-agent", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
try {
  const { tools } = await client.listTools();
  const results = [];
  for (const [name, args] of JSON.parse(calls)) {
    try {
      const result = await client.callTool({ name, arguments: args });
      const text = (result.content ?? []).filter((part) => part.type === "text")
        .map((part) => part.text).join("\n");
      results.push({ tool: name, refused: Boolean(result.isError), text });
    } catch (error) { // a JSON-RPC error rather than an error result: refused all the same
      results.push({ tool: name, refused: true, text: String(error?.message ?? error) });
    }
  }
  console.log(JSON.stringify({ tools: tools.map((tool) => tool.name).sort(), results }));
} finally {
  await client.close();
}
