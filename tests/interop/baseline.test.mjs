// Unit tests of the conformance baseline rules (node --test baseline.test.mjs).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CRASH,
  EXIT_MISMATCH,
  NO_CHECKS,
  judge,
  missingScenarios,
  parseBaseline,
  parseRequirements,
  staleEntries,
  unknownEntries,
} from './baseline.mjs';

const check = (id, status) => ({ id, status });
// A scenario run whose CLI exit code agrees with its checks (1 iff a FAILURE).
const scenario = (name, ...checks) => ({
  scenario: name,
  checks,
  crash: null,
  exitCode: checks.some((c) => c.status === 'FAILURE') ? 1 : 0,
});

test('an empty list parses to no entries', () => {
  assert.deepEqual(parseBaseline('server: []\n'), []);
  assert.deepEqual(parseBaseline('# nothing yet\n'), []);
});

test('entries split into scenario and optional check id, keeping the reason', () => {
  const [whole, one] = parseBaseline('server:\n  - caching # no ttl yet\n  - tools-list:wire-schema-valid # upstream schema\n');
  assert.deepEqual([whole.scenario, whole.checkId, whole.reason], ['caching', null, 'no ttl yet']);
  assert.deepEqual([one.scenario, one.checkId, one.reason], ['tools-list', 'wire-schema-valid', 'upstream schema']);
});

test('an entry without a reason is rejected, naming the entry', () => {
  assert.throws(() => parseBaseline('server:\n  - caching\n'), /'caching' has no '# reason'/);
});

test('a mapping instead of a list is rejected', () => {
  assert.throws(() => parseBaseline('server:\n  caching: x\n'), /must be a list/);
});

test('a passing scenario is PASS and uses no entry', () => {
  const baseline = parseBaseline('server:\n  - a # r\n');
  const judged = judge(scenario('a', check('c1', 'SUCCESS'), check('c2', 'SUCCESS')), baseline);
  assert.equal(judged.verdict, 'PASS');
  assert.deepEqual(staleEntries(baseline, new Set(['a'])).map((e) => e.text), ['a']);
});

test('an unlisted warning fails like a failure; a listed one is expected, and stale once gone', () => {
  const warned = scenario('a', check('c1', 'SUCCESS'), check('c2', 'WARNING'));
  assert.deepEqual(judge(warned, []), { verdict: 'FAIL', failing: ['c2'], unexpected: ['c2'] });
  const baseline = parseBaseline('server:\n  - a:c2 # a SHOULD the gateway cannot meet\n');
  assert.equal(judge(warned, baseline).verdict, 'XFAIL');
  const fixed = parseBaseline('server:\n  - a:c2 # r\n');
  judge(scenario('a', check('c1', 'SUCCESS'), check('c2', 'SUCCESS')), fixed);
  assert.deepEqual(staleEntries(fixed, new Set(['a'])).map((e) => e.text), ['a:c2']);
});

test('an unlisted failure is FAIL and named', () => {
  const judged = judge(scenario('a', check('c1', 'FAILURE'), check('c2', 'SUCCESS')), []);
  assert.equal(judged.verdict, 'FAIL');
  assert.deepEqual(judged.unexpected, ['c1']);
});

test('a whole-scenario entry covers every failing check of that scenario', () => {
  const baseline = parseBaseline('server:\n  - a # r\n');
  const judged = judge(scenario('a', check('c1', 'FAILURE'), check('c2', 'FAILURE')), baseline);
  assert.equal(judged.verdict, 'XFAIL');
  assert.deepEqual(staleEntries(baseline, new Set(['a'])), []);
});

test('a per-check entry covers only its check', () => {
  const baseline = parseBaseline('server:\n  - a:c1 # r\n');
  const judged = judge(scenario('a', check('c1', 'FAILURE'), check('c2', 'FAILURE')), baseline);
  assert.equal(judged.verdict, 'FAIL');
  assert.deepEqual(judged.unexpected, ['c2']);
});

test('a per-check entry whose check passes is stale; entries of scenarios not run are not', () => {
  const baseline = parseBaseline('server:\n  - a:c1 # r\n  - b # not run\n');
  judge(scenario('a', check('c1', 'SUCCESS')), baseline);
  assert.deepEqual(staleEntries(baseline, new Set(['a'])).map((e) => e.text), ['a:c1']);
});

test('a crashed scenario fails unless the whole scenario is listed', () => {
  const crashed = { scenario: 'a', checks: [], crash: 'timeout' };
  assert.equal(judge(crashed, []).verdict, 'FAIL');
  assert.equal(judge(crashed, parseBaseline('server:\n  - a # r\n')).verdict, 'XFAIL');
});

test('an entry for a scenario the pinned suite does not require is unknown, even if never judged', () => {
  const baseline = parseBaseline('server:\n  - caching # r\n  - cachng # misspelt\n  - dropped:c1 # gone in a new pin\n');
  assert.deepEqual(unknownEntries(baseline, ['caching', 'tools-list']).map((e) => e.text), ['cachng', 'dropped:c1']);
  assert.deepEqual(unknownEntries(baseline, ['caching', 'cachng', 'dropped']), []);
});

test('a scenario with zero checks fails, and only a whole-scenario entry covers it', () => {
  const empty = { scenario: 'a', checks: [], crash: null, exitCode: 0 };
  assert.deepEqual(judge(empty, []), { verdict: 'FAIL', failing: [NO_CHECKS], unexpected: [NO_CHECKS] });
  assert.equal(judge(empty, parseBaseline('server:\n  - a:wire-schema-valid # r\n')).verdict, 'FAIL');
  assert.equal(judge(empty, parseBaseline('server:\n  - a # r\n')).verdict, 'XFAIL');
});

test('a non-zero exit with no FAILURE check fails as an exit mismatch', () => {
  const run = { ...scenario('a', check('c1', 'SUCCESS')), exitCode: 1 };
  assert.deepEqual(judge(run, []).unexpected, [EXIT_MISMATCH]);
  assert.deepEqual(judge({ ...run, exitCode: 2 }, []).unexpected, [EXIT_MISMATCH]);
});

test('exit 0 beside a FAILURE check fails as an exit mismatch too', () => {
  const run = { ...scenario('a', check('c1', 'FAILURE')), exitCode: 0 };
  const judged = judge(run, parseBaseline('server:\n  - a:c1 # r\n'));
  assert.deepEqual([judged.verdict, judged.unexpected], ['FAIL', [EXIT_MISMATCH]]);
});

test('exit 1 with only baselined failures is what the CLI does: XFAIL, not a mismatch', () => {
  const run = scenario('a', check('c1', 'FAILURE'), check('c2', 'SUCCESS'));
  assert.equal(run.exitCode, 1);
  assert.equal(judge(run, parseBaseline('server:\n  - a:c1 # r\n')).verdict, 'XFAIL');
});

test('a crash is reported as such, not as its (absent) checks', () => {
  const crashed = { scenario: 'a', checks: [], crash: 'killed', exitCode: null, signal: 'SIGKILL' };
  assert.deepEqual(judge(crashed, []).failing, [CRASH]);
});

test('every scenario that was to run must have run with checks of its own, by name', () => {
  const results = [scenario('a', check('c', 'SUCCESS')), { scenario: 'b', checks: [], crash: 'timeout' }, scenario('c')];
  assert.deepEqual(missingScenarios(['a', 'b', 'c', 'd'], results), ['b', 'c', 'd']);
  assert.deepEqual(missingScenarios(['a'], results), []);
});

test('the requirements file yields its server list and rejects a file without one', () => {
  assert.deepEqual(parseRequirements('server:\n  - a\n  - b\nclient:\n  - c\n'), ['a', 'b']);
  assert.throws(() => parseRequirements('client:\n  - c\n'), /no 'server' list/);
});
