// Unit tests of the conformance baseline rules (node --test baseline.test.mjs).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { judge, parseBaseline, staleEntries } from './baseline.mjs';

const check = (id, status) => ({ id, status });
const scenario = (name, ...checks) => ({ scenario: name, checks, crash: null });

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
  const judged = judge(scenario('a', check('c1', 'SUCCESS'), check('c2', 'WARNING')), baseline);
  assert.equal(judged.verdict, 'PASS');
  assert.deepEqual(staleEntries(baseline, new Set(['a'])).map((e) => e.text), ['a']);
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
