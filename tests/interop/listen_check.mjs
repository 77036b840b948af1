// Drive the real TypeScript MCP client's `subscriptions/listen` (@modelcontextprotocol/client
// 2.4.0, pinned to 2026-07-28) through a gateway:
//   - the acknowledged filter (the SDK's `honoredFilter`) must be exactly --honoured;
//   - with --bump URI, a call of the upstream's --tool (default `bump_counter`) must bring a
//     `notifications/resources/updated` for URI to the client's handler, and no list change
//     (the stream did not ask for one) before it;
//   - `close()` must end the subscription as 'local'.
//
// With --stdio JSON (an array: the command and its arguments) instead of --url, the client
// launches that command (the gateway's stdio front) and speaks to it over its pipes.
//
// Prints `CHECK PASS|FAIL ts <target> <detail>` per check; exits 1 if any failed.
//
// Usage: node listen_check.mjs (--url URL | --stdio JSON) --target LABEL --filter JSON
//          --honoured JSON [--bump URI [--tool NAME]] [--timeout SECONDS]

import { isDeepStrictEqual } from 'node:util';
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    stdio: { type: 'string' },
    target: { type: 'string', default: 'listen' },
    filter: { type: 'string' },
    honoured: { type: 'string' },
    bump: { type: 'string' },
    tool: { type: 'string', default: 'bump_counter' },
    timeout: { type: 'string', default: '60' },
  },
});
const timeoutMs = Number(opts.timeout) * 1000;
let failed = 0;

function report(ok, label, detail) {
  if (!ok) failed += 1;
  console.log(`CHECK ${ok ? 'PASS' : 'FAIL'} ts ${opts.target} ${label} ${detail}`);
}

function within(what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${opts.timeout} s`)), timeoutMs);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// Sorted keys, so the comparison does not depend on the order the server wrote them in.
function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return value;
}

function transport() {
  if (!opts.stdio) return new StreamableHTTPClientTransport(new URL(opts.url));
  const [command, ...args] = JSON.parse(opts.stdio);
  return new StdioClientTransport({ command, args, stderr: 'ignore' });
}

async function main() {
  const client = new Client(
    { name: 'mrtr-interop-listen', version: '1.0.0' },
    { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  const seen = [];
  let updated;
  const arrived = new Promise((resolve) => {
    updated = resolve;
  });
  client.setNotificationHandler('notifications/resources/updated', (note) => {
    seen.push(`updated ${note.params?.uri}`);
    if (note.params?.uri === opts.bump) updated();
  });
  client.setNotificationHandler('notifications/resources/list_changed', () => seen.push('resources/list_changed'));
  client.setNotificationHandler('notifications/tools/list_changed', () => seen.push('tools/list_changed'));
  await within('connection', client.connect(transport()));
  try {
    const subscription = await within('acknowledgement', client.listen(JSON.parse(opts.filter), { timeout: timeoutMs }));
    const honoured = canonical(subscription.honoredFilter);
    const wanted = canonical(JSON.parse(opts.honoured));
    report(isDeepStrictEqual(honoured, wanted), 'acknowledged', JSON.stringify(honoured));
    if (opts.bump) {
      const result = await within(`${opts.tool} result`, client.callTool({ name: opts.tool, arguments: {} }, undefined, { timeout: timeoutMs }));
      if (result?.isError) throw new Error(`${opts.tool} answered an error result`);
      await within(`notifications/resources/updated for ${opts.bump}`, arrived);
      const onlyUpdates = seen.every((s) => s.startsWith('updated '));
      report(onlyUpdates, 'updated', `received: ${seen.join(', ')}`);
    }
    await subscription.close();
    const how = await within('the end of the subscription', subscription.closed);
    report(how === 'local', 'closed', how);
  } finally {
    await client.close().catch(() => {});
  }
}

main()
  .catch((error) => report(false, 'run', String(error?.message ?? error).slice(0, 300)))
  .finally(() => process.exit(failed ? 1 : 0));
