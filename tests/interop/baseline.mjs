// The expected-failures baseline of the conformance runner: parsing it and
// judging one scenario's run against it. Kept apart from the runner so the
// strictness rules are unit-tested without running the CLI:
//   - an unlisted failure fails; a listed entry that now passes is stale;
//   - a WARNING (a SHOULD the server does not meet) counts as a failure: it
//     fails unless listed, and its entry goes stale once the warning is gone;
//   - every entry carries a reason;
//   - an entry naming a scenario the pinned suite does not require (misspelt,
//     or dropped by a new pin) is unknown and fails: it could never go stale;
//   - a scenario that produced no checks, crashed, or whose CLI exit code
//     disagrees with its checks.json fails (the CLI exits 1 exactly when the
//     scenario has a FAILURE check, so a baselined failure exits 1 and is
//     consistent; a 1 with no FAILURE, or a 0 with one, is not);
//   - every scenario that was to run must have run, by name.
//
// Grammar (same as the conformance CLI's --expected-failures file):
//   server:
//     - <scenario>              # reason: the whole scenario may fail
//     - <scenario>:<check-id>   # reason: only that check may fail

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';

// Pseudo check ids for a scenario that broke before or beside its checks.
export const CRASH = '<crash>';
export const NO_CHECKS = '<no-checks>';
export const EXIT_MISMATCH = '<exit-code>';

export function loadBaseline(path) {
  if (!path || !existsSync(path)) return [];
  return parseBaseline(readFileSync(path, 'utf8'), path);
}

// Entries with `used: false`; judge() marks the ones a failure matched.
export function parseBaseline(text, path = 'baseline') {
  const doc = YAML.parseDocument(text);
  if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0].message}`);
  const list = doc.get('server');
  if (list === undefined || list === null) return [];
  if (!YAML.isSeq(list)) throw new Error(`${path}: 'server' must be a list of entries`);
  return list.items.map((item) => {
    const text = String(item.value ?? '');
    if (!item.comment?.trim()) throw new Error(`${path}: entry '${text}' has no '# reason' comment`);
    const [scenario, checkId] = text.split(/:(.*)/s);
    return { text, scenario, checkId: checkId || null, reason: item.comment.trim(), used: false };
  });
}

// The server scenarios a requirements file of the pinned suite lists.
export function parseRequirements(text, path = 'requirements') {
  const list = YAML.parse(text)?.server;
  if (!Array.isArray(list) || list.length === 0 || !list.every((s) => typeof s === 'string')) {
    throw new Error(`${path}: no 'server' list of scenario names`);
  }
  return list;
}

// What went wrong with a run beside its checks, as pseudo check ids.
// result: {scenario, checks, crash, exitCode, signal}.
function brokenRun(result) {
  if (result.crash) return [CRASH];
  if (result.checks.length === 0) return [NO_CHECKS];
  const failures = result.checks.filter((c) => c.status === 'FAILURE').length;
  const wanted = failures > 0 ? 1 : 0;
  if (result.exitCode !== undefined && result.exitCode !== wanted) return [EXIT_MISMATCH];
  return [];
}

// The check statuses judged against the baseline: a FAILURE, and a WARNING.
const FLAGGED = ['FAILURE', 'WARNING'];

// Classifies a scenario's failing and warning checks against the baseline;
// marks the entries that matched so stale ones can be reported afterwards. A
// crash, no checks or an exit-code mismatch can only be covered by a
// whole-scenario entry.
export function judge(result, baseline) {
  const broken = brokenRun(result);
  const failing = [
    ...broken,
    ...(result.crash ? [] : result.checks.filter((c) => FLAGGED.includes(c.status)).map((c) => c.id)),
  ];
  const whole = baseline.find((e) => e.scenario === result.scenario && e.checkId === null);
  const unexpected = failing.filter((id) => {
    const pseudo = id.startsWith('<');
    const entry = whole ?? (pseudo ? undefined : baseline.find((e) => e.scenario === result.scenario && e.checkId === id));
    if (entry) entry.used = true;
    return entry === undefined;
  });
  const verdict = failing.length === 0 ? 'PASS' : unexpected.length === 0 ? 'XFAIL' : 'FAIL';
  return { verdict, failing, unexpected };
}

// Entries that matched no failure among the scenarios that ran: they now pass.
export function staleEntries(baseline, ranScenarios) {
  return baseline.filter((e) => !e.used && ranScenarios.has(e.scenario));
}

// Entries naming a scenario the pinned suite does not require: never judged,
// so they could never go stale. Each one fails the run.
export function unknownEntries(baseline, requiredScenarios) {
  const known = new Set(requiredScenarios);
  return baseline.filter((e) => !known.has(e.scenario));
}

// Scenarios that were to run but have no result with checks of their own
// (not run, crashed, skipped by the CLI): each one fails the run.
export function missingScenarios(wanted, results) {
  const ran = new Set(results.filter((r) => !r.crash && r.checks.length > 0).map((r) => r.scenario));
  return wanted.filter((s) => !ran.has(s));
}

// The checks.json the conformance CLI wrote for `scenario` under `dir`: `-o DIR`
// makes it DIR/server-<scenario>-<time>/checks.json. Null when there is none.
export function findChecksFile(dir, scenario) {
  if (!existsSync(dir)) return null;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name, 'checks.json');
    if (entry.isDirectory() && entry.name.startsWith(`server-${scenario}-`) && existsSync(path)) return path;
  }
  return null;
}
