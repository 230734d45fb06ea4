// An MCP upstream that runs tools as tasks (2026-07-28, the `io.modelcontextprotocol/tasks`
// extension, SEP-2663), built with the official TypeScript SDK v2: stateless, on 127.0.0.1 with
// a port from the OS, served through the SDK's `createMcpHandler` (a fresh server per request;
// the tasks live in this process). The tools are the ones the MCP conformance suite's tasks
// scenarios call, with the behaviour they check:
//   greet               sync only: "Hello, {name}!"
//   slow_compute        task support optional: with the extension declared in the request's
//                       client capabilities it answers a task that completes after `seconds`
//                       with "Computed {label} in {seconds}s" (settles `cancelled` when
//                       cancelled meanwhile); without it, the same result synchronously
//   failing_job         task support required: a task that completes after ~1 s with a tool
//                       error (isError); without the extension, -32021 naming the extension
//   protocol_error_job  task support optional: a task that fails after ~0.2 s with a JSON-RPC
//                       error (-32603) instead of a result
//   test_tool_with_task task support optional: asks `user_name` (elicitation, {name}) first,
//                       an input round before any task (SEP-2322); answered, it greets the
//                       name: a task completing after ~0.2 s with the extension, else at once
//   confirm_delete      task support required: a task that waits for one input (`confirm`, an
//                       elicitation) and then completes "Deleted {filename}" (or "Kept ...")
//   multi_input         task support required: a task that waits for two inputs at once
//                       (`name` and `confirm`), completing once both are answered
// tasks/get answers the task (its result or error inlined once terminal, its pending
// inputRequests while input_required), tasks/update records the responses to pending keys
// (others are ignored) and resumes the task once none is pending, tasks/cancel acks (also on a
// terminal task); an unknown task id is -32602.
// Usage: node tasks.mjs. Prints the port on the first line of stdout; stops when stdin closes.
import http from "node:http";
import {
  ProtocolError,
  Server,
  createMcpHandler,
  inputRequired,
  inputResponse,
} from "@modelcontextprotocol/server";
import * as z from "zod";

const TASKS = "io.modelcontextprotocol/tasks";
const CAPS = "io.modelcontextprotocol/clientCapabilities";
const TTL_MS = 600_000;
const POLL_MS = 100;

/** The tasks this process runs, by id. */
const tasks = new Map();
let next = 0;

const TOOLS = [
  {
    name: "greet",
    description: "Says hello.",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  },
  {
    name: "slow_compute",
    description: "Computes for `seconds`, as a task when the client supports tasks.",
    inputSchema: {
      type: "object",
      properties: { seconds: { type: "number" }, label: { type: "string" } },
    },
    execution: { taskSupport: "optional" },
  },
  {
    name: "failing_job",
    description: "A task that always ends with a tool error.",
    inputSchema: { type: "object" },
    execution: { taskSupport: "required" },
  },
  {
    name: "test_tool_with_task",
    description: "Asks for a name, then greets it as a task when the client supports tasks.",
    inputSchema: { type: "object" },
    execution: { taskSupport: "optional" },
  },
  {
    name: "confirm_delete",
    description: "Asks to confirm, inside its task, before deleting `filename`.",
    inputSchema: { type: "object", properties: { filename: { type: "string" } } },
    execution: { taskSupport: "required" },
  },
  {
    name: "multi_input",
    description: "Asks for a name and a confirmation at once, inside its task.",
    inputSchema: { type: "object" },
    execution: { taskSupport: "required" },
  },
  {
    name: "protocol_error_job",
    description: "A task that always fails with a protocol error.",
    inputSchema: { type: "object" },
    execution: { taskSupport: "optional" },
  },
];

const text = (t, isError = false) => ({ content: [{ type: "text", text: t }], ...(isError ? { isError } : {}) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts a task that settles through `work` (a result, or `{ error }`) after `ms`. */
function startTask(ms, work) {
  const now = new Date().toISOString();
  const task = { taskId: `upstream-task-${++next}`, status: "working", createdAt: now, lastUpdatedAt: now };
  tasks.set(task.taskId, task);
  setTimeout(() => {
    if (task.status !== "working") return;
    const settled = work();
    task.lastUpdatedAt = new Date().toISOString();
    if (settled.error) {
      task.status = "failed";
      task.error = settled.error;
    } else {
      task.status = "completed";
      task.result = settled;
    }
  }, ms);
  return { resultType: "task", ...envelope(task) };
}

/** Starts a task that waits for the client's answers to `asks` (input requests by key), then
 * completes with `finish(answers)`. */
function startAsking(asks, finish) {
  const now = new Date().toISOString();
  const task = {
    taskId: `upstream-task-${++next}`,
    status: "input_required",
    createdAt: now,
    lastUpdatedAt: now,
    pending: asks,
    answers: {},
    finish,
  };
  tasks.set(task.taskId, task);
  return { resultType: "task", ...envelope(task) };
}

const confirmAsk = (message) =>
  inputRequired.elicit({ message, requestedSchema: z.object({ confirm: z.boolean() }) });

/** Records `responses` to the task's pending input requests; with none left, it completes. */
function update(task, responses) {
  if (task.status !== "input_required") return;
  for (const [key, response] of Object.entries(responses ?? {})) {
    if (!(key in task.pending)) continue;
    task.answers[key] = response;
    delete task.pending[key];
  }
  task.lastUpdatedAt = new Date().toISOString();
  if (Object.keys(task.pending).length > 0) return;
  task.status = "completed";
  task.result = task.finish(task.answers);
}

function envelope(task) {
  const { taskId, status, createdAt, lastUpdatedAt } = task;
  return { taskId, status, createdAt, lastUpdatedAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS };
}

function known(taskId) {
  const task = tasks.get(taskId);
  if (!task) throw new ProtocolError(-32602, `unknown task: ${taskId}`);
  return task;
}

async function call(request, ctx) {
  const { name, arguments: args = {} } = request.params;
  const wantsTask = Boolean(ctx.mcpReq.envelope?.[CAPS]?.extensions?.[TASKS]);
  const seconds = Number(args.seconds ?? 0);
  const computed = () => text(`Computed ${args.label ?? "result"} in ${seconds}s`);
  switch (name) {
    case "greet":
      return text(`Hello, ${args.name}!`);
    case "slow_compute":
      if (wantsTask) return startTask(seconds * 1000, computed);
      await sleep(seconds * 1000);
      return computed();
    case "failing_job":
      if (!wantsTask) {
        throw new ProtocolError(-32021, `failing_job requires the ${TASKS} extension`, {
          requiredCapabilities: { extensions: { [TASKS]: {} } },
        });
      }
      return startTask(1000, () => text("failing_job failed: the job reported an error", true));
    case "test_tool_with_task": {
      const view = inputResponse(ctx.mcpReq.inputResponses, "user_name");
      const answered = view.kind === "elicit" && view.action === "accept" ? view.content : undefined;
      if (typeof answered?.name !== "string") {
        const ask = inputRequired.elicit({
          message: "What is your name?",
          requestedSchema: z.object({ name: z.string() }),
        });
        return inputRequired({ inputRequests: { user_name: ask } });
      }
      const greeting = () => text(`Hello, ${answered.name}!`);
      return wantsTask ? startTask(200, greeting) : greeting();
    }
    case "confirm_delete":
    case "multi_input":
      if (!wantsTask) {
        throw new ProtocolError(-32021, `${name} requires the ${TASKS} extension`, {
          requiredCapabilities: { extensions: { [TASKS]: {} } },
        });
      }
      if (name === "confirm_delete") {
        const file = String(args.filename ?? "the file");
        return startAsking({ confirm: confirmAsk(`Delete ${file}?`) }, (answers) =>
          text(`${answers.confirm?.content?.confirm ? "Deleted" : "Kept"} ${file}`),
        );
      }
      return startAsking(
        {
          name: inputRequired.elicit({ message: "Your name?", requestedSchema: z.object({ name: z.string() }) }),
          confirm: confirmAsk("Proceed?"),
        },
        (answers) => text(`Answered ${Object.keys(answers).sort().join(", ")}`),
      );
    case "protocol_error_job":
      if (!wantsTask) throw new ProtocolError(-32603, "protocol_error_job crashed");
      return startTask(200, () => ({ error: { code: -32603, message: "protocol_error_job crashed" } }));
    default:
      throw new ProtocolError(-32602, `unknown tool: ${name}`);
  }
}

function mcpServer() {
  const server = new Server(
    { name: "airlock-tasks-fixture", version: "1.0.0" },
    { capabilities: { tools: {}, extensions: { [TASKS]: {} } } },
  );
  server.setRequestHandler("tools/list", async () => ({ tools: TOOLS }));
  server.setRequestHandler("tools/call", call);
  const byId = { params: z.object({ taskId: z.string() }).passthrough() };
  server.setRequestHandler("tasks/get", byId, async ({ taskId }) => {
    const task = known(taskId);
    const detailed = envelope(task);
    if (task.status === "completed") detailed.result = task.result;
    if (task.status === "failed") detailed.error = task.error;
    if (task.status === "input_required") detailed.inputRequests = task.pending;
    return detailed;
  });
  // The SDK lifts a request's `inputResponses` into the context, as for any MRTR retry.
  server.setRequestHandler("tasks/update", byId, async ({ taskId }, ctx) => {
    update(known(taskId), ctx.mcpReq.inputResponses);
    return {};
  });
  server.setRequestHandler("tasks/cancel", byId, async ({ taskId }) => {
    const task = known(taskId);
    if (task.status === "working" || task.status === "input_required") {
      task.status = "cancelled";
      task.lastUpdatedAt = new Date().toISOString();
    }
    return {};
  });
  return server;
}

const handler = createMcpHandler(mcpServer);

const httpServer = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers: req.headers,
    body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
  });
  const response = await handler.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});

httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
