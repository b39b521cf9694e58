/**
 * The HTTP fuzzer: `POST /v1/responses` with mutated realistic bodies
 * (streamed and not, some byte-damaged, odd content types and headers),
 * `GET`/`DELETE /v1/responses/{id}` with real, unknown and badly
 * percent-encoded ids, the server's own `/llr/*` and `/health`, and unknown
 * methods and paths. Each answer is checked by the oracle as it arrives.
 */
import { type Tally } from './oracle.js';
import { Rng, corpus, damage, mutate, serialize, weirdValue, type Json, type Scale } from './mutate.js';
import { checkErrorAnswer, checkSse, send, type HttpInput } from './http-peer.js';
import { checkRecords, type FuzzOptions, type Target } from './settle.js';

const JSON_TYPES = ['application/json', 'application/json', 'application/json; charset=utf-8', 'Application/JSON'];
/** Refused with 415 since POSTs need a JSON content type: sent to a minority of requests so most bodies reach the pipeline. */
const ODD_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', ''];
export const BAD_IDS = ['%', '%ZZ', '%E0%A4%A', '%00', 'a%2Fb', '%ud800', '%C0%AF', 'resp_' + 'x'.repeat(3000), '..%2F..%2Fetc', '%F0%9F%98', '%FF', 'resp_%20'];
const METHODS = ['GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND', 'get'];
const PATHS = ['/', '/v1', '/v1/responses/', '//v1//responses', '/v1/responses?stream=true', '/v1/responses/compact', '/v1/responses/a/b', '/v1/Responses', '/llr', '/llr/runs/', '/llr/stats?gc=1', '/health?x=%ZZ', '/%ZZ', '/' + 'a'.repeat(6000), '/v1/responses/../../llr/runs'];

/**
 * Percent-encode every byte of the UTF-8 form (encodeURIComponent throws on a
 * lone surrogate); a lone surrogate becomes its CESU-8 bytes, which are not
 * valid UTF-8 — exactly what a careless client sends.
 */
function percentBytes(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    const bytes = c >= 0xd800 && c <= 0xdfff ? Buffer.from([0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63)]) : Buffer.from(ch, 'utf8');
    for (const b of bytes) out += /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) && b < 128 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function headers(rng: Rng): Record<string, string> {
  const h: Record<string, string> = {};
  const ct = rng.chance(0.85) ? rng.pick(JSON_TYPES) : rng.pick(ODD_TYPES);
  if (ct) h['Content-Type'] = ct;
  if (rng.chance(0.2)) h['X-LLR-Timing'] = '1';
  if (rng.chance(0.1)) h['Authorization'] = rng.pick(['Bearer ', 'Bearer x', 'Basic Zm9vOmJhcg==', 'x'.repeat(4000)]);
  if (rng.chance(0.05)) h['Origin'] = rng.pick(['http://evil.example', 'null', 'http://127.0.0.1']);
  if (rng.chance(0.05)) h['Accept'] = 'text/event-stream';
  if (rng.chance(0.05)) h['OpenAI-Beta'] = 'responses_websockets=2026-02-04';
  return h;
}

function inputFor(rng: Rng, scale: Scale, ids: readonly string[]): HttpInput {
  const roll = rng.next();
  if (roll < 0.6) {
    const base = { ...rng.pick(corpus()), stream: rng.chance(0.5) } as { [k: string]: Json };
    if (ids.length && rng.chance(0.15)) base['previous_response_id'] = rng.pick(ids);
    // Background mode: the create is answered at once and its run goes on without the request.
    if (rng.chance(0.1)) base['background'] = true;
    if (rng.chance(0.1)) {
      const d = damage(serialize(base), rng);
      return { method: 'POST', path: '/v1/responses', headers: headers(rng), body: d.bytes, label: `POST damaged: ${d.how}` };
    }
    const m = rng.chance(0.9) ? mutate(base, rng, scale) : { value: base as Json, how: 'valid' };
    return { method: 'POST', path: '/v1/responses', headers: headers(rng), body: Buffer.from(serialize(m.value)), label: `POST ${m.how}` };
  }
  if (roll < 0.75) {
    const method = rng.pick(['GET', 'GET', 'DELETE', 'HEAD']);
    const id = ids.length && rng.chance(0.4) ? rng.pick(ids) : rng.chance(0.6) ? rng.pick(BAD_IDS) : percentBytes(String(weirdValue(rng, { ...scale, maxString: 200 })).slice(0, 300));
    return { method, path: `/v1/responses/${id}`, headers: headers(rng), label: `${method} /v1/responses/${id.slice(0, 60)}` };
  }
  if (roll < 0.85) {
    const method = rng.pick(['GET', 'GET', 'POST', 'DELETE']);
    const path = rng.pick(['/llr/runs', `/llr/runs/${rng.pick([...BAD_IDS, ...(ids.length ? [rng.pick(ids)] : [])])}`, '/llr/stats', '/health', '/llr/runs?limit=-1']);
    return { method, path, headers: headers(rng), label: `${method} ${path.slice(0, 60)}` };
  }
  const method = rng.pick(METHODS);
  const path = rng.pick(PATHS);
  const body = method === 'GET' || method === 'HEAD' || rng.chance(0.5) ? undefined : Buffer.from(serialize(weirdValue(rng, scale)));
  return { method, path, headers: headers(rng), ...(body ? { body } : {}), label: `${method} ${path.slice(0, 60)}` };
}

export async function fuzzHttp(target: Target, opts: FuzzOptions, tally: Tally): Promise<void> {
  const rng = new Rng(opts.seed);
  let ids: string[] = [];
  let batchIds: string[] = [];
  let lastInput = '';
  for (let i = 0; i < opts.inputs; i++) {
    const input = inputFor(rng, opts.scale, ids);
    lastInput = `#${i} http ${input.label} [${input.body?.length ?? 0} bytes] ${input.body ? input.body.subarray(0, 160).toString('utf8') : ''}`;
    target.lastInput = lastInput;
    const out = await send(target.url, input, opts.hangMs);
    if (out.kind === 'unsendable') continue;
    tally.inputs++;
    if (out.kind === 'hang') {
      tally.fail('hang', lastInput, `no complete answer within ${opts.hangMs} ms`);
      if (await target.checkAlive(tally, lastInput)) {
        ids = [];
        batchIds = [];
      }
    } else if (out.kind === 'reset') {
      if (await target.checkAlive(tally, lastInput)) {
        ids = [];
        batchIds = [];
        continue;
      }
      tally.fail('malformed', lastInput, `connection ended without an answer: ${out.message}`);
    } else if (out.status >= 200 && out.status < 300) {
      const id = judgeSuccess(out, input, tally, lastInput);
      if (id) {
        ids.push(id);
        batchIds.push(id);
      }
    } else {
      tally.errors++;
      const bad = checkErrorAnswer(out.status, out.contentType, out.body, input.method);
      if (bad) tally.fail('malformed', lastInput, bad);
      else if (input.method !== 'HEAD') tally.errorCode(`${out.status} ${(JSON.parse(out.body.toString('utf8')) as { error: { code: string } }).error.code}`);
    }
    if ((i + 1) % opts.batch === 0) {
      if (await target.checkAlive(tally, lastInput)) ids = [];
      else await checkRecords(target.url, batchIds, tally, opts.settleMs);
      batchIds = [];
    }
  }
  if (!(await target.checkAlive(tally, lastInput))) await checkRecords(target.url, batchIds, tally, opts.settleMs);
}

/** A 2xx: an SSE stream, a Response, or another JSON answer. Returns the response id of a create. */
function judgeSuccess(out: { status: number; contentType: string; body: Buffer }, input: HttpInput, tally: Tally, lastInput: string): string | null {
  const isCreate = input.method === 'POST' && input.path.replace(/\/+$/, '') === '/v1/responses';
  if (out.contentType.startsWith('text/event-stream')) {
    const sse = checkSse(out.body.toString('utf8'));
    const problems = [...sse.problems, ...sse.stream.close()];
    if (problems.length) tally.fail('sequence', lastInput, problems.slice(0, 3).join('; '));
    tally.responses++;
    return sse.stream.id;
  }
  if (input.method === 'HEAD') {
    tally.responses++;
    return null;
  }
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(out.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    tally.fail('malformed', lastInput, `HTTP ${out.status} body is not JSON`);
    return null;
  }
  tally.responses++;
  if (!isCreate) return null;
  if (json['object'] !== 'response' || typeof json['id'] !== 'string') {
    tally.fail('malformed', lastInput, 'a create answered 2xx without a Response object');
    return null;
  }
  // A background create is answered at once, its run still going (`queued` or `in_progress`); any other ends first.
  const ended = ['completed', 'incomplete', 'failed', 'cancelled'];
  const allowed = json['background'] === true ? [...ended, 'queued', 'in_progress'] : ended;
  if (!allowed.includes(String(json['status']))) tally.fail('malformed', lastInput, `a non-streamed ${json['background'] === true ? 'background ' : ''}Response with status '${String(json['status'])}'`);
  return json['id'] as string;
}
