// An MCP upstream built with the official TypeScript SDK that asks its client during a call, as
// a session-era server does: Streamable HTTP with sessions (the client's answers come back on
// later POSTs of the same session), on 127.0.0.1 with a port from the OS. Its tools send their
// request on the call's own stream and return what the client answered:
//   sampling           sampling/createMessage with the `prompt` argument, returns
//                      "LLM response: <the text sampled>"
//   elicitation        elicitation/create with the `message` argument and a username/email form,
//                      returns "User response: <action: ..., content: {...}>"
//   elicitation_defaults, elicitation_enums
//                      elicitation/create with a form whose fields carry defaults (SEP-1034), or
//                      every enum shape (SEP-1330); returns "Elicitation completed: action=...,
//                      content={...}"
//   roots              roots/list; returns the roots' URIs, one per line
// as the MCP conformance suite's test_sampling, test_elicitation,
// test_elicitation_sep1034_defaults and test_elicitation_sep1330_enums expect them.
// Usage: node asking.mjs. Prints the port on the first line of stdout; stops when stdin closes.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const NO_ARGS = { type: "object", properties: {} };
const tool = (name, inputSchema) => ({ name, description: `Asks the client (${name}).`, inputSchema });
const TOOLS = [
  tool("sampling", { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] }),
  tool("elicitation", { type: "object", properties: { message: { type: "string" } }, required: ["message"] }),
  tool("elicitation_defaults", NO_ARGS),
  tool("elicitation_enums", NO_ARGS),
  tool("roots", NO_ARGS),
];

const DEFAULTS = {
  type: "object",
  properties: {
    name: { type: "string", description: "User name", default: "John Doe" },
    age: { type: "integer", description: "User age", default: 30 },
    score: { type: "number", description: "User score", default: 95.5 },
    status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
    verified: { type: "boolean", description: "Verification status", default: true },
  },
  required: [],
};

const ENUMS = {
  type: "object",
  properties: {
    untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
    titledSingle: {
      type: "string",
      oneOf: [
        { const: "value1", title: "First Option" },
        { const: "value2", title: "Second Option" },
        { const: "value3", title: "Third Option" },
      ],
    },
    legacyEnum: { type: "string", enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"] },
    untitledMulti: { type: "array", items: { type: "string", enum: ["option1", "option2", "option3"] } },
    titledMulti: {
      type: "array",
      items: {
        anyOf: [
          { const: "value1", title: "First Choice" },
          { const: "value2", title: "Second Choice" },
          { const: "value3", title: "Third Choice" },
        ],
      },
    },
  },
  required: [],
};

const text = (t) => ({ content: [{ type: "text", text: t }] });

async function call(server, name, args, extra) {
  const ask = (request, schema) => server.request(request, schema, { relatedRequestId: extra.requestId });
  const elicit = async (message, requestedSchema) => {
    const answer = await ask({ method: "elicitation/create", params: { message, requestedSchema } }, ElicitResultSchema);
    return `action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;
  };
  switch (name) {
    case "sampling": {
      const params = { messages: [{ role: "user", content: { type: "text", text: args.prompt } }], maxTokens: 100 };
      const answer = await ask({ method: "sampling/createMessage", params }, CreateMessageResultSchema);
      return text(`LLM response: ${answer.content?.text ?? ""}`);
    }
    case "elicitation": {
      const form = {
        type: "object",
        properties: {
          username: { type: "string", description: "User's response" },
          email: { type: "string", description: "User's email address" },
        },
        required: ["username", "email"],
      };
      const answer = await ask({ method: "elicitation/create", params: { message: args.message, requestedSchema: form } }, ElicitResultSchema);
      return text(`User response: <action: ${answer.action}, content: ${JSON.stringify(answer.content ?? {})}>`);
    }
    case "elicitation_defaults":
      return text(`Elicitation completed: ${await elicit("Test client default value handling - please accept with defaults", DEFAULTS)}`);
    case "elicitation_enums":
      return text(`Elicitation completed: ${await elicit("Test enum schema variants", ENUMS)}`);
    case "roots": {
      const answer = await ask({ method: "roots/list" }, ListRootsResultSchema);
      return text(answer.roots.map((r) => r.uri).join("\n"));
    }
    default:
      return { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true };
  }
}

function mcpServer() {
  const server = new Server({ name: "asking-fixture", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    call(server, request.params.name, request.params.arguments ?? {}, extra),
  );
  return server;
}

const sessions = new Map();

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

const httpServer = http.createServer(async (req, res) => {
  const id = req.headers["mcp-session-id"];
  const parsed = req.method === "POST" ? await body(req) : undefined;
  let transport = id ? sessions.get(id) : undefined;
  if (!transport && req.method === "POST" && parsed?.method === "initialize") {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await mcpServer().connect(transport);
  }
  if (!transport) {
    res.writeHead(id ? 404 : 400).end();
    return;
  }
  await transport.handleRequest(req, res, parsed);
});

httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
