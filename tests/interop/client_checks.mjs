// Verdicts for the TypeScript client check (the same rules as client_checks.py;
// the table is checks.json). Kept apart from ts_client_check.mjs so the rules
// are unit-tested without a client (node --test client_checks.test.mjs).
// A check may also name capabilities to declare without being asked
// (`declare`), files and repositories to create first under the server's
// scratch folder `{dir}` (`setup`), tool calls to make first with the same
// client (`before`: each must succeed and ask nothing), and fragments the
// result must not contain (`absent`). A check may name the log level the
// client asks for on the checked call (`log`); it must then get exactly the log
// messages `logs` names, and without `log` none at all. `modern` checks need a
// 2026-07-28 client.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export const KINDS = ['elicit', 'sample', 'roots'];
export const CALL_METHODS = ['tools/call', 'prompts/get'];
// The key under which every elicitation answer carries the check's token.
export const ANSWER_META = 'dev.mrtr-interop/answer';
const MAX_DETAIL = 200;

export function loadTable(url = new URL('./checks.json', import.meta.url)) {
  return JSON.parse(readFileSync(url, 'utf8'));
}

export function label(entry) {
  return entry.variant ? `${entry.name}#${entry.variant}` : entry.name;
}

// Substitutes the check's token, and the server's scratch folder, everywhere.
export function bind(entry, token, scratch = '') {
  const folder = JSON.stringify(scratch).slice(1, -1);
  const sub = (value) => {
    const text = JSON.stringify(value ?? null).replaceAll('{token}', token);
    if (text.includes('{dir}') && !scratch) throw new Error(`check ${label(entry)} needs the server's scratch folder (--dir)`);
    return JSON.parse(text.replaceAll('{dir}', folder));
  };
  return {
    name: entry.name,
    label: label(entry),
    kind: entry.kind ?? 'tool',
    args: sub(entry.args ?? {}),
    answer: entry.answer ?? {},
    rounds: sub(entry.rounds ?? []),
    progress: entry.progress ?? 0,
    expect: sub(entry.expect ?? []),
    absent: sub(entry.absent ?? []),
    declare: entry.declare ?? [],
    setup: sub(entry.setup ?? []),
    before: sub(entry.before ?? []),
    modern: entry.modern ?? false,
    log: entry.log ?? '',
    logs: sub(entry.logs ?? []),
  };
}

// The kinds of question a check expects, and those it declares without being
// asked: the only capabilities its client declares.
export function needs(check) {
  return new Set([...check.rounds.flatMap((wanted) => Object.keys(wanted)), ...(check.declare ?? [])]);
}

// Runs a bound check's setup steps: write a file, or `git init` a repository.
export function prepare(check) {
  for (const step of check.setup) {
    if ('write' in step) {
      mkdirSync(dirname(step.write), { recursive: true });
      writeFileSync(step.write, step.text);
    } else if ('git_init' in step) {
      execFileSync('git', ['init', '--quiet', step.git_init], { timeout: 30000, stdio: 'ignore' });
    } else {
      throw new Error(`unknown setup step ${JSON.stringify(step)}`);
    }
  }
}

export function clip(text) {
  const flat = String(text).split(/\s+/).join(' ').trim();
  return flat.length <= MAX_DETAIL ? flat : `${flat.slice(0, MAX_DETAIL)}...`;
}

// Questions asked, with the round each was asked in, the call's POSTs, and
// whether any POST carried the answer token (see withAnswerTokens).
export function newRecorder(token) {
  const rec = { token, questions: [], callPosts: 0, progress: 0, answerSent: false, logs: [] };
  rec.note = (kind, method, params) =>
    rec.questions.push({ kind, round: rec.callPosts, text: JSON.stringify({ method, params: params ?? null }) });
  rec.noteRequest = (body) => {
    if (body.includes(answerToken(token))) rec.answerSent = true;
    let message;
    try {
      message = JSON.parse(body);
    } catch {
      return;
    }
    for (const item of Array.isArray(message) ? message : [message]) {
      if (CALL_METHODS.includes(item?.method)) rec.callPosts += 1;
    }
  };
  return rec;
}

export function answerToken(token) {
  return `answer-${token}`;
}

// The TS SDK drops the `_meta` of an elicitation answer when it fills
// `inputResponses`. This puts the check's answer token back on every
// elicitation answer of a POST body (what the check's handler returned), so
// the result can show that the answer the server got is this client's: a
// gateway that made up an answer of its own (an `accept`, say) lacks the
// token. Any other body is returned unchanged.
export function withAnswerTokens(body, token) {
  let message;
  try {
    message = JSON.parse(body);
  } catch {
    return body;
  }
  const responses = message?.params?.inputResponses;
  if (!CALL_METHODS.includes(message?.method) || responses === null || typeof responses !== 'object') return body;
  let changed = false;
  for (const answer of Object.values(responses)) {
    const elicited = answer !== null && typeof answer === 'object' && typeof answer.action === 'string';
    if (elicited && answer._meta?.[ANSWER_META] === undefined) {
      answer._meta = { ...(answer._meta ?? {}), [ANSWER_META]: answerToken(token) };
      changed = true;
    }
  }
  return changed ? JSON.stringify(message) : body;
}

export function counts(rec) {
  return Object.fromEntries(KINDS.map((k) => [k, rec.questions.filter((q) => q.kind === k).length]));
}

// Per kind: exactly as many questions as fragments, each fragment in its own question.
export function matchQuestions(wanted, asked, where) {
  for (const kind of KINDS) {
    const texts = asked.filter((q) => q.kind === kind).map((q) => q.text);
    const fragments = wanted[kind] ?? [];
    if (texts.length !== fragments.length) return `${where}: ${texts.length} ${kind} question(s), wanted ${fragments.length}`;
    for (const fragment of fragments) {
      const at = texts.findIndex((t) => t.includes(fragment));
      if (at < 0) return `${where}: no ${kind} question containing '${fragment}'`;
      texts.splice(at, 1);
    }
  }
  return null;
}

// Without a log level, no log message at all; with one, exactly as many as
// fragments, each fragment in its own message.
export function matchLogs(fragments, logs, asked) {
  if (!asked) return logs.length ? `${logs.length} log message(s) without a log level, first: ${clip(logs[0])}` : null;
  if (logs.length !== fragments.length) return `${logs.length} log message(s), wanted ${fragments.length}: ${clip(logs.join(' | '))}`;
  const left = [...logs];
  for (const fragment of fragments) {
    const at = left.findIndex((text) => text.includes(fragment));
    if (at < 0) return `no log message containing '${fragment}': ${clip(logs.join(' | '))}`;
    left.splice(at, 1);
  }
  return null;
}

// The first broken expectation, or null. roundsObservable: the client speaks
// 2026-07-28, so each round is a retry POST; otherwise (a legacy session) the
// server asks inside the one call and only the questions per kind are compared.
export function verify(check, rec, { text, isError }, roundsObservable) {
  if (isError) return `result has isError: ${clip(text)}`;
  if (roundsObservable) {
    const got = rec.callPosts - 1;
    if (got !== check.rounds.length) return `${got} input_required round(s), wanted ${check.rounds.length}`;
    for (const [index, wanted] of check.rounds.entries()) {
      const number = index + 1;
      const problem = matchQuestions(wanted, rec.questions.filter((q) => q.round === number), `round ${number}`);
      if (problem) return problem;
    }
    const stray = rec.questions.filter((q) => q.round < 1 || q.round > check.rounds.length);
    if (stray.length) return `${stray.length} question(s) outside any round, first: ${clip(stray[0].text)}`;
    const logProblem = matchLogs(check.logs ?? [], rec.logs ?? [], Boolean(check.log));
    if (logProblem) return logProblem;
  } else {
    if (rec.callPosts !== 1) return `the call was sent ${rec.callPosts}x, wanted once`;
    const merged = {};
    for (const wanted of check.rounds) {
      for (const [kind, fragments] of Object.entries(wanted)) merged[kind] = [...(merged[kind] ?? []), ...fragments];
    }
    const problem = matchQuestions(merged, rec.questions, 'the call');
    if (problem) return problem;
  }
  if (rec.progress !== check.progress) return `${rec.progress} progress note(s), wanted ${check.progress}`;
  // The answer token is expected back only if the client put it on the wire.
  const expected = check.expect.filter((f) => rec.answerSent || !f.includes(answerToken(rec.token)));
  const missing = expected.find((fragment) => !text.includes(fragment));
  if (missing !== undefined) return `result lacks '${missing}': ${clip(text)}`;
  const present = (check.absent ?? []).find((fragment) => text.includes(fragment));
  return present === undefined ? null : `result contains '${present}': ${clip(text)}`;
}

export function successDetail(rec) {
  const used = Object.entries({ ...counts(rec), progress: rec.progress, logs: rec.logs.length })
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `,${k}=${n}`);
  return `ok (rounds=${Math.max(rec.callPosts - 1, 0)}${used.join('')}${rec.answerSent ? ',answer-token' : ''})`;
}

// null if `error` is the expected refusal: an error with `code` whose message
// holds `wanted`; otherwise what it was instead.
export function refusalProblem(error, wanted, code) {
  const message = String(error?.message ?? error);
  if (error?.code === code && message.includes(wanted)) return null;
  return `refused, but not with code ${code} '${wanted}': ${clip(`${error?.name ?? 'Error'} (code ${error?.code}): ${message}`)}`;
}
