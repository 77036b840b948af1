// A tiny loopback HTTP proxy that sends each request to the next upstream in
// turn. Put in front of two gateways that share a state key file, it makes a
// 2026-07-28 client's consecutive rounds of one call land on different
// gateways: the proof that a round started on one replica finishes on another.
//
// Responses (JSON or SSE) are streamed through unchanged. Each forwarded
// request is logged to stdout as `rr <n> <method> <path> -> <upstream index>`
// so the harness can assert that both upstreams served rounds. The proxy also
// remembers which upstream answered with each `requestState` (scanned in the
// response as it streams, before it reaches the client), and logs every
// request that carries one as
//   `rr-retry <n> state=<digest> sealed-by=<index|unknown> sent-to=<index>`
// so the harness can assert that every retry reached the other replica than
// the one that sealed its state.
//
// Usage: node round_robin_proxy.mjs --listen PORT --upstream URL --upstream URL

import { createHash } from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';

const LOOPBACK = '127.0.0.1';
const MAX_BODY_BYTES = 8 * 1024 * 1024;
const UPSTREAM_TIMEOUT_MS = 120_000;
const STATE_PATTERN = /"requestState"\s*:\s*"([^"\\]+)"/g;
const SCAN_TAIL = 64 * 1024; // response text kept between chunks, so a state split across two is still found
const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer'];

function options() {
  const { values } = parseArgs({
    options: {
      listen: { type: 'string' },
      upstream: { type: 'string', multiple: true, default: [] },
    },
  });
  const port = Number(values.listen);
  if (!Number.isInteger(port) || port <= 0) throw new Error('--listen PORT is required');
  const upstreams = values.upstream.map((u) => new URL(u));
  if (upstreams.length < 2) throw new Error('give at least two --upstream URLs');
  for (const u of upstreams) {
    if (u.hostname !== LOOPBACK) throw new Error(`upstream ${u} is not on ${LOOPBACK}`);
  }
  return { port, upstreams };
}

function forwardHeaders(headers, target) {
  const out = { ...headers, host: target.host };
  for (const name of HOP_BY_HOP) delete out[name];
  return out;
}

function fail(res, status, message) {
  if (res.headersSent) return res.destroy();
  res.writeHead(status, { 'content-type': 'text/plain' }).end(`${message}\n`);
}

function digest(state) {
  return createHash('sha256').update(state).digest('hex').slice(0, 16);
}

// requestState digest -> index of the upstream whose response carried it.
const sealedBy = new Map();

// Records every requestState in a response as its text streams past.
function stateScanner(index) {
  let text = '';
  return (chunk) => {
    text += chunk.toString('utf8');
    for (const match of text.matchAll(STATE_PATTERN)) {
      if (!sealedBy.has(digest(match[1]))) sealedBy.set(digest(match[1]), index);
    }
    text = text.slice(-SCAN_TAIL);
  };
}

function logRetry(served, index, body) {
  let state;
  try {
    state = JSON.parse(Buffer.concat(body).toString('utf8'))?.params?.requestState;
  } catch {
    return;
  }
  if (typeof state !== 'string') return;
  const key = digest(state);
  console.log(`rr-retry ${served} state=${key} sealed-by=${sealedBy.get(key) ?? 'unknown'} sent-to=${index}`);
}

function makeHandler(upstreams) {
  let served = 0;
  return (req, res) => {
    const index = served % upstreams.length;
    served += 1;
    const base = upstreams[index];
    const target = new URL(req.url, base);
    console.log(`rr ${served} ${req.method} ${req.url} -> ${index}`);
    const number = served;
    let size = 0;
    const body = [];
    const upstream = http.request(target, {
      method: req.method,
      headers: forwardHeaders(req.headers, target),
      timeout: UPSTREAM_TIMEOUT_MS,
    });
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, forwardHeaders(answer.headers, target));
      answer.on('data', stateScanner(index)); // runs before pipe forwards the chunk
      answer.pipe(res);
    });
    upstream.on('timeout', () => upstream.destroy(new Error('upstream timed out')));
    upstream.on('error', (error) => fail(res, 502, `round-robin proxy: upstream ${index}: ${error.message}`));
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        upstream.destroy(new Error('request body too large'));
        return;
      }
      body.push(chunk);
      upstream.write(chunk);
    });
    req.on('end', () => {
      logRetry(number, index, body);
      upstream.end();
    });
    res.on('close', () => upstream.destroy());
  };
}

function main() {
  const { port, upstreams } = options();
  const server = http.createServer(makeHandler(upstreams));
  server.requestTimeout = UPSTREAM_TIMEOUT_MS;
  server.listen(port, LOOPBACK, () => console.log(`round-robin proxy listening on ${LOOPBACK}:${port}`));
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

try {
  main();
} catch (error) {
  console.error(`round_robin_proxy: ${error.message}`);
  process.exit(2);
}
