// An MCP upstream on the 2026-07-28 revision that asks its client for input (SEP-2322,
// multi-round-trip requests), built with the official TypeScript SDK v2
// (@modelcontextprotocol/server): stateless HTTP on 127.0.0.1, a port from the OS. Its tools are
// the input-required tools of the MCP conformance suite, with the suite's keys and behaviour
// (the suite calls them `test_input_required_result_<name>`; airlock's conformance scope serves
// them under that prefix):
//   elicitation   asks `user_name` (elicitation, {name}); answers
//                                       "Hello, <name>!"
//   sampling      asks `capital_question` (sampling); answers with the
//                                       sampled text
//   list_roots    asks `client_roots` (roots/list); names the roots
//   request_state asks `confirm` with a requestState; answers "state-ok"
//                                       once the state it minted comes back
//   multiple_inputs
//                                       asks `user_name`, `greeting` (sampling) and
//                                       `client_roots` at once, with a requestState
//   multi_round   asks `step1` (name), then `step2` (color) with a new
//                                       requestState, then answers
//   tampered_state
//                                       asks `confirm` with a requestState
//   capabilities  asks only what the request's client capabilities allow:
//                                       elicitation `user_name` and/or sampling `greeting`
// Its one prompt, `prompt` (the suite's `test_input_required_result_prompt`), asks
// `user_context` (elicitation, {context}) before it answers one user message naming the context;
// its one resource, `up://confirmed`, asks `confirm` (elicitation, {ok}) before it reads
// "confirmed".
// Every answer also carries, as structuredContent, the client capabilities and inputResponses the
// request brought, so a test can see exactly what airlock sent upstream.
// The requestState this server mints is HMAC-sealed by the SDK's codec; a changed one is refused.
// Usage: node mrtr.mjs. Prints the port on the first line of stdout; stops when stdin
// closes.
import http from "node:http";
import { randomBytes } from "node:crypto";
import {
  McpServer,
  createMcpHandler,
  createRequestStateCodec,
  inputRequired,
  inputResponse,
} from "@modelcontextprotocol/server";
import * as z from "zod";

const codec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });
const NAME = z.object({ name: z.string() });
const COLOR = z.object({ color: z.string() });
const OK = z.object({ ok: z.boolean() });

const askName = (message = "What is your name?") =>
  inputRequired.elicit({ message, requestedSchema: NAME });
const askSampling = (text, maxTokens) =>
  inputRequired.createMessage({
    messages: [{ role: "user", content: { type: "text", text } }],
    maxTokens,
  });

function seen(ctx) {
  const meta = { ...(ctx.mcpReq._meta ?? {}), ...(ctx.mcpReq.envelope ?? {}) };
  return {
    clientCapabilities: meta["io.modelcontextprotocol/clientCapabilities"] ?? null,
    inputResponses: ctx.mcpReq.inputResponses ?? null,
    requestState: ctx.mcpReq.requestState() ?? null,
  };
}

const done = (ctx, text) => ({
  content: [{ type: "text", text }],
  structuredContent: seen(ctx),
});

function accepted(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === "elicit" && view.action === "accept" ? view.content ?? {} : undefined;
}

const TOOLS = {
  elicitation: (ctx) => {
    const answer = accepted(ctx, "user_name");
    if (!answer || typeof answer.name !== "string") {
      return inputRequired({ inputRequests: { user_name: askName() } });
    }
    return done(ctx, `Hello, ${answer.name}!`);
  },
  sampling: (ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, "capital_question");
    if (view.kind !== "sampling") {
      const question = askSampling("What is the capital of France?", 100);
      return inputRequired({ inputRequests: { capital_question: question } });
    }
    return done(ctx, `The model said: ${view.result.content?.text ?? ""}`);
  },
  list_roots: (ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, "client_roots");
    if (view.kind !== "roots") {
      return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    }
    return done(ctx, `Roots: ${view.roots.map((r) => r.uri).join(", ")}`);
  },
  request_state: async (ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state?.step !== "confirm" || !accepted(ctx, "confirm")) {
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({ message: "Please confirm", requestedSchema: OK }),
        },
        requestState: await codec.mint({ step: "confirm" }),
      });
    }
    return done(ctx, "state-ok: the requestState came back unchanged");
  },
  multiple_inputs: async (ctx) => {
    const name = accepted(ctx, "user_name");
    const greeting = inputResponse(ctx.mcpReq.inputResponses, "greeting");
    const roots = inputResponse(ctx.mcpReq.inputResponses, "client_roots");
    if (!name || greeting.kind !== "sampling" || roots.kind !== "roots") {
      return inputRequired({
        inputRequests: {
          user_name: askName(),
          greeting: askSampling("Generate a greeting", 50),
          client_roots: inputRequired.listRoots(),
        },
        requestState: await codec.mint({ step: "all" }),
      });
    }
    return done(ctx, `Hello, ${name.name}! (${roots.roots.length} roots)`);
  },
  multi_round: async (ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state?.step === "step2") {
      const color = accepted(ctx, "step2");
      if (color && typeof color.color === "string") {
        return done(ctx, `${state.name} likes ${color.color}`);
      }
    }
    const name = state?.step === "step1" ? accepted(ctx, "step1") : undefined;
    if (name && typeof name.name === "string") {
      return inputRequired({
        inputRequests: {
          step2: inputRequired.elicit({
            message: "Step 2: What is your favorite color?",
            requestedSchema: COLOR,
          }),
        },
        requestState: await codec.mint({ step: "step2", name: name.name }),
      });
    }
    return inputRequired({
      inputRequests: { step1: askName("Step 1: What is your name?") },
      requestState: await codec.mint({ step: "step1" }),
    });
  },
  tampered_state: async (ctx) => {
    if (ctx.mcpReq.requestState()?.step === "confirm" && accepted(ctx, "confirm")) {
      return done(ctx, "confirmed");
    }
    return inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({ message: "Please confirm", requestedSchema: OK }),
      },
      requestState: await codec.mint({ step: "confirm" }),
    });
  },
  capabilities: (ctx) => {
    const caps = seen(ctx).clientCapabilities ?? {};
    const requests = {};
    if (caps.elicitation && !accepted(ctx, "user_name")) requests.user_name = askName();
    if (caps.sampling && inputResponse(ctx.mcpReq.inputResponses, "greeting").kind !== "sampling") {
      requests.greeting = askSampling("Generate a greeting", 50);
    }
    if (Object.keys(requests).length === 0) return done(ctx, "nothing to ask");
    return inputRequired({ inputRequests: requests });
  },
};

function server() {
  const mcp = new McpServer(
    { name: "airlock-mrtr-fixture", version: "1.0.0" },
    { requestState: { verify: codec.verify } },
  );
  for (const [name, handler] of Object.entries(TOOLS)) {
    mcp.registerTool(
      name,
      { description: `The conformance suite's test_input_required_result_${name}.`, inputSchema: z.object({}) },
      async (_args, ctx) => handler(ctx),
    );
  }
  mcp.registerPrompt(
    "prompt",
    { description: "The conformance suite's test_input_required_result_prompt." },
    async (ctx) => {
      const answer = accepted(ctx, "user_context");
      if (!answer || typeof answer.context !== "string") {
        const ask = inputRequired.elicit({
          message: "What context should the prompt use?",
          requestedSchema: z.object({ context: z.string() }),
        });
        return inputRequired({ inputRequests: { user_context: ask } });
      }
      const text = `Use this context: ${answer.context}`;
      return { messages: [{ role: "user", content: { type: "text", text } }] };
    },
  );
  mcp.registerResource(
    "confirmed",
    "up://confirmed",
    { description: "Read once the client confirms.", mimeType: "text/plain" },
    async (uri, ctx) => {
      if (!accepted(ctx, "confirm")) {
        const ask = inputRequired.elicit({ message: "Read it?", requestedSchema: OK });
        return inputRequired({ inputRequests: { confirm: ask } });
      }
      return { contents: [{ uri: uri.href, mimeType: "text/plain", text: "confirmed" }] };
    },
  );
  return mcp;
}

const handler = createMcpHandler(() => server());

const httpServer = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [key, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(key, value);
  }
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers,
    body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
  });
  try {
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (e) {
    res.writeHead(500).end(String(e));
  }
});

httpServer.listen(0, "127.0.0.1", () => {
  console.log(httpServer.address().port);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
