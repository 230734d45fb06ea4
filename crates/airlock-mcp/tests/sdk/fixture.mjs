// A rich MCP upstream built with the official TypeScript SDK: Streamable HTTP, stateless (a
// fresh server and transport per request), on 127.0.0.1 with a port from the OS. It returns every
// content block type, so tests can check that airlock hands each one on unchanged:
//   echo_blocks      returns the blocks (and structuredContent) given in its arguments as its
//                    result, so a test chooses the exact bytes it expects back
//   weather          declares an outputSchema and returns matching structuredContent
//   simple_text, error_handling, image_content, audio_content, embedded_resource,
//   multiple_content_types
//                    the fixed results the MCP conformance suite expects of its test_* tools
// and the resources, template and prompts (with completion of their arguments) that suite reads
// under fixed names: test://static-text, test://static-binary (the bytes 0..255),
// test://template/{id}/data, simple_prompt, prompt_with_arguments,
// prompt_with_embedded_resource, prompt_with_image.
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
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

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

// Every byte value once, so a test can check a blob byte for byte.
const BINARY = Buffer.from(Array.from({ length: 256 }, (_, i) => i)).toString("base64");

const RESOURCES = [
  { uri: "test://static-text", name: "static_text", description: "A static text resource.", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static_binary", description: "Every byte value once.", mimeType: "application/octet-stream" },
];
const TEMPLATES = [
  { uriTemplate: "test://template/{id}/data", name: "template_data", description: "Data for an id.", mimeType: "application/json" },
];
const PROMPTS = [
  { name: "simple_prompt", description: "A prompt without arguments." },
  {
    name: "prompt_with_arguments",
    description: "A prompt with two arguments.",
    arguments: [
      { name: "arg1", description: "First argument", required: true },
      { name: "arg2", description: "Second argument", required: true },
    ],
  },
  {
    name: "prompt_with_embedded_resource",
    description: "A prompt with an embedded resource.",
    arguments: [{ name: "resourceUri", description: "The resource to embed", required: true }],
  },
  { name: "prompt_with_image", description: "A prompt with an image." },
];
// What completion offers for prompt_with_arguments' arg1 and the template's id.
const SUGGESTIONS = ["test-alpha", "test-beta", "other"];

function read(uri) {
  switch (uri) {
    case "test://static-text":
      return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }] };
    case "test://static-binary":
      return { contents: [{ uri, mimeType: "application/octet-stream", blob: BINARY }] };
  }
  const templated = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (templated) {
    return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify({ id: templated[1] }) }] };
  }
  throw new McpError(-32602, `Resource ${uri} not found`, { uri });
}

function prompt(name, args) {
  const user = (content) => ({ role: "user", content });
  switch (name) {
    case "simple_prompt":
      return { messages: [user({ type: "text", text: "This is a simple prompt for testing." })] };
    case "prompt_with_arguments":
      return { messages: [user({ type: "text", text: `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'` })] };
    case "prompt_with_embedded_resource":
      return {
        messages: [
          user({ type: "resource", resource: { uri: args.resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." } }),
          user({ type: "text", text: "Please process the embedded resource above." }),
        ],
      };
    case "prompt_with_image":
      return { messages: [user({ type: "image", data: PNG, mimeType: "image/png" }), user({ type: "text", text: "Please analyze the image above." })] };
  }
  throw new McpError(-32602, `Prompt ${name} not found`);
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
    { capabilities: { tools: {}, resources: {}, prompts: {}, completions: {}, logging: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    (await withNotices(request, extra)) ?? call(request.params.name, request.params.arguments ?? {}),
  );
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => read(request.params.uri));
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) =>
    prompt(request.params.name, request.params.arguments ?? {}),
  );
  server.setRequestHandler(CompleteRequestSchema, async (request) => {
    const { ref, argument } = request.params;
    const known =
      (ref.type === "ref/prompt" && ref.name === "prompt_with_arguments" && argument.name === "arg1") ||
      (ref.type === "ref/resource" && ref.uri === "test://template/{id}/data" && argument.name === "id");
    const values = known ? SUGGESTIONS.filter((s) => s.startsWith(argument.value)) : [];
    return { completion: { values, total: values.length, hasMore: false } };
  });
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
