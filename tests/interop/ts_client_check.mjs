// Drive the real TypeScript MCP client (@modelcontextprotocol/client 2.4.0)
// through a URL and check every answer, with the same table (checks.json) as
// the Python check.
//
// Each check uses a fresh client whose elicitation, sampling and roots
// handlers (registered with setRequestHandler, which the SDK also uses to
// fulfil `input_required` rounds) answer with values unique to the check, then
// asserts that the handler saw the legacy server's question and that the
// result holds content only those answers could produce.
//
// Prints `CHECK PASS|FAIL ts <target> <name> <detail>` per check; exits 1 if
// any failed. --expect-refusal: every call must fail (the negative check).
//
// Usage: node ts_client_check.mjs --url URL --server everything|fixture
//          [--mode pin|auto|legacy] [--only a,b] [--target LABEL]
//          [--timeout SECONDS] [--expect-refusal]

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const PINNED_VERSION = '2026-07-28';
const MAX_DETAIL = 200;
const CAPABILITIES = {
  elicitation: { form: {}, url: {} },
  sampling: {},
  roots: { listChanged: true },
};

// === the check table ===

function loadChecks(server) {
  const table = JSON.parse(readFileSync(new URL('./checks.json', import.meta.url), 'utf8'));
  if (!Array.isArray(table[server])) throw new Error(`checks.json has no server '${server}'`);
  return table[server];
}

function bind(check, token) {
  const sub = (value) => JSON.parse(JSON.stringify(value ?? null).replaceAll('{token}', token));
  return {
    name: check.name,
    kind: check.kind ?? 'tool',
    args: sub(check.args ?? {}),
    calls: check.calls ?? {},
    question: sub(check.question ?? ''),
    expect: sub(check.expect ?? []),
  };
}

function clip(text) {
  const flat = String(text).split(/\s+/).join(' ').trim();
  return flat.length <= MAX_DETAIL ? flat : `${flat.slice(0, MAX_DETAIL)}...`;
}

// === the recorder: token-derived answers, every question remembered ===

function fieldValue(name, spec, token) {
  if (spec.type === 'boolean') return true;
  if (spec.type === 'integer' || spec.type === 'number') return spec.default ?? 42;
  if (Array.isArray(spec.enum)) return spec.enum[0];
  return `${name}-${token}`;
}

function formAnswer(schema, token) {
  const properties = schema?.properties ?? {};
  const wanted = schema?.required?.length ? schema.required : Object.keys(properties);
  return Object.fromEntries(wanted.map((n) => [n, fieldValue(n, properties[n] ?? {}, token)]));
}

function newRecorder() {
  const token = randomBytes(4).toString('hex');
  const counts = { elicit: 0, sample: 0, roots: 0, progress: 0 };
  const questions = [];
  const note = (kind, params) => {
    counts[kind] += 1;
    if (params !== undefined) questions.push(JSON.stringify(params));
  };
  return { token, counts, questions, note };
}

function installHandlers(client, rec) {
  client.setRequestHandler('elicitation/create', async (request) => {
    rec.note('elicit', request.params);
    if (request.params.mode === 'url') return { action: 'accept' };
    return { action: 'accept', content: formAnswer(request.params.requestedSchema, rec.token) };
  });
  client.setRequestHandler('sampling/createMessage', async (request) => {
    rec.note('sample', request.params);
    const content = { type: 'text', text: `sampled-${rec.token}` };
    return { role: 'assistant', content, model: 'interop-model', stopReason: 'endTurn' };
  });
  client.setRequestHandler('roots/list', async () => {
    rec.note('roots', undefined);
    return { roots: [{ uri: `file:///interop/${rec.token}`, name: `root-${rec.token}` }] };
  });
}

// === one check ===

function negotiation(mode) {
  return { mode: mode === 'pin' ? { pin: PINNED_VERSION } : mode };
}

async function invoke(client, check, rec, timeoutMs) {
  const options = { timeout: timeoutMs, onprogress: () => (rec.counts.progress += 1) };
  if (check.kind === 'prompt') {
    const prompt = await client.getPrompt({ name: check.name, arguments: check.args }, options);
    return prompt.messages.map((m) => m.content?.text ?? '').join('\n');
  }
  const result = await client.callTool({ name: check.name, arguments: check.args }, options);
  const text = (result.content ?? []).map((block) => block.text ?? '').join('\n');
  return result.isError ? `[isError] ${text}` : text;
}

function verify(check, rec, text) {
  for (const [kind, minimum] of Object.entries(check.calls)) {
    if (rec.counts[kind] < minimum) return `${kind} handler ran ${rec.counts[kind]}x, wanted >= ${minimum}`;
  }
  if (check.question && !rec.questions.some((q) => q.includes(check.question))) {
    return `no question containing '${check.question}' reached the handlers`;
  }
  const missing = check.expect.find((fragment) => !text.includes(fragment));
  return missing === undefined ? null : `result lacks '${missing}': ${clip(text)}`;
}

async function runCheck(opts, entry) {
  const rec = newRecorder();
  const check = bind(entry, rec.token);
  const client = new Client(
    { name: 'mrtr-interop-ts', version: '1.0.0' },
    { capabilities: CAPABILITIES, versionNegotiation: negotiation(opts.mode) },
  );
  installHandlers(client, rec);
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(opts.url)));
    const text = await invoke(client, check, rec, opts.timeoutMs);
    const problem = verify(check, rec, text);
    const used = Object.entries(rec.counts).filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`);
    return problem === null ? [true, `ok (${used.join(',') || 'no callbacks'})`] : [false, problem];
  } finally {
    await client.close().catch(() => {});
  }
}

async function runRefusal(opts, entry) {
  try {
    const [ok, detail] = await runCheck(opts, entry);
    return [false, `expected a refusal, got a result (${ok ? 'ok' : detail})`];
  } catch (error) {
    return [true, `refused as expected: ${clip(error?.message ?? error)}`];
  }
}

function withDeadline(promise, ms) {
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve([false, `no answer within ${ms / 1000}s`]), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function runOne(opts, entry) {
  const runner = opts.expectRefusal ? runRefusal : runCheck;
  let verdict;
  try {
    verdict = await withDeadline(runner(opts, entry), opts.timeoutMs + 1000);
  } catch (error) {
    verdict = [false, clip(`${error?.name ?? 'Error'}: ${error?.message ?? error}`)];
  }
  const [ok, detail] = verdict;
  console.log(`CHECK ${ok ? 'PASS' : 'FAIL'} ts ${opts.target} ${entry.name} ${detail}`);
  return ok;
}

// === command line ===

function options() {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      server: { type: 'string' },
      mode: { type: 'string', default: 'pin' },
      only: { type: 'string', default: '' },
      target: { type: 'string', default: '' },
      timeout: { type: 'string', default: '60' },
      'expect-refusal': { type: 'boolean', default: false },
    },
  });
  if (!values.url || !values.server) throw new Error('--url and --server are required');
  if (!['pin', 'auto', 'legacy'].includes(values.mode)) throw new Error(`unknown --mode ${values.mode}`);
  return {
    url: values.url,
    server: values.server,
    mode: values.mode,
    only: new Set(values.only.split(',').map((s) => s.trim()).filter(Boolean)),
    target: values.target || values.server,
    timeoutMs: Number(values.timeout) * 1000,
    expectRefusal: values['expect-refusal'],
  };
}

async function main() {
  const opts = options();
  const checks = loadChecks(opts.server).filter((c) => opts.only.size === 0 || opts.only.has(c.name));
  if (checks.length === 0) throw new Error(`no check named in --only`);
  const results = [];
  for (const entry of checks) results.push(await runOne(opts, entry));
  return results.every(Boolean) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`ts_client_check: ${error?.message ?? error}`);
    process.exit(2);
  },
);
