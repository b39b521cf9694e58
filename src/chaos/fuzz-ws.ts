/**
 * The WebSocket fuzzer, for the long-lived and ws designs: one input at a
 * time on a connection — a mutated `response.create` (from realistic valid
 * bodies, and in ws mode continuations of the connection's last response),
 * `response.append` (mutated from a valid answer to the real pending calls,
 * sent while the run is paused), `response.cancel`, `response.processed`,
 * unknown types, binary frames, invalid JSON and invalid UTF-8.
 *
 * Each input is followed by a barrier frame (an unknown type carrying the
 * input's number), so "answered" is observable even for frames whose answer
 * is silence (`response.processed`). A create must be answered by an error
 * or a response stream, which the peer checks and the fuzzer drives to its
 * end (answering pauses, cancelling runaway runs).
 */
import { DOCUMENTED_CLOSE, RFC_CLOSE, type Tally } from './oracle.js';
import { Rng, corpus, damage, mutate, serialize, validAppend, weirdValue, type Json, type Scale } from './mutate.js';
import { checkRecords, type FuzzOptions, type Target } from './settle.js';
import { WsPeer, type WsProtocol } from './ws-peer.js';

export interface WsFuzzOptions extends FuzzOptions {
  protocol: WsProtocol;
}

interface Frame {
  text?: string | Buffer;
  binary?: Buffer;
  /** A create the server will parse as one: it must be answered by an error or a stream. */
  create: boolean;
  label: string;
}

const UNKNOWN_TYPES: Json[] = ['response.delete', 'session.update', '', 'RESPONSE.CREATE', 'response.create ', 'x'.repeat(500), '\ud800', 42, null, ['response.create'], { type: 'response.create' }];

function frameFor(rng: Rng, scale: Scale, protocol: WsProtocol, last: { id: string; calls: string[] } | null): Frame {
  const bodies = corpus();
  const roll = rng.next();
  const asCreate = (body: { [k: string]: Json }, tag: string): Frame => {
    const m = rng.chance(0.85) ? mutate(body, rng, scale) : { value: body as Json, how: 'valid' };
    const v = m.value as { [k: string]: Json } | Json;
    const obj = v && typeof v === 'object' && !Array.isArray(v) ? { ...(v as { [k: string]: Json }) } : null;
    if (!obj) return { text: serialize({ type: 'response.create', body: v }), create: true, label: `${tag} create (body replaced: ${m.how})` };
    if (!('type' in obj) || rng.chance(0.95)) obj['type'] = 'response.create';
    if (protocol === 'long-lived') delete obj['previous_response_id'];
    const text = serialize({ type: obj['type'], ...obj });
    return { text, create: obj['type'] === 'response.create', label: `${tag} create: ${m.how}` };
  };
  if (roll < 0.5) {
    const base = rng.pick(bodies);
    if (protocol === 'ws' && last && rng.chance(0.4)) {
      const cont: { [k: string]: Json } = {
        model: 'sim-model',
        previous_response_id: last.id,
        input: last.calls.length ? last.calls.map((id) => ({ type: 'function_call_output', call_id: id, output: 'ok' })) : 'go on',
        tools: base['tools'] ?? [],
        store: rng.chance(0.5),
      };
      return asCreate(cont, 'continuation');
    }
    return asCreate(base, 'corpus');
  }
  if (roll < 0.6) {
    const m = mutate(validAppend(['call_x', 'call_y'], rng), rng, scale);
    return { text: serialize(m.value), create: false, label: `append (idle): ${m.how}` };
  }
  if (roll < 0.67) {
    const f: { [k: string]: Json } = { type: 'response.cancel' };
    if (rng.chance(0.6)) f['response_id'] = weirdValue(rng, scale);
    return { text: serialize(f), create: false, label: `cancel response_id=${JSON.stringify(f['response_id'] ?? null)?.slice(0, 40)}` };
  }
  if (roll < 0.72) {
    const f: { [k: string]: Json } = { type: 'response.processed', response_id: 'resp_x' };
    if (rng.chance(0.5)) f['extra'] = weirdValue(rng, scale);
    return { text: serialize(f), create: false, label: 'processed' };
  }
  if (roll < 0.8) {
    const t = rng.pick(UNKNOWN_TYPES);
    return { text: JSON.stringify({ type: t, input: 'x' }), create: false, label: `unknown type ${JSON.stringify(t)?.slice(0, 30)}` };
  }
  if (roll < 0.85) {
    const bytes = Buffer.from(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'hi' }));
    return { binary: rng.chance(0.5) ? bytes : Buffer.from([0, 1, 2, 255]), create: false, label: 'binary frame' };
  }
  const base = JSON.stringify({ type: 'response.create', ...rng.pick(bodies) });
  const d = damage(base, rng);
  // Damage can leave valid JSON (a BOM is refused; a duplicate key is not): then it is a create.
  let create = false;
  try {
    const v = JSON.parse(d.bytes.toString('utf8')) as { type?: unknown };
    create = !!v && typeof v === 'object' && v.type === 'response.create' && !d.bytes.includes(0xff);
  } catch {
    create = false;
  }
  return { text: d.bytes, create, label: `damaged create: ${d.how}` };
}

/** Fuzz one design; run records are checked batch by batch (the server keeps a bounded ring of them). */
export async function fuzzWs(target: Target, opts: WsFuzzOptions, tally: Tally): Promise<void> {
  const rng = new Rng(opts.seed);
  let ids: string[] = [];
  let last: { id: string; calls: string[] } | null = null;
  let peer = await WsPeer.connect(target.url, opts.protocol);
  let lastInput = '';

  const reconnect = async () => {
    peer.terminate();
    if (await target.checkAlive(tally, lastInput)) ids = [];
    peer = await WsPeer.connect(target.url, opts.protocol);
    last = null;
  };

  for (let i = 0; i < opts.inputs; i++) {
    const frame = frameFor(rng, opts.scale, opts.protocol, last);
    const size = frame.text?.length ?? frame.binary?.length ?? 0;
    lastInput = `#${i} ${opts.protocol} ${frame.label} [${size} bytes] ${typeof frame.text === 'string' ? frame.text.slice(0, 160) : ''}`;
    target.lastInput = lastInput;
    tally.inputs++;
    const answered = await exchange(peer, frame, i, opts, tally, lastInput);
    if (answered === 'closed' || answered === 'hang') {
      await reconnect();
      continue;
    }
    const stream = answered === 'stream' ? peer.current : null;
    if (stream) {
      const outcome = await drive(peer, rng, opts, tally, lastInput);
      if (stream.id) ids.push(stream.id);
      const problems = stream.close();
      if (problems.length) tally.fail('sequence', lastInput, problems.slice(0, 3).join('; '));
      if (stream.terminal) tally.responses++;
      if (stream.terminal === 'response.completed' && stream.id) last = { id: stream.id, calls: stream.calls.map((c) => c.call_id) };
      if (outcome !== 'ok') {
        await reconnect();
        continue;
      }
    }
    for (const p of peer.problems.splice(0)) tally.fail('malformed', lastInput, p);
    if ((i + 1) % opts.batch === 0) {
      if (await target.checkAlive(tally, lastInput)) {
        peer = await WsPeer.connect(target.url, opts.protocol);
        last = null;
      } else await checkRecords(target.url, ids, tally, opts.settleMs);
      ids = [];
    }
  }
  await peer.close();
  if (!(await target.checkAlive(tally, lastInput))) await checkRecords(target.url, ids, tally, opts.settleMs);
}

/** Send one input and its barrier; classify the answer. */
async function exchange(peer: WsPeer, frame: Frame, i: number, opts: WsFuzzOptions, tally: Tally, input: string): Promise<'error' | 'stream' | 'silent' | 'closed' | 'hang'> {
  const from = peer.events.length;
  const streamsBefore = peer.streams.length;
  const token = `chaos.barrier.${i}`;
  if (frame.binary) peer.sendBinary(frame.binary);
  else peer.sendText(frame.text!);
  peer.send({ type: token });
  const isBarrier = (e: Record<string, unknown>) => e['type'] === 'error' && String((e['error'] as { message?: unknown })?.message ?? '').includes(token);
  const own = () => peer.events.slice(from).filter((e) => !isBarrier(e));
  const createAnswered = () => peer.streams.length > streamsBefore || own().some((e) => peer.connErrors.has(e));
  const ok = await peer.until(() => peer.events.slice(from).some(isBarrier) && (!frame.create || createAnswered()), opts.hangMs);
  if (peer.closeInfo) return closed(peer, tally, input);
  if (!ok) {
    tally.fail('hang', input, frame.create ? 'no error and no response.created' : 'the barrier after it was never answered');
    return 'hang';
  }
  if (peer.streams.length > streamsBefore) return 'stream';
  const errors = own().filter((e) => e['type'] === 'error');
  for (const e of errors) {
    const body = e['error'] as { code?: string };
    tally.errorCode(body.code ?? '?');
    if ((e['status'] as number) >= 500) tally.fail('malformed', input, `client input answered with ${String(e['status'])} ${body.code}`);
  }
  if (errors.length) {
    tally.errors++;
    return 'error';
  }
  return 'silent';
}

function closed(peer: WsPeer, tally: Tally, input: string): 'closed' {
  const code = peer.closeInfo!.code;
  tally.closeCode(code);
  if (DOCUMENTED_CLOSE.has(code) || RFC_CLOSE.has(code)) tally.closes++;
  else tally.fail('close', input, `closed with ${code} '${peer.closeInfo!.reason}'`);
  return 'closed';
}

/** Drive the open stream to its end: answer pauses (sometimes with a mutated append first), cancel runaway runs. */
async function drive(peer: WsPeer, rng: Rng, opts: WsFuzzOptions, tally: Tally, input: string): Promise<'ok' | 'closed' | 'hang'> {
  const s = peer.current!;
  for (let round = 0; ; round++) {
    const settled = await peer.until(() => s.terminal !== null || s.paused, opts.hangMs);
    if (s.terminal) {
      // llr:timing (the peer opted in) follows the terminal event in the same turn; wait for it so the next input starts clean.
      await peer.until(() => s.timing || peer.current !== s, Math.min(opts.hangMs, 2_000));
      return 'ok';
    }
    if (peer.closeInfo) {
      closed(peer, tally, input);
      return 'closed';
    }
    if (!settled) {
      tally.fail('hang', input, `response ${s.id} neither ended nor paused within ${opts.hangMs} ms`);
      return 'hang';
    }
    const pending = s.pendingCalls.slice();
    s.paused = false;
    if (round >= 12) {
      peer.send({ type: 'response.cancel' });
      continue;
    }
    if (rng.chance(0.5)) {
      const m = mutate(validAppend(pending, rng), rng, opts.scale);
      const text = serialize(m.value);
      tally.inputs++;
      const appendInput = `${input} → append: ${m.how} ${text.slice(0, 160)}`;
      const from = peer.events.length;
      peer.sendText(text);
      peer.send({ type: `chaos.barrier.append.${round}` });
      const ok = await peer.until(() => peer.events.slice(from).some((e) => e['type'] === 'error' && String((e['error'] as { message?: unknown })?.message).includes(`chaos.barrier.append.${round}`)), opts.hangMs);
      if (peer.closeInfo) {
        closed(peer, tally, appendInput);
        return 'closed';
      }
      if (!ok) {
        tally.fail('hang', appendInput, 'the barrier after an append was never answered');
        return 'hang';
      }
      const errs = peer.events.slice(from).filter((e) => e['type'] === 'error' && !String((e['error'] as { message?: unknown })?.message).includes('chaos.barrier'));
      for (const e of errs) {
        const body = e['error'] as { code?: string };
        tally.errorCode(body.code ?? '?');
        if ((e['status'] as number) >= 500) tally.fail('malformed', appendInput, `append answered with ${String(e['status'])} ${body.code}`);
      }
      if (errs.length) tally.errors++;
      if (s.terminal) continue;
    }
    // Whatever the mutated append did, answer every call (already answered ones are dropped as duplicates).
    if (!s.terminal) peer.send(validAppend(pending, rng));
  }
}
