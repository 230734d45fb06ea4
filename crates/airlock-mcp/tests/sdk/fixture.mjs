// A rich MCP upstream built with the official TypeScript SDK: Streamable HTTP, stateless (a
// fresh server and transport per request), on 127.0.0.1 with a port from the OS. It returns every
// content block type, so tests can check that airlock hands each one on unchanged:
//   echo_blocks      returns the blocks (and structuredContent) given in its arguments as its
//                    result, so a test chooses the exact bytes it expects back
//   weather          declares an outputSchema and returns matching structuredContent
//   simple_text, error_handling, image_content, audio_content, embedded_resource,
//   multiple_content_types
//                    the fixed results the MCP conformance suite expects of its test_* tools
//   tool_with_progress, tool_with_logging, logging_tool
//                    progress 0/50/100 for the request's progress token, and three info log
//                    messages (~50 ms apart, but logging_tool's at once), as the suite's test_*
//                    tools of those names send them
//   notices          progress 1/2 and 2/2 (with messages), then one log message at each of debug,
//                    info, warning and error, then an error-level message quoting the bearer
//                    token it was called with, in that order, all on the call's own stream
// Usage: node fixture.mjs. Prints the port on the first line of stdout; stops when stdin closes.
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

// A 1x1 PNG and an 8-sample WAV.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

const NO_ARGS = { type: "object", properties: {} };
const WEATHER_OUTPUT = {
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "number" } },
  required: ["city", "celsius"],
};

const TOOLS = [
  {
    name: "echo_blocks",
    description: "Returns the content blocks and structured content it is given.",
    inputSchema: {
      type: "object",
      properties: { content: { type: "array" }, structuredContent: { type: "object" } },
      required: ["content"],
    },
  },
  {
    name: "weather",
    description: "The weather in a city, as structured content.",
    inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    outputSchema: WEATHER_OUTPUT,
  },
  { name: "simple_text", description: "Returns a short text.", inputSchema: NO_ARGS },
  { name: "error_handling", description: "Always fails with a tool error.", inputSchema: NO_ARGS },
  { name: "image_content", description: "Returns a PNG image.", inputSchema: NO_ARGS },
  { name: "audio_content", description: "Returns a WAV audio clip.", inputSchema: NO_ARGS },
  { name: "embedded_resource", description: "Returns an embedded text resource.", inputSchema: NO_ARGS },
  { name: "multiple_content_types", description: "Returns text, an image and a resource.", inputSchema: NO_ARGS },
  { name: "notices", description: "Sends progress and log messages, then returns.", inputSchema: NO_ARGS },
];

function call(name, args) {
  switch (name) {
    case "echo_blocks": {
      const result = { content: args.content };
      if (args.structuredContent !== undefined) result.structuredContent = args.structuredContent;
      return result;
    }
    case "weather": {
      const structuredContent = { city: args.city, celsius: 21.5 };
      return { content: [{ type: "text", text: JSON.stringify(structuredContent) }], structuredContent };
    }
    case "simple_text":
      return { content: [{ type: "text", text: "This is a simple text response for testing." }] };
    // Called by name only (not listed): the conformance scope's `approval: caller` tools.
    case "elicitation":
    case "tampered_state":
      return { content: [{ type: "text", text: "Confirmed by the person at the client, and run." }] };
    case "error_handling":
      return { content: [{ type: "text", text: "This tool intentionally returns an error for testing" }], isError: true };
    case "image_content":
      return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
    case "audio_content":
      return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
    case "embedded_resource":
      return {
        content: [{
          type: "resource",
          resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
        }],
      };
    case "multiple_content_types":
      return {
        content: [
          { type: "text", text: "Multiple content types test:" },
          { type: "image", data: PNG, mimeType: "image/png" },
          {
            type: "resource",
            resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: '{"test":"data","value":123}' },
          },
        ],
      };
    default:
      return { content: [{ type: "text", text: `no tool ${name}` }], isError: true };
  }
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 50));

// The tools that send messages on the call's stream before their result; `null` for the others.
async function withNotices(request, extra) {
  const token = request.params._meta?.progressToken;
  const progress = async (progress, total, message) => {
    if (token === undefined) return;
    const params = { progressToken: token, progress, total };
    if (message !== undefined) params.message = message;
    await extra.sendNotification({ method: "notifications/progress", params });
  };
  const log = (level, data) =>
    extra.sendNotification({ method: "notifications/message", params: { level, logger: "fixture", data } });
  switch (request.params.name) {
    case "tool_with_progress":
      for (const step of [0, 50, 100]) {
        if (step > 0) await pause();
        await progress(step, 100);
      }
      return { content: [{ type: "text", text: "Progress tool completed." }] };
    case "tool_with_logging":
    case "logging_tool": {
      // The suite reads logging_tool's reply for 500 ms only: it logs without pauses.
      const paused = request.params.name === "tool_with_logging";
      await log("info", "Tool execution started");
      if (paused) await pause();
      await log("info", "Tool processing data");
      if (paused) await pause();
      await log("info", "Tool execution completed");
      return { content: [{ type: "text", text: "Logging tool completed." }] };
    }
    case "notices": {
      await progress(1, 2, "half way");
      await progress(2, 2, "done");
      for (const level of ["debug", "info", "warning", "error"]) await log(level, { level });
      const bearer = (extra.requestInfo?.headers?.authorization ?? "").replace(/^Bearer /, "");
      await log("error", `the token is ${bearer}`);
      return { content: [{ type: "text", text: "notices sent" }] };
    }
    default:
      return null;
  }
}

function mcpServer() {
  const server = new Server(
    { name: "sdk-fixture", version: "1.0.0" },
    { capabilities: { tools: {}, logging: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    (await withNotices(request, extra)) ?? call(request.params.name, request.params.arguments ?? {}),
  );
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  const server = mcpServer();
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
