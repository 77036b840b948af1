// Tests of conformance_runner.mjs with a stand-in CLI (CONFORMANCE_CLI), so the
// runner's process and exit-code rules are checked without the real suite
// (node --test conformance_runner.test.mjs). The stand-in lists the pinned
// suite's real required and pending server scenarios unless told otherwise.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { parseRequirements } from './baseline.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REQUIREMENTS = readFileSync(
  join(HERE, 'node_modules/@modelcontextprotocol/conformance/requirements/2026-07-28.yaml'),
  'utf8',
);
const REQUIRED = parseRequirements(REQUIREMENTS);
const PENDING = YAML.parse(REQUIREMENTS)
  .not_scored.filter((e) => e.leg === 'server' && e.reason === 'pending')
  .map((e) => e.scenario);
const ALL = [...REQUIRED, ...PENDING];
const WAIT_MS = 20_000;

const FAKE_CLI = `#!/usr/bin/env bash
if [[ $1 == list ]]; then
  echo "Server scenarios (test against a server):"
  for s in $FAKE_LIST; do echo "  - $s"; done
  echo
  echo "Client scenarios (test against a client):"
  echo "  - tools_call"
  echo
  echo "Run and reported, but never scored:"
  echo "  extension (1):"
  echo "    - tasks-lifecycle [server]"
  echo "  pending (2):"
  for s in $FAKE_PENDING; do echo "    - $s [server]"; done
  echo "    - some-client-scenario [client]"
  exit 0
fi
while (($#)); do case $1 in --scenario) S=$2; shift ;; -o) D=$2; shift ;; esac; shift; done
write() { mkdir -p "$D/server-$S-1"; printf '%s' "$1" >"$D/server-$S-1/checks.json"; }
case $FAKE_MODE in
  hang) sleep 300 & echo "$$ $!" >"$FAKE_PIDS"; wait ;;
  pass) write '[{"id":"c1","status":"SUCCESS"}]' ;;
  fail-pending) if [[ " $FAKE_PENDING " == *" $S "* ]]; then write '[{"id":"c1","status":"FAILURE"}]'; exit 1; fi
    write '[{"id":"c1","status":"SUCCESS"}]' ;;
  exit1-no-failure) write '[{"id":"c1","status":"SUCCESS"}]'; exit 1 ;;
  fail-exit1) write '[{"id":"c1","status":"FAILURE"}]'; exit 1 ;;
  empty) write '[]' ;;
  skipped) echo "SKIPPED: not applicable" ;;
esac
`;

const dirs = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'conformance-runner-test-'));
  dirs.push(dir);
  const cli = join(dir, 'fake-cli');
  writeFileSync(cli, FAKE_CLI);
  chmodSync(cli, 0o755);
  return { dir, cli };
}

// Runs the runner; resolves {code, signal, out}. `onStart(child)` may signal it.
function runRunner({ dir, cli }, args, env, onStart = () => {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(HERE, 'conformance_runner.mjs'), '--url', 'http://127.0.0.1:9/mcp', '--out', join(dir, 'out'), ...args],
      {
        env: { ...process.env, CONFORMANCE_CLI: cli, FAKE_LIST: REQUIRED.join(' '), FAKE_PENDING: PENDING.join(' '), ...env },
      },
    );
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`runner did not end within ${WAIT_MS} ms: ${out}`));
    }, WAIT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
    onStart(child);
  });
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function waitFor(predicate, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('SIGTERM to the runner ends the CLI and everything in its process group', async () => {
  const env = setup();
  const pidsFile = join(env.dir, 'pids');
  let pids = [];
  const { code, out } = await runRunner(env, ['--scenarios', REQUIRED[0]], { FAKE_MODE: 'hang', FAKE_PIDS: pidsFile }, (child) => {
    waitFor(() => {
      try {
        pids = readFileSync(pidsFile, 'utf8').trim().split(' ').map(Number);
        return pids.length === 2;
      } catch {
        return false;
      }
    }, 'the stand-in CLI').then(() => child.kill('SIGTERM'));
  });
  assert.equal(code, 143, out);
  await waitFor(() => pids.every((pid) => !alive(pid)), `pids ${pids} to end`);
});

test('a narrowed run of passing scenarios passes and says it was narrowed', async () => {
  const { code, out } = await runRunner(setup(), ['--scenarios', REQUIRED.slice(0, 2).join(','), '--baseline', ''], {
    FAKE_MODE: 'pass',
  });
  assert.equal(code, 0, out);
  assert.match(out, /CONFORMANCE NARROWED running 2 of the \d+ required and pending scenarios/);
  assert.match(out, /missing=0/);
});

test('a second run into the same --out never reads the first run\'s checks', async () => {
  const env = setup();
  const args = ['--scenarios', REQUIRED[0], '--baseline', ''];
  assert.equal((await runRunner(env, args, { FAKE_MODE: 'pass' })).code, 0);
  const { code, out } = await runRunner(env, args, { FAKE_MODE: 'skipped' });
  assert.equal(code, 1, out);
  assert.match(out, new RegExp(`^CONFORMANCE MISSING ${REQUIRED[0]} `, 'm'));
});

test('every required and pending scenario runs by default, each by name', async () => {
  const { code, out } = await runRunner(setup(), ['--baseline', ''], { FAKE_MODE: 'pass' });
  assert.equal(code, 0, out);
  for (const scenario of REQUIRED) assert.match(out, new RegExp(`^CONFORMANCE PASS ${scenario} 1/1 warnings=0$`, 'm'));
  for (const scenario of PENDING) {
    assert.match(out, new RegExp(`^CONFORMANCE PASS ${scenario} 1/1 warnings=0 pending$`, 'm'));
  }
  assert.match(
    out,
    new RegExp(`scenarios=${ALL.length} required=${REQUIRED.length} pending=${PENDING.length} not_run=0 `),
  );
});

test('the pinned suite lists the header scenarios as pending', () => {
  for (const scenario of ['http-header-validation', 'http-custom-header-server-validation', 'json-schema-2020-12']) {
    assert.ok(PENDING.includes(scenario), `${scenario} in ${PENDING}`);
  }
});

test('a pending scenario that fails fails the run', async () => {
  const { code, out } = await runRunner(setup(), ['--baseline', ''], { FAKE_MODE: 'fail-pending' });
  assert.equal(code, 1, out);
  assert.match(out, new RegExp(`^CONFORMANCE FAIL ${PENDING[0]} 0/1 warnings=0 pending unexpected: c1`, 'm'));
  assert.match(out, /unexpected_failures=\d+ /);
  assert.doesNotMatch(out, new RegExp(`CONFORMANCE FAIL ${REQUIRED[0]} `));
});

test('a pending scenario that fails with a baseline entry is an expected failure', async () => {
  const env = setup();
  const baseline = join(env.dir, 'baseline.yml');
  writeFileSync(baseline, `server:\n${PENDING.map((s) => `  - ${s}:c1 # known`).join('\n')}\n`);
  const { code, out } = await runRunner(env, ['--baseline', baseline], { FAKE_MODE: 'fail-pending' });
  assert.equal(code, 0, out);
  for (const scenario of PENDING) assert.match(out, new RegExp(`^CONFORMANCE XFAIL ${scenario} 0/1`, 'm'));
});

test('a baseline entry for a pending scenario that passes is stale', async () => {
  const env = setup();
  const baseline = join(env.dir, 'baseline.yml');
  writeFileSync(baseline, `server:\n  - ${PENDING[0]} # was failing\n`);
  const { code, out } = await runRunner(env, ['--scenarios', PENDING[0], '--baseline', baseline], { FAKE_MODE: 'pass' });
  assert.equal(code, 1, out);
  assert.match(out, new RegExp(`CONFORMANCE STALE ${PENDING[0]} `));
});

test('a CLI that lists other pending scenarios than the requirements file stops the runner', async () => {
  const { code, out } = await runRunner(setup(), ['--baseline', ''], {
    FAKE_MODE: 'pass',
    FAKE_PENDING: PENDING.slice(1).join(' '),
  });
  assert.equal(code, 2, out);
  assert.match(out, new RegExp(`disagree on pending scenarios: ${PENDING[0]}`));
});

for (const [mode, why] of [
  ['exit1-no-failure', /unexpected: <exit-code>/],
  ['empty', /unexpected: <no-checks>/],
  ['skipped', /unexpected: <crash>.*exit 0, no checks.json/],
]) {
  test(`a scenario whose CLI run is '${mode}' fails the run`, async () => {
    const { code, out } = await runRunner(setup(), ['--scenarios', REQUIRED[0], '--baseline', ''], { FAKE_MODE: mode });
    assert.equal(code, 1, out);
    assert.match(out, why);
  });
}

test('a baselined failure that exits 1 is an expected failure', async () => {
  const env = setup();
  const baseline = join(env.dir, 'baseline.yml');
  writeFileSync(baseline, `server:\n  - ${REQUIRED[0]}:c1 # known\n`);
  const { code, out } = await runRunner(env, ['--scenarios', REQUIRED[0], '--baseline', baseline], { FAKE_MODE: 'fail-exit1' });
  assert.equal(code, 0, out);
  assert.match(out, new RegExp(`CONFORMANCE XFAIL ${REQUIRED[0]} 0/1`));
});

test('a baseline entry for a scenario the suite does not require fails the run', async () => {
  const env = setup();
  const baseline = join(env.dir, 'baseline.yml');
  writeFileSync(baseline, 'server:\n  - input-required-result-basic-elicitaton # misspelt\n');
  const { code, out } = await runRunner(env, ['--scenarios', REQUIRED[0], '--baseline', baseline], { FAKE_MODE: 'pass' });
  assert.equal(code, 1, out);
  assert.match(out, /CONFORMANCE UNKNOWN input-required-result-basic-elicitaton/);
});

test('a CLI list that disagrees with the requirements file stops the runner', async () => {
  const { code, out } = await runRunner(setup(), ['--baseline', ''], {
    FAKE_MODE: 'pass',
    FAKE_LIST: REQUIRED.slice(1).join(' '),
  });
  assert.equal(code, 2, out);
  assert.match(out, new RegExp(`disagree on required scenarios: ${REQUIRED[0]}`));
});

test('a scenario the pinned suite does not require is refused', async () => {
  const { code, out } = await runRunner(setup(), ['--scenarios', 'no-such-scenario', '--baseline', ''], { FAKE_MODE: 'pass' });
  assert.equal(code, 2, out);
  assert.match(out, /neither required nor pending in the pinned suite at 2026-07-28: no-such-scenario/);
});
