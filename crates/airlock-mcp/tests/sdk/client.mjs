// Drives airlock's MCP endpoint with the official TypeScript SDK, the way a real agent would:
// connect (initialize over Streamable HTTP), list tools, call a tool, get a parked call, await it;
// then the same parked call as an MCP task (2025-11-25 experimental tasks): stream it to its
// result, follow and cancel a waiting one.
// Usage: node client.mjs URL TOKEN. Prints one JSON object on stdout; the Rust test asserts it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "airlock-sdk-test", version: "1.0.0" });
await client.connect(transport);

const out = {
  protocolVersion: transport.protocolVersion ?? null,
  sessionId: transport.sessionId ?? null,
  server: client.getServerVersion(),
};
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null }));
out.echo = await client.callTool({ name: "echo", arguments: { msg: "hi" } });
out.parked = await client.callTool({ name: "deploy", arguments: { env: "prod" } });
const awaitWith = out.parked.structuredContent?.await_with;
out.awaited = await client.callTool({ name: awaitWith.tool, arguments: awaitWith.arguments });
out.failed = await client.callTool({ name: "fail", arguments: {} });
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  out.unknown = null;
} catch (err) {
  out.unknown = { code: err.code ?? null, message: String(err.message) };
}

// Tasks: the SDK augments the call with a task because the server and the tool say it may.
out.taskCapability = client.getServerCapabilities()?.tasks ?? null;
out.taskStream = [];
for await (const message of client.experimental.tasks.callToolStream({ name: "deploy", arguments: { env: "prod" } })) {
  out.taskStream.push({ type: message.type, status: message.task?.status ?? null, result: message.result ?? null });
}
out.waitingTask = await client.experimental.tasks.getTask("inv-waiting");
out.cancelledTask = await client.experimental.tasks.cancelTask("inv-waiting");
await client.close();
console.log(JSON.stringify(out));
