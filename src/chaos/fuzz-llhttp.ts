/**
 * The fuzzer for the long-lived Response over HTTP: a run opened with
 * `POST /v1/responses?protocol=long-lived` (a realistic valid body, sometimes
 * mutated), its SSE stream read and checked as it arrives; at each pause,
 * hostile appends (mutated answers to the real pending calls, damaged bytes,
 * odd content types, other paths: unknown, badly encoded or ended runs'
 * ids), an append while the run streams, sometimes a cancel or the stream
 * dropped, then the valid answer, until the run ends.
 *
 * Every request is answered 2xx or a JSON 4xx error (never a 5xx for client
 * input, never a hang); the run's stream numbers its events without a gap and
 * ends with one terminal event and `data: [DONE]`, whatever the appends did;
 * and each run's record ends billed once (checked batch by batch, as the
 * other fuzzers do).
 */
import type { Tally } from './oracle.js';
import { Rng, corpus, damage, mutate, serialize, validAppend, weirdValue, type Json } from './mutate.js';
import { checkErrorAnswer, openRun, send, type HttpInput, type LiveStream } from './http-peer.js';
import { BAD_IDS, headers } from './fuzz-http.js';
import { checkRecords, type FuzzOptions, type Target } from './settle.js';

const CREATE_PATH = '/v1/responses?protocol=long-lived';

/** The create: a corpus body made a streamed long-lived run, mutated for a third of the inputs (the HTTP fuzzer mutates creates at length). */
function createInput(rng: Rng, opts: FuzzOptions): HttpInput {
  const base: { [k: string]: Json } = { ...rng.pick(corpus()), stream: true };
  delete base['previous_response_id'];
  const m = rng.chance(0.3) ? mutate(base, rng, opts.scale) : { value: base as Json, how: 'valid' };
  const h = rng.chance(0.9) ? { 'Content-Type': 'application/json' } : headers(rng);
  return { method: 'POST', path: CREATE_PATH, headers: h, body: Buffer.from(serialize(m.value)), label: `POST ?protocol=long-lived ${m.how}` };
}

/** A hostile append to the run `id` (or to another path), while it waits for `pending`. */
function hostileAppend(rng: Rng, opts: FuzzOptions, id: string, pending: readonly string[], ended: readonly string[]): HttpInput {
  const answer = validAppend(pending, rng);
  const roll = rng.next();
  const to = (target: string) => `/v1/responses/${target}/append`;
  if (roll < 0.55) {
    const m = mutate(answer, rng, opts.scale);
    return { method: 'POST', path: to(id), headers: rng.chance(0.85) ? { 'Content-Type': 'application/json' } : headers(rng), body: Buffer.from(serialize(m.value)), label: `append: ${m.how}` };
  }
  if (roll < 0.7) {
    const d = damage(serialize(answer), rng);
    return { method: 'POST', path: to(id), headers: { 'Content-Type': 'application/json' }, body: d.bytes, label: `append damaged: ${d.how}` };
  }
  if (roll < 0.8) {
    // Another run's path: unknown, badly percent-encoded, or one that has ended.
    const other = ended.length && rng.chance(0.4) ? rng.pick(ended) : rng.pick(BAD_IDS);
    return { method: 'POST', path: to(other), headers: { 'Content-Type': 'application/json' }, body: Buffer.from(serialize(answer)), label: `append to ${other.slice(0, 40)}` };
  }
  if (roll < 0.9) {
    // The body names another run than the path's.
    const body = { ...answer, response_id: rng.chance(0.5) ? weirdValue(rng, { ...opts.scale, maxString: 200 }) : 'resp_other' };
    return { method: 'POST', path: to(id), headers: { 'Content-Type': 'application/json' }, body: Buffer.from(serialize(body)), label: 'append naming another response_id' };
  }
  const method = rng.pick(['GET', 'PUT', 'DELETE', 'PATCH']);
  return { method, path: to(id), headers: headers(rng), label: `${method} append` };
}

/** One request's answer judged as the other fuzzers judge it: a 2xx, or a well-formed 4xx error. */
async function judged(target: Target, input: HttpInput, opts: FuzzOptions, tally: Tally, context: string): Promise<'ok' | 'gone'> {
  const out = await send(target.url, input, opts.hangMs);
  if (out.kind === 'unsendable') return 'ok';
  tally.inputs++;
  const what = `${context} → ${input.label} [${input.body?.length ?? 0} bytes] ${input.body ? input.body.subarray(0, 120).toString('utf8') : ''}`;
  target.lastInput = what;
  if (out.kind === 'hang') {
    tally.fail('hang', what, `no complete answer within ${opts.hangMs} ms`);
    return 'gone';
  }
  if (out.kind === 'reset') {
    tally.fail('malformed', what, `connection ended without an answer: ${out.message}`);
    return 'gone';
  }
  if (out.status >= 200 && out.status < 300) return 'ok';
  tally.errors++;
  const bad = checkErrorAnswer(out.status, out.contentType, out.body, input.method);
  if (bad) tally.fail('malformed', what, bad);
  else if (input.method !== 'HEAD') tally.errorCode(`${out.status} ${(JSON.parse(out.body.toString('utf8')) as { error: { code: string } }).error.code}`);
  return 'ok';
}

/** Fuzz the long-lived Response over HTTP; run records are checked batch by batch. */
export async function fuzzLongLivedHttp(target: Target, opts: FuzzOptions, tally: Tally): Promise<void> {
  const rng = new Rng(opts.seed);
  let ids: string[] = [];
  const ended: string[] = [];
  let lastInput = '';
  for (let i = 0; i < opts.inputs; i++) {
    const input = createInput(rng, opts);
    lastInput = `#${i} long-lived-http ${input.label} [${input.body?.length ?? 0} bytes] ${input.body ? input.body.subarray(0, 160).toString('utf8') : ''}`;
    target.lastInput = lastInput;
    const opened = await openRun(target.url, input, opts.hangMs);
    if (opened.kind === 'unsendable') continue;
    tally.inputs++;
    if (opened.kind === 'hang' || opened.kind === 'reset') {
      if (await target.checkAlive(tally, lastInput)) ids = [];
      else if (opened.kind === 'hang') tally.fail('hang', lastInput, `no answer and no stream within ${opts.hangMs} ms`);
      else tally.fail('malformed', lastInput, `connection ended without an answer: ${opened.message}`);
      continue;
    }
    if (opened.kind === 'answer') {
      tally.errors++;
      const bad = checkErrorAnswer(opened.status, opened.contentType, opened.body, 'POST');
      if (bad) tally.fail('malformed', lastInput, bad);
      else tally.errorCode(`${opened.status} ${(JSON.parse(opened.body.toString('utf8')) as { error: { code: string } }).error.code}`);
    } else {
      const outcome = await drive(target, opened.stream, rng, opts, tally, lastInput, ended);
      const id = opened.stream.sse.stream.id;
      if (id) {
        ids.push(id);
        ended.push(id);
        if (ended.length > 50) ended.shift();
      }
      if (outcome === 'gone' && (await target.checkAlive(tally, lastInput))) ids = [];
    }
    if ((i + 1) % opts.batch === 0) {
      if (await target.checkAlive(tally, lastInput)) ids = [];
      else await checkRecords(target.url, ids, tally, opts.settleMs);
      ids = [];
    }
  }
  if (!(await target.checkAlive(tally, lastInput))) await checkRecords(target.url, ids, tally, opts.settleMs);
}

/** Drive a run to its end: hostile requests at each pause, then its answer; cancel a runaway run; judge the stream. */
async function drive(target: Target, live: LiveStream, rng: Rng, opts: FuzzOptions, tally: Tally, input: string, ended: readonly string[]): Promise<'ok' | 'gone'> {
  const s = live.sse.stream;
  const cancel = () => judged(target, { method: 'POST', path: `/v1/responses/${s.id}/cancel`, headers: {}, label: 'cancel' }, opts, tally, input);
  for (let round = 0; ; round++) {
    const settled = await live.until(() => s.terminal !== null || s.paused, opts.hangMs);
    if (s.terminal || live.over) break;
    if (!settled) {
      tally.fail('hang', input, `response ${s.id} neither ended nor paused within ${opts.hangMs} ms`);
      live.req.destroy();
      return 'gone';
    }
    const pending = s.pendingCalls.slice();
    s.paused = false;
    if (round >= 12 || !s.id) {
      if ((await cancel()) === 'gone') return 'gone';
      continue;
    }
    const roll = rng.next();
    if (roll < 0.04) {
      // The client goes away: the run must end (cancelled) and be billed once; the record check sees to it.
      live.req.destroy();
      tally.responses++;
      return 'ok';
    }
    if (roll < 0.08) {
      if ((await cancel()) === 'gone') return 'gone';
      continue;
    }
    if (roll < 0.6) {
      for (let k = rng.int(1, 3); k > 0 && !s.terminal; k--) {
        if ((await judged(target, hostileAppend(rng, opts, s.id, pending, ended), opts, tally, input)) === 'gone') return 'gone';
      }
    }
    // Whatever the hostile ones did, answer every call: a duplicate is dropped, an append to a running run refused.
    if (!s.terminal) {
      const body = Buffer.from(serialize({ input: (validAppend(pending, rng)['input'] as Json[]) ?? [] }));
      const answer = { method: 'POST', path: `/v1/responses/${s.id}/append`, headers: { 'Content-Type': 'application/json' }, body, label: 'append: the answer' };
      if ((await judged(target, answer, opts, tally, input)) === 'gone') return 'gone';
    }
  }
  // The terminal event is followed by llr:timing (when asked) and [DONE]; the body must then end.
  await live.until(() => live.over, opts.hangMs);
  if (!live.over) {
    tally.fail('hang', input, `response ${s.id}: the stream did not end after its terminal event within ${opts.hangMs} ms`);
    live.req.destroy();
    return 'gone';
  }
  if (live.broken) {
    if (await target.checkAlive(tally, input)) return 'gone';
    tally.fail('malformed', input, `response ${s.id}: ${live.broken}`);
    return 'ok';
  }
  const problems = [...live.sse.end().problems, ...s.close()];
  if (problems.length) tally.fail('sequence', input, problems.slice(0, 3).join('; '));
  tally.responses++;
  // Sometimes one more append, to the run now ended: a 404, never an error of the server's.
  if (s.id && rng.chance(0.2)) {
    const late = { method: 'POST', path: `/v1/responses/${s.id}/append`, headers: { 'Content-Type': 'application/json' }, body: Buffer.from('{"input":[]}'), label: 'append after the end' };
    if ((await judged(target, late, opts, tally, input)) === 'gone') return 'gone';
  }
  return 'ok';
}
