// Unit tests of the TypeScript client check's verdicts (node --test client_checks.test.mjs).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ANSWER_META,
  bind,
  loadTable,
  matchLogs,
  matchQuestions,
  needs,
  newRecorder,
  refusalProblem,
  verify,
  withAnswerTokens,
} from './client_checks.mjs';

const ENTRY = {
  name: 'tool',
  args: { a: 'x-{token}' },
  rounds: [{ elicit: ['Step 1'] }, { elicit: ['Step 2 {token}'] }],
  expect: ['got {token}'],
};
const ok = { text: 'we got k', isError: false };

// A recorder that saw the call POSTed `posts` times and these questions.
function recorder(posts, questions) {
  const rec = newRecorder('k');
  rec.callPosts = posts;
  for (const [kind, round, text] of questions) rec.questions.push({ kind, round, text });
  return rec;
}
const twoRounds = () => recorder(3, [['elicit', 1, '{"m":"Step 1"}'], ['elicit', 2, '{"m":"Step 2 k"}']]);

test('bind substitutes the token everywhere and labels variants', () => {
  const bound = bind({ ...ENTRY, variant: 'decline' }, 'k');
  assert.deepEqual([bound.args, bound.rounds[1], bound.expect, bound.label], [{ a: 'x-k' }, { elicit: ['Step 2 k'] }, ['got k'], 'tool#decline']);
});

test('verify passes only when every fact holds', () => {
  assert.equal(verify(bind(ENTRY, 'k'), twoRounds(), ok, true), null);
});

test('an extra round, a missing round, or a re-asked question fails', () => {
  const check = bind(ENTRY, 'k');
  assert.match(verify(check, recorder(4, [['elicit', 1, 'Step 1'], ['elicit', 2, 'Step 2 k']]), ok, true), /3 input_required round\(s\), wanted 2/);
  assert.match(verify(check, recorder(2, [['elicit', 1, 'Step 1']]), ok, true), /1 input_required round\(s\), wanted 2/);
  const reasked = recorder(3, [['elicit', 1, 'Step 1'], ['elicit', 2, 'Step 1'], ['elicit', 2, 'Step 2 k']]);
  assert.match(verify(check, reasked, ok, true), /round 2: 2 elicit question\(s\), wanted 1/);
});

test('a question of another kind does not satisfy an elicitation', () => {
  const check = bind(ENTRY, 'k');
  const wrongKind = recorder(3, [['sample', 1, 'Step 1'], ['elicit', 2, 'Step 2 k']]);
  assert.match(verify(check, wrongKind, ok, true), /round 1: 0 elicit question\(s\), wanted 1/);
});

test('a roots question is matched as a roots question', () => {
  assert.equal(matchQuestions({ roots: ['roots/list'] }, [{ kind: 'roots', text: '{"method":"roots/list"}' }], 'r'), null);
  assert.match(matchQuestions({ roots: ['roots/list'] }, [], 'r'), /0 roots question/);
});

test('an isError result fails even if it holds the expected text', () => {
  assert.match(verify(bind(ENTRY, 'k'), twoRounds(), { text: 'we got k', isError: true }, true), /isError/);
});

test('progress notes are counted exactly', () => {
  const check = { ...bind(ENTRY, 'k'), progress: 3 };
  assert.match(verify(check, twoRounds(), ok, true), /0 progress note\(s\), wanted 3/);
});

test('a legacy session is one call with the same questions, and no more', () => {
  const check = bind(ENTRY, 'k');
  const legacy = recorder(1, [['elicit', 1, 'Step 1'], ['elicit', 1, 'Step 2 k']]);
  assert.equal(verify(check, legacy, ok, false), null);
  legacy.questions.push({ kind: 'roots', round: 1, text: 'roots/list' });
  assert.match(verify(check, legacy, ok, false), /1 roots question\(s\), wanted 0/);
});

test('only the named refusal counts as refused', () => {
  const wanted = 'did not offer pinned protocol version';
  const refused = Object.assign(new Error(`Version negotiation failed: the server ${wanted} 2026-07-28`), { code: 'ERA' });
  assert.equal(refusalProblem(refused, wanted, 'ERA'), null);
  const connection = Object.assign(new TypeError('fetch failed'), { code: 'ECONNREFUSED' });
  assert.match(refusalProblem(connection, wanted, 'ERA'), /refused, but not with code ERA/);
});

test('the shared table names a refusal per server and client, and unique labels', () => {
  const table = loadTable();
  for (const server of ['everything', 'fixture', 'filesystem', 'memory', 'git']) {
    if (['everything', 'fixture'].includes(server)) assert.ok(table._refusals[server].py && table._refusals[server].ts);
    const labels = table[server].map((e) => (e.variant ? `${e.name}#${e.variant}` : e.name));
    assert.equal(new Set(labels).size, labels.length);
  }
});

test('the answer token is required back exactly when the client sent it', () => {
  const check = bind({ name: 't', expect: ['declined', 'answer-{token}'] }, 'k');
  const rec = recorder(1, []);
  assert.equal(verify(check, rec, { text: 'declined', isError: false }, false), null);
  rec.noteRequest('{"jsonrpc":"2.0","id":1,"result":{"action":"decline","_meta":{"x":"answer-k"}}}');
  assert.match(verify(check, rec, { text: 'declined', isError: false }, false), /result lacks 'answer-k'/);
});

test('absent fragments fail the check', () => {
  const check = bind({ name: 't', expect: ['dirs: /s/root'], absent: ['/s/cmdline'] }, 'k');
  assert.equal(verify(check, recorder(1, []), { text: 'dirs: /s/root', isError: false }, true), null);
  assert.match(verify(check, recorder(1, []), { text: 'dirs: /s/root\n/s/cmdline', isError: false }, true), /result contains '\/s\/cmdline'/);
});

test('declared kinds are needed without a round, and a question then is stray', () => {
  const check = bind({ name: 't', declare: ['roots'] }, 'k');
  assert.deepEqual([...needs(check)], ['roots']);
  assert.match(verify(check, recorder(1, [['roots', 1, 'roots/list']]), { text: '', isError: false }, true), /outside any round/);
});

test('the scratch folder is substituted and required', () => {
  const entry = { name: 't', args: { path: '{dir}/n-{token}' }, setup: [{ write: '{dir}/n-{token}', text: 't-{token}' }] };
  const bound = bind(entry, 'k', '/s/a"b');
  assert.deepEqual(bound.args, { path: '/s/a"b/n-k' });
  assert.deepEqual(bound.setup, [{ write: '/s/a"b/n-k', text: 't-k' }]);
  assert.throws(() => bind(entry, 'k'), /scratch folder/);
});

test('a check needs exactly the kinds its rounds name', () => {
  assert.deepEqual([...needs(bind(ENTRY, 'k'))], ['elicit']);
  assert.deepEqual([...needs(bind({ name: 'echo' }, 'k'))], []);
  assert.deepEqual([...needs(bind({ name: 't', rounds: [{ sample: ['a'], roots: ['roots/list'] }] }, 'k'))].sort(), ['roots', 'sample']);
});

test('logs: none without a level, exactly the named ones with one', () => {
  assert.equal(matchLogs([], [], false), null);
  assert.match(matchLogs([], ['{"level":"info"}'], false), /1 log message\(s\) without a log level/);
  const logs = ['{"data":"started"}', '{"data":"done"}'];
  assert.equal(matchLogs(['done', 'started'], logs, true), null);
  assert.match(matchLogs(['started'], logs, true), /2 log message\(s\), wanted 1/);
  assert.match(matchLogs(['done', 'started'], [logs[1], logs[1]], true), /no log message containing 'started'/);
  const check = bind({ name: 'tool', log: 'info', logs: ['ran {token}'] }, 'k');
  const rec = recorder(1, []);
  assert.match(verify(check, rec, ok, true), /0 log message\(s\), wanted 1/);
  rec.logs.push('{"level":"info","data":"ran k"}');
  assert.equal(verify(check, rec, ok, true), null);
  assert.equal(verify(bind({ name: 'tool' }, 'k'), rec, ok, false), null);
  assert.match(verify(bind({ name: 'tool' }, 'k'), rec, ok, true), /without a log level/);
});

test('the answer token goes back on elicitation answers only, and only on calls', () => {
  const retry = {
    method: 'tools/call',
    params: { inputResponses: { a: { action: 'accept' }, s: { role: 'assistant', model: 'm' }, d: { action: 'decline', _meta: { x: 1 } } } },
  };
  const out = JSON.parse(withAnswerTokens(JSON.stringify(retry), 'k'));
  assert.deepEqual(out.params.inputResponses.a, { action: 'accept', _meta: { [ANSWER_META]: 'answer-k' } });
  assert.deepEqual(out.params.inputResponses.d._meta, { x: 1, [ANSWER_META]: 'answer-k' });
  assert.deepEqual(out.params.inputResponses.s, { role: 'assistant', model: 'm' });
  const list = JSON.stringify({ method: 'tools/list', params: { inputResponses: { a: { action: 'accept' } } } });
  assert.equal(withAnswerTokens(list, 'k'), list);
  assert.equal(withAnswerTokens('not json', 'k'), 'not json');
  const first = JSON.stringify({ method: 'tools/call', params: { name: 't' } });
  assert.equal(withAnswerTokens(first, 'k'), first);
});

test('a put-back token is noted as sent, so the result must then carry it', () => {
  const rec = newRecorder('k');
  rec.noteRequest(withAnswerTokens(JSON.stringify({ method: 'tools/call', params: { inputResponses: { a: { action: 'accept' } } } }), 'k'));
  assert.equal(rec.answerSent, true);
  const check = bind({ name: 'url', rounds: [], expect: ['"action": "accept"', 'answer-{token}'] }, 'k');
  assert.match(verify(check, rec, { text: '{"action": "accept"}', isError: false }, false), /result lacks 'answer-k'/);
});
