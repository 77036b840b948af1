// A legacy (2025-11-25) MCP server with the tools the conformance suite's tasks scenarios call,
// built on the TypeScript SDK 1.x and its experimental tasks (`registerToolTask`). It has no
// 2026-07-28 code path: every task a 2026 client sees through the gateway is the gateway's
// translation of these legacy tasks.
//
//   greet {name}                sync: "Hello, <name>!"
//   slow_compute {seconds,label} taskSupport optional: sleeps, then a result; a cancel ends it
//   failing_job                 taskSupport required: a tool error (isError) after ~1 s
//   protocol_error_job          taskSupport optional: the task fails with no result, so the
//                               legacy tasks/result answers a JSON-RPC error
//   confirm_delete {filename}   taskSupport optional: one elicitation inside the task
//   multi_input                 taskSupport optional: two elicitations at once inside the task
//   test_tool_with_task         taskSupport required: asks the user's name before it creates
//                               its task (the legacy way, inside the tools/call), then a task
//                               whose result names the answer
//
// Usage: node tasks_fixture_server.mjs --stdio | --http PORT   (HTTP binds 127.0.0.1 only)

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Stores a result unless the task ended meanwhile (a cancel): the store refuses that.
async function settle(store, taskId, status, result) {
  try {
    await store.storeTaskResult(taskId, status, result);
  } catch {
    // cancelled or expired: nothing to store
  }
}

function text(t) {
  return { content: [{ type: 'text', text: t }] };
}

function askConfirm(extra, taskId, message) {
  return extra.sendRequest(
    {
      method: 'elicitation/create',
      params: {
        message,
        requestedSchema: {
          type: 'object',
          properties: { confirm: { type: 'boolean', title: 'Confirm' }, name: { type: 'string' } },
        },
      },
    },
    ElicitResultSchema,
    { relatedTask: { taskId } },
  );
}

// The handlers every task tool shares: the store answers tasks/get and tasks/result.
function taskTool(run) {
  return {
    async createTask(args, extra) {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: 200 });
      run(args, extra, task.taskId).catch((e) =>
        extra.taskStore.updateTaskStatus(task.taskId, 'failed', String(e)).catch(() => {}),
      );
      return { task };
    },
    getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  };
}

function createServer() {
  const server = new McpServer(
    { name: 'tasks-fixture', version: '1.0.0' },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue,
    },
  );
  server.registerTool('greet', { inputSchema: { name: z.string() } }, async ({ name }) => text(`Hello, ${name}!`));
  const tasks = server.experimental.tasks;
  tasks.registerToolTask(
    'slow_compute',
    { inputSchema: { seconds: z.number(), label: z.string().optional() }, execution: { taskSupport: 'optional' } },
    taskTool(async ({ seconds, label }, extra, taskId) => {
      await sleep(seconds * 1000);
      await settle(extra.taskStore, taskId, 'completed', text(`computed ${label ?? ''} in ${seconds}s`));
    }),
  );
  tasks.registerToolTask(
    'failing_job',
    { inputSchema: {}, execution: { taskSupport: 'required' } },
    taskTool(async (_args, extra, taskId) => {
      await sleep(1000);
      await settle(extra.taskStore, taskId, 'completed', { isError: true, ...text('the job failed') });
    }),
  );
  tasks.registerToolTask(
    'protocol_error_job',
    { inputSchema: {}, execution: { taskSupport: 'optional' } },
    taskTool(async (_args, extra, taskId) => {
      await sleep(300);
      await extra.taskStore.updateTaskStatus(taskId, 'failed', 'internal failure');
    }),
  );
  tasks.registerToolTask(
    'confirm_delete',
    { inputSchema: { filename: z.string() }, execution: { taskSupport: 'optional' } },
    taskTool(async ({ filename }, extra, taskId) => {
      await extra.taskStore.updateTaskStatus(taskId, 'input_required', 'waiting for confirmation');
      const answer = await askConfirm(extra, taskId, `Delete ${filename}?`);
      await extra.taskStore.updateTaskStatus(taskId, 'working');
      const done = answer.action === 'accept' && answer.content?.confirm ? 'deleted' : 'kept';
      await settle(extra.taskStore, taskId, 'completed', text(`${filename} ${done}`));
    }),
  );
  tasks.registerToolTask(
    'multi_input',
    { inputSchema: {}, execution: { taskSupport: 'optional' } },
    taskTool(async (_args, extra, taskId) => {
      await extra.taskStore.updateTaskStatus(taskId, 'input_required', 'waiting for two answers');
      const answers = await Promise.all([
        askConfirm(extra, taskId, 'First input?'),
        askConfirm(extra, taskId, 'Second input?'),
      ]);
      await extra.taskStore.updateTaskStatus(taskId, 'working');
      const names = answers.map((a) => a.content?.name ?? a.action).join(', ');
      await settle(extra.taskStore, taskId, 'completed', text(`got ${names}`));
    }),
  );
  tasks.registerToolTask(
    'test_tool_with_task',
    { inputSchema: {}, execution: { taskSupport: 'required' } },
    {
      async createTask(_args, extra) {
        const answer = await extra.sendRequest(
          {
            method: 'elicitation/create',
            params: {
              message: 'What is your name?',
              requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
            },
          },
          ElicitResultSchema,
        );
        const name = answer.content?.name ?? 'nobody';
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: 200 });
        setTimeout(() => settle(extra.taskStore, task.taskId, 'completed', text(`Hello, ${name}, from a task`)), 200);
        return { task };
      },
      getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  return server;
}

async function serveHttp(port) {
  const sessions = new Map();
  const httpServer = http.createServer(async (req, res) => {
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    let body;
    if (req.method === 'POST') {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400).end();
        return;
      }
    }
    const id = req.headers['mcp-session-id'];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      if (id || req.method !== 'POST' || body?.method !== 'initialize') {
        res.writeHead(id ? 404 : 400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Server not initialized' }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await createServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  httpServer.listen(port, '127.0.0.1', () => console.error(`tasks fixture listening on 127.0.0.1:${port}`));
}

const args = process.argv.slice(2);
if (args[0] === '--http') {
  await serveHttp(Number(args[1] ?? process.env.FIXTURE_PORT));
} else if (args[0] === '--stdio') {
  await createServer().connect(new StdioServerTransport());
} else {
  console.error('usage: tasks_fixture_server.mjs --stdio | --http PORT');
  process.exit(2);
}
