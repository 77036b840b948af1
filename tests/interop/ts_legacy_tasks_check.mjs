// A legacy client's own 2025-11-25 tasks, with the TypeScript SDK 1.x client (the
// @modelcontextprotocol/sdk server-everything is built on, pinned by package-lock.json):
// server-everything's simulate-research-query called as a legacy task with
// `experimental.tasks.callToolStream` (its `task` param, `tasks/get` polling, and the question
// the task asks delivered on the `tasks/result` stream and answered in-band by the client's
// elicitation handler), then `tasks/list`, and `tasks/cancel` of a second task. Run straight at
// the server (the control) and through the gateway's legacy relay; both must pass the same.
//
//   node ts_legacy_tasks_check.mjs --url URL --target LABEL [--timeout SECONDS]
//
// Prints `CHECK PASS|FAIL ts-legacy <target> <label> <detail>` per check; exits 1 on a failure.

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const TOOL = 'simulate-research-query';
const INTERPRETATIONS = ['programming', 'snake', 'comedy'];

const { values: args } = parseArgs({
  options: { url: { type: 'string' }, target: { type: 'string' }, timeout: { type: 'string', default: '60' } },
});

/** A connected client whose elicitation handler answers `answer` and counts the questions. */
async function connect(answer) {
  const client = new Client({ name: 'mrtr-interop-legacy-tasks', version: '1.0' },
    { capabilities: { elicitation: { form: {} } } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    return answer;
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(args.url)));
  return { client, asked };
}

async function research(client, topic, ambiguous) {
  const seen = { created: null, statuses: [], result: null, error: null };
  const stream = client.experimental.tasks.callToolStream({ name: TOOL, arguments: { topic, ambiguous } },
    undefined, { task: { ttl: 60000 }, timeout: Number(args.timeout) * 1000 });
  for await (const message of stream) {
    if (message.type === 'taskCreated') seen.created = message.task;
    if (message.type === 'taskStatus') seen.statuses.push(message.task.status);
    if (message.type === 'result') seen.result = message.result;
    if (message.type === 'error') seen.error = message.error;
  }
  return seen;
}

async function checkAnswered() {
  const choice = INTERPRETATIONS[randomBytes(1)[0] % INTERPRETATIONS.length];
  const topic = `python ${randomBytes(4).toString('hex')}`;
  const { client, asked } = await connect({ action: 'accept', content: { interpretation: choice } });
  try {
    const seen = await research(client, topic, true);
    const text = seen.result?.content?.map((c) => c.text ?? '').join('\n') ?? '';
    const problems = [];
    if (!seen.created?.taskId) problems.push('no taskCreated');
    if (seen.error) problems.push(`error: ${seen.error.message}`);
    if (asked.length !== 1 || !asked[0].includes(`The research query "${topic}"`)) {
      problems.push(`questions ${JSON.stringify(asked)}`);
    }
    if (!text.includes(`# Research Report: ${topic} (${choice})`)) problems.push(`report: ${text.slice(0, 120)}`);
    const listed = await client.experimental.tasks.listTasks();
    if (!listed.tasks.some((t) => t.taskId === seen.created?.taskId)) problems.push('tasks/list lacks the task');
    return [problems.length === 0, problems.join('; ') ||
      `one question answered in-band, statuses ${JSON.stringify(seen.statuses)}, listed`];
  } finally {
    await client.close();
  }
}

async function checkCancelled() {
  const { client } = await connect({ action: 'decline' });
  try {
    const params = { name: TOOL, arguments: { topic: 'python', ambiguous: false }, task: { ttl: 60000 } };
    const created = await client.request({ method: 'tools/call', params }, CreateTaskResultSchema);
    const id = created.task.taskId;
    const cancelled = await client.experimental.tasks.cancelTask(id);
    const after = await client.experimental.tasks.getTask(id);
    const ok = cancelled.status === 'cancelled' && after.status === 'cancelled';
    return [ok, `tasks/cancel answered ${cancelled.status}, tasks/get then ${after.status}`];
  } finally {
    await client.close();
  }
}

const CHECKS = { [`${TOOL}#legacy-task`]: checkAnswered, [`${TOOL}#legacy-cancel`]: checkCancelled };

let failed = 0;
for (const [label, check] of Object.entries(CHECKS)) {
  let ok;
  let detail;
  try {
    [ok, detail] = await check();
  } catch (error) {
    [ok, detail] = [false, `${error?.name}: ${error?.message}`];
  }
  if (!ok) failed += 1;
  console.log(`CHECK ${ok ? 'PASS' : 'FAIL'} ts-legacy ${args.target} ${label} ${detail}`);
}
process.exit(failed ? 1 : 0);
