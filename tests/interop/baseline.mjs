// The expected-failures baseline of the conformance runner: parsing it and
// judging one scenario's checks against it. Kept apart from the runner so the
// strictness rules (unlisted failure fails, listed pass is stale, every entry
// carries a reason) are unit-tested without running the CLI.
//
// Grammar (same as the conformance CLI's --expected-failures file):
//   server:
//     - <scenario>              # reason: the whole scenario may fail
//     - <scenario>:<check-id>   # reason: only that check may fail

import { existsSync, readFileSync } from 'node:fs';
import YAML from 'yaml';

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

// Classifies a scenario's failing checks against the baseline; marks the
// entries that matched so stale ones can be reported afterwards.
export function judge(result, baseline) {
  const failing = result.crash ? ['<crash>'] : result.checks.filter((c) => c.status === 'FAILURE').map((c) => c.id);
  const whole = baseline.find((e) => e.scenario === result.scenario && e.checkId === null);
  const unexpected = failing.filter((id) => {
    const entry = whole ?? baseline.find((e) => e.scenario === result.scenario && e.checkId === id);
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
