// An MCP server built with the official TypeScript SDK: Streamable HTTP, stateless (a fresh
// server and transport per request, no session id), on 127.0.0.1 with a port from the OS.
// Usage: node server.mjs. Prints the port on the first line of stdout; the Rust test
// (sdk_upstream) discovers and calls its tools through airlock's client. Stops when stdin closes.
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const TOOLS = [
  {
    name: "search",
    description: "Search the CRM.",
    inputSchema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  },
  { name: "whoami", description: "Echoes the Authorization header it received.", inputSchema: { type: "object" } },
];

function mcpServer(authorization) {
  const server = new Server({ name: "sdk-upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params;
    if (name === "search") {
      return {
        content: [{ type: "text", text: `found 1 result for ${args.q}` }],
        structuredContent: { results: [{ id: 7, q: args.q }] },
      };
    }
    if (name === "whoami") {
      return { content: [{ type: "text", text: authorization ?? "none" }] };
    }
    return { content: [{ type: "text", text: `no tool ${name}` }], isError: true };
  });
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  const server = mcpServer(req.headers.authorization);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
});

httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
