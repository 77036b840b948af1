// Drive the real TypeScript MCP client (@modelcontextprotocol/client 2.4.0)
// through a URL and check every answer, with the same table (checks.json) as
// the Python check.
//
// Each check uses a fresh client whose elicitation, sampling and roots
// handlers (registered with setRequestHandler, which the SDK also uses to
// fulfil `input_required` rounds) answer with values unique to the check, and
// whose fetch counts the call's POSTs (one per round) and puts back the
// answer token the SDK drops from elicitation answers, so that an answer the
// gateway made up (a URL `accept` has no content to tell it by) fails. It then asserts the
// exact rounds and, in each, the exact questions of each kind (each the legacy
// server's own), the exact progress notes, a result that is not an error, and
// content only those answers could produce (rules in client_checks.mjs).
//
// Prints `CHECK PASS|FAIL ts <target> <label> <detail>` per check; exits 1 if
// any failed. --expect-refusal: every call must fail, with the refusal
// checks.json names for the server, and nothing else (the negative check).
//
// Usage: node ts_client_check.mjs --url URL --server everything|fixture
//          [--mode pin|auto|legacy] [--only a,b] [--target LABEL]
//          [--timeout SECONDS] [--expect-refusal] [--dir SCRATCH]

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client, SdkError, SdkErrorCode, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  ANSWER_META,
  bind,
  clip,
  label,
  loadTable,
  needs,
  newRecorder,
  prepare,
  refusalProblem,
  successDetail,
  verify,
  withAnswerTokens,
} from './client_checks.mjs';

const PINNED_VERSION = '2026-07-28';
const LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
// Per kind of question, the capability a client declares to be asked it.
const CAPABILITIES = {
  elicit: ['elicitation', { form: {}, url: {} }],
  sample: ['sampling', {}],
  roots: ['roots', { listChanged: true }],
};
// The SDK reports each input_required round to onprogress with this message;
// such a note is the client's own, not the server's progress.
const ROUND_NOTE = /^Fulfilling input required by /;

// === the recorder's answers ===

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

// Handlers for the kinds in `kinds` only (the client declares only those).
function installHandlers(client, rec, answer, kinds) {
  if (kinds.has('elicit')) client.setRequestHandler('elicitation/create', async (request) => {
    rec.note('elicit', 'elicitation/create', request.params);
    const action = answer.elicit ?? 'accept';
    const result = { action, _meta: { [ANSWER_META]: `answer-${rec.token}` } };
    if (action === 'accept' && request.params.mode !== 'url') {
      result.content = formAnswer(request.params.requestedSchema, rec.token);
    }
    return result;
  });
  if (kinds.has('sample')) client.setRequestHandler('sampling/createMessage', async (request) => {
    rec.note('sample', 'sampling/createMessage', request.params);
    const content = { type: 'text', text: `sampled-${rec.token}` };
    return { role: 'assistant', content, model: 'interop-model', stopReason: 'endTurn' };
  });
  if (kinds.has('roots')) client.setRequestHandler('roots/list', async (request) => {
    rec.note('roots', 'roots/list', request.params);
    return { roots: [{ uri: `file:///interop/${rec.token}`, name: `root-${rec.token}` }] };
  });
}

// A fetch that puts the answer token back on the call's elicitation answers
// (withAnswerTokens) and shows the recorder every POST body before sending it.
function countingFetch(rec) {
  return (url, init) => {
    if ((init?.method ?? 'GET').toUpperCase() === 'POST' && typeof init?.body === 'string') {
      init = { ...init, body: withAnswerTokens(init.body, rec.token) };
      rec.noteRequest(init.body);
    }
    return fetch(url, init);
  };
}

// === one check ===

function negotiation(mode) {
  return { mode: mode === 'pin' ? { pin: PINNED_VERSION } : mode };
}

async function invoke(client, check, rec, timeoutMs) {
  const onprogress = (note) => {
    if (!ROUND_NOTE.test(note?.message ?? '')) rec.progress += 1;
  };
  const options = { timeout: timeoutMs, onprogress };
  // The SDK merges a request's own `_meta` over its envelope: the per-request log level.
  const meta = check.log ? { _meta: { [LOG_LEVEL]: check.log } } : {};
  if (check.kind === 'prompt') {
    const prompt = await client.getPrompt({ name: check.name, arguments: check.args, ...meta }, options);
    return { text: prompt.messages.map((m) => m.content?.text ?? '').join('\n'), isError: false };
  }
  const result = await client.callTool({ name: check.name, arguments: check.args, ...meta }, options);
  return { text: (result.content ?? []).map((block) => block.text ?? '').join('\n'), isError: result.isError === true };
}

// The check's preparatory calls: each must succeed and ask nothing. Then the
// recorder starts afresh, so only the checked call is counted.
async function runBefore(client, check, rec, timeoutMs) {
  for (const call of check.before) {
    const result = await client.callTool({ name: call.name, arguments: call.args ?? {} }, { timeout: timeoutMs });
    const text = (result.content ?? []).map((block) => block.text ?? '').join('\n');
    if (result.isError === true) return `before-call ${call.name} has isError: ${clip(text)}`;
    if (rec.questions.length || rec.progress) return `before-call ${call.name} asked ${rec.questions.length} question(s)`;
  }
  rec.callPosts = 0;
  rec.logs.length = 0;
  return null;
}

async function runCheck(opts, entry) {
  const rec = newRecorder(randomBytes(4).toString('hex'));
  const check = bind(entry, rec.token, opts.dir);
  prepare(check);
  const kinds = needs(check);
  const capabilities = Object.fromEntries([...kinds].map((kind) => CAPABILITIES[kind]));
  const client = new Client(
    { name: 'mrtr-interop-ts', version: '1.0.0' },
    { capabilities, versionNegotiation: negotiation(opts.mode) },
  );
  installHandlers(client, rec, check.answer, kinds);
  client.setNotificationHandler('notifications/message', (note) => {
    rec.logs.push(JSON.stringify(note.params ?? null));
  });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(opts.url), { fetch: countingFetch(rec) }));
    const before = await runBefore(client, check, rec, opts.timeoutMs);
    if (before !== null) return [false, before];
    const outcome = await invoke(client, check, rec, opts.timeoutMs);
    const problem = verify(check, rec, outcome, opts.mode === 'pin');
    return problem === null ? [true, successDetail(rec)] : [false, problem];
  } finally {
    await client.close().catch(() => {});
  }
}

async function runRefusal(opts, entry) {
  const wanted = opts.refusals[opts.server].ts;
  try {
    const [ok, detail] = await runCheck(opts, entry);
    return [false, `expected a refusal, got a result (${ok ? 'ok' : detail})`];
  } catch (error) {
    const code = error instanceof SdkError ? error.code : `not an SdkError: ${error?.code}`;
    const problem = refusalProblem({ name: error?.name, message: error?.message, code }, wanted, SdkErrorCode.EraNegotiationFailed);
    return problem === null ? [true, `refused as expected: ${clip(error.message)}`] : [false, problem];
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
  console.log(`CHECK ${ok ? 'PASS' : 'FAIL'} ts ${opts.target} ${label(entry)} ${detail}`);
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
      dir: { type: 'string', default: '' },
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
    dir: values.dir,
  };
}

async function main() {
  const opts = options();
  const table = loadTable();
  if (!Array.isArray(table[opts.server])) throw new Error(`checks.json has no server '${opts.server}'`);
  opts.refusals = table._refusals;
  const picked = (c) => opts.only.size === 0 || opts.only.has(label(c)) || opts.only.has(c.name);
  // `modern` checks need a 2026-07-28 client.
  const runnable = (c) => opts.mode === 'pin' || !c.modern;
  const checks = table[opts.server].filter(picked).filter(runnable);
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
