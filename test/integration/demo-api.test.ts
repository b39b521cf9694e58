/**
 * The teaching demo's API on a real server (port 0): a race runs the same
 * workload through every design with the project's own clients, and what it
 * streams agrees with the server's own records; step mode holds every lane
 * at each model call until the presenter steps; a race ends with its page;
 * bad requests and one race too many get clear errors; the page's files are
 * served with a policy that forbids requests elsewhere.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sseEvents } from '../../src/client/http.js';
import { DEMO_DESIGNS } from '../../src/demo/designs.js';
import { buildWorkload } from '../../src/demo/workloads.js';
import type { DemoMessage, LaneDoneMessage, ResponseMessage } from '../../src/demo/messages.js';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

type Msg = DemoMessage;

async function startRace(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/demo/api/races`, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' }, ...(signal && { signal }) });
}

/** Read a race's stream; `onMessage` may act on each message (step, abort). */
async function readRace(res: Response, onMessage: (m: Msg) => void | Promise<void> = () => {}): Promise<Msg[]> {
  const out: Msg[] = [];
  for await (const e of sseEvents(res.body!)) {
    const m = e as unknown as Msg;
    out.push(m);
    await onMessage(m);
  }
  return out;
}

async function records(url: string): Promise<RunRecord[]> {
  return ((await (await fetch(`${url}/llr/runs`)).json()) as { data: RunRecord[] }).data;
}

function sum(recs: RunRecord[], k: string): number {
  return recs.reduce((n, r) => n + (r.counters[k] ?? 0), 0);
}

describe('demo race', () => {
  it('runs the synthetic workload through every design and reports what the server recorded', async () => {
    const { url } = await testServer();
    const res = await startRace(url, { workload: 'synthetic', tool_calls: 4, speed: 'instant', tool_time: 'none' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const msgs = await readRace(res);
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    const race = msgs.find((m) => m.type === 'race')!;
    expect(race.type === 'race' && race.designs.map((d) => d.id)).toEqual(DEMO_DESIGNS.map((d) => d.id));
    expect(race.type === 'race' && race.order).toBe('together');
    // Each lane is said done right after its figures, as it ends: not every lane's at the race's end, which kept a
    // lane that had ended shown running and the page's time scale past the longest lane (atk89 F2).
    for (const d of DEMO_DESIGNS) {
      const at = msgs.findIndex((m) => m.type === 'lane.done' && m.design === d.id);
      expect(msgs[at + 1], d.id).toMatchObject({ type: 'lane.state', design: d.id, state: 'done' });
    }
    const all = await records(url);
    for (const d of race.type === 'race' ? race.designs : []) {
      const mine = all.filter((r) => r.model === d.model);
      const done = msgs.find((m): m is LaneDoneMessage => m.type === 'lane.done' && m.design === d.id)!;
      expect(done, d.id).toBeDefined();
      expect(sum(mine, 'model_calls'), d.id).toBe(5);
      expect(mine.every((r) => r.status === 'completed' && r.post_done)).toBe(true);
      expect(done.responses).toBe(mine.length);
      expect(done.e2e_ms).toBeGreaterThan(0);
      // The race's bytes only (not the warm-up's): the sizes of the requests in the wire log add up to them.
      const sent = msgs.flatMap((m) => (m.type === 'wire' && m.design === d.id && m.dir === 'out' ? [Number(/ · ([\d,]+) bytes$/.exec(m.detail)![1]!.replace(/,/g, ''))] : []));
      expect(sent).toHaveLength(5);
      expect(done.bytes_sent).toBe(sent.reduce((a, b) => a + b, 0));
      // The last `response` message of each response is its final record, identical to /llr/runs.
      const last = new Map<string, ResponseMessage>();
      for (const m of msgs) if (m.type === 'response' && m.design === d.id) last.set(m.record.response_id, m);
      expect([...last.values()].every((m) => m.final)).toBe(true);
      expect([...last.values()].map((m) => m.record).sort((a, b) => a.response_id.localeCompare(b.response_id))).toEqual(
        mine.sort((a, b) => a.response_id.localeCompare(b.response_id)),
      );
      expect(msgs.some((m) => m.type === 'lane.state' && m.design === d.id && m.state === 'done')).toBe(true);
    }
    const model = (id: string) => (race.type === 'race' ? race.designs.find((d) => d.id === id)!.model : '');
    // The designs' difference, as the server recorded it: one response against one per call, and re-tokenising.
    expect(all.filter((r) => r.model === model('long-lived'))).toHaveLength(1);
    expect(all.filter((r) => r.model === model('http'))).toHaveLength(5);
    expect(sum(all.filter((r) => r.model === model('http')), 'tokens_tokenized')).toBeGreaterThan(
      sum(all.filter((r) => r.model === model('long-lived')), 'tokens_tokenized'),
    );
    // Both directions of the long-lived wire: response.done out of the server, response.append into it.
    const wire = msgs.filter((m) => m.type === 'wire' && m.design === 'long-lived').map((m) => (m.type === 'wire' ? `${m.dir} ${m.event}` : ''));
    expect(wire.filter((w) => w === 'in response.done')).toHaveLength(4);
    expect(wire.filter((w) => w === 'out response.append')).toHaveLength(4);
    const ws = msgs.filter((m) => m.type === 'wire' && m.design === 'ws' && m.event === 'response.created');
    expect(ws.filter((m) => m.type === 'wire' && m.detail.includes('previous_response_id='))).toHaveLength(4);
  });

  it('a lane\'s figures count every one of its responses, though the server\'s run records no longer hold them (outside attack atk50 F1)', async () => {
    // The ring keeps the newest two records of every client's: the lanes' own (and other traffic's) push the earlier
    // out. The lanes' figures skipped the records gone by the race's end (a lane done with "model 0.0 ms").
    const { url } = await testServer({ limits: { maxRunRecords: 2 } });
    const msgs = await readRace(await startRace(url, { workload: 'synthetic', tool_calls: 4, speed: 'instant' }));
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    for (const d of DEMO_DESIGNS) {
      const done = msgs.find((m): m is LaneDoneMessage => m.type === 'lane.done' && m.design === d.id)!;
      const finals = msgs.filter((m): m is ResponseMessage => m.type === 'response' && m.design === d.id && m.final);
      // One final record per response of the lane, and its figures are theirs.
      expect(finals.map((m) => m.record.response_id).sort(), d.id).toHaveLength(done.responses);
      expect(new Set(finals.map((m) => m.record.response_id)).size, d.id).toBe(done.responses);
      expect(finals.reduce((n, m) => n + (m.record.counters['model_calls'] ?? 0), 0), d.id).toBe(5);
      const stages = new Map<string, number>();
      for (const m of finals) for (const [k, v] of Object.entries(m.record.totals)) if (!['prefill', 'decode', 'paused'].includes(k)) stages.set(k, (stages.get(k) ?? 0) + v);
      for (const [k, v] of stages) expect(done.stage_ms[k], `${d.id} ${k}`).toBeCloseTo(v, 2);
    }
    expect((await records(url)).length).toBeLessThanOrEqual(2);
  });

  it('replays a workload whose history was compacted: each lane starts a new conversation where the recording did (outside attack atk106 F3)', async () => {
    // The compaction's flag was dropped: every lane went on with the history from before it, the HTTP lane's input
    // growing at every call (122 to 963 tokens) where the recording's drops at its user turns 2 and 3.
    const { url } = await testServer({ demo: { workloadPath: fileURLToPath(new URL('../fixtures/workloads/rollout-compacted.jsonl', import.meta.url)) } });
    // A file given is any agent's recorded run: the page names it, not "a real Codex CLI session" (atk106 F4).
    const config = (await (await fetch(`${url}/demo/api/config`)).json()) as { workloads: { codex: unknown } };
    expect(config.workloads.codex).toEqual({ available: true, label: 'The run of rollout-compacted.jsonl', bundled: false });
    const msgs = await readRace(await startRace(url, { workload: 'codex', speed: 'instant', tool_time: 'none', order: 'one-by-one' }));
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    const race = msgs.find((m) => m.type === 'race')!;
    expect(race.type === 'race' && JSON.stringify(race)).not.toContain('Codex');
    const all = await records(url);
    const model = (id: string) => (race.type === 'race' ? race.designs.find((d) => d.id === id)!.model : '');
    // Calls in the order made: over a WebSocket, calls 3 and 6 (the compacted turns) continue no response.
    const ws = all.filter((r) => r.model === model('ws')).reverse();
    expect(ws.map((r) => r.previous_response_id === null)).toEqual([true, false, true, false, false, true, false]);
    // The long-lived design: one Response for each conversation.
    expect(all.filter((r) => r.model === model('long-lived'))).toHaveLength(3);
    // Over HTTP the whole context is sent at each call: the compacted turn's, not the history before it.
    const http = all.filter((r) => r.model === model('http')).reverse();
    expect(http).toHaveLength(7);
  });

  it('runs the lanes one after another on request: each starts when the previous one ended', async () => {
    const { url } = await testServer();
    const msgs = await readRace(await startRace(url, { workload: 'synthetic', tool_calls: 2, speed: 'instant', order: 'one-by-one' }));
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    // Each lane's first wire event comes after the previous lane's last one.
    const order = msgs.flatMap((m) => (m.type === 'wire' ? [m.design] : []));
    const firsts = DEMO_DESIGNS.map((d) => order.indexOf(d.id));
    const lasts = DEMO_DESIGNS.map((d) => order.lastIndexOf(d.id));
    for (let i = 1; i < DEMO_DESIGNS.length; i++) expect(firsts[i]!).toBeGreaterThan(lasts[i - 1]!);
    for (const d of DEMO_DESIGNS) expect(msgs.some((m) => m.type === 'lane.done' && m.design === d.id)).toBe(true);
    // Each lane is said done, its figures first, before the next one starts: said only once the last had run, a finished
    // lane was shown running for the whole race and the page's one time scale grew to the race's length (atk89 F2).
    for (let i = 0; i < DEMO_DESIGNS.length; i++) {
      const id = DEMO_DESIGNS[i]!.id;
      const figures = msgs.findIndex((m) => m.type === 'lane.done' && m.design === id);
      const done = msgs.findIndex((m) => m.type === 'lane.state' && m.design === id && m.state === 'done');
      expect(figures).toBeGreaterThan(-1);
      expect(done).toBeGreaterThan(figures);
      const next = DEMO_DESIGNS[i + 1];
      if (next) expect(done).toBeLessThan(msgs.findIndex((m) => m.type === 'lane.state' && m.design === next.id && m.state === 'running'));
    }
  });

  it('replays a prompt with $ lines without running them, one command per model call', async () => {
    const { url } = await testServer();
    const prompt = 'Look around.\n$ rm -rf /tmp/never-run-by-llr-demo\n$ ls';
    const msgs = await readRace(await startRace(url, { workload: 'prompt', prompt, speed: 'instant' }));
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    const race = msgs.find((m) => m.type === 'race');
    expect(race?.type === 'race' && race.workload.tools_note).toMatch(/No command runs/);
    // Exact names: `-http` is also the end of `-long-lived-http`.
    const httpModel = race?.type === 'race' ? race.designs.find((d) => d.id === 'http')!.model : '';
    const http = (await records(url)).filter((r) => r.model === httpModel);
    expect(sum(http, 'model_calls')).toBe(3);
  });

  it('a prompt race\'s least duration counts what the model decodes: each command\'s arguments and the summary (atk106 F2, atk108 F1), of at most 64 commands (atk108 F2)', async () => {
    const { url } = await testServer();
    const prompt = Array.from({ length: 64 }, (_, i) => `$ echo a${i}`).join('\n');
    const least = buildWorkload({ kind: 'prompt', text: prompt }, { maxToolCalls: 100, maxPromptBytes: 16384 }, '').min_output_tokens;
    const msgs = await readRace(await startRace(url, { workload: 'prompt', prompt, speed: 'instant', order: 'one-by-one' }));
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    const race = msgs.find((m) => m.type === 'race');
    const httpModel = race?.type === 'race' ? race.designs.find((d) => d.id === 'http')!.model : '';
    const http = (await records(url)).filter((r) => r.model === httpModel);
    expect(sum(http, 'model_calls')).toBe(65);
    // What the lane decoded: the estimate is a least figure, and the summary counted, it is within a few percent of it.
    const decoded = http.reduce((n, r) => n + (r.usage?.output_tokens ?? 0), 0);
    expect(least).toBeLessThanOrEqual(decoded);
    expect(least).toBeGreaterThan(0.9 * decoded);
    // One line more than the simulated model runs for one message is refused, naming why.
    const over = await startRace(url, { workload: 'prompt', prompt: `${prompt}\n$ echo more`, speed: 'instant' });
    expect(over.status).toBe(400);
    expect(((await over.json()) as { error: { param: string; message: string } }).error).toMatchObject({ param: 'prompt', message: expect.stringContaining('at most 64 (the simulated model runs at most 64 commands for one message)') });
  });

  it('step mode holds every lane at each model call until the presenter steps', async () => {
    const { url, server } = await testServer();
    const res = await startRace(url, { workload: 'synthetic', tool_calls: 2, speed: 'instant', step: true });
    let raceId = '';
    let steps = 0;
    const msgs = await readRace(res, async (m) => {
      if (m.type === 'race') raceId = m.race_id;
      if (m.type === 'step' && m.waiting.length === DEMO_DESIGNS.length) {
        // Every lane is waiting: none has started the next model call.
        const calls = (await records(url)).filter((r) => r.model.startsWith(`llr-demo-${raceId}-`) && !r.model.endsWith('-warmup'));
        for (const d of DEMO_DESIGNS) {
          expect(sum(calls.filter((r) => r.model === `llr-demo-${raceId}-${d.id}`), 'model_calls'), d.id).toBe(steps + 1);
        }
        steps++;
        const r = await fetch(`${url}/demo/api/races/${raceId}/step`, { method: 'POST' });
        expect(r.status).toBe(200);
        expect(await r.json()).toEqual({ allowed: steps + 1 });
      }
    });
    expect(steps).toBe(2);
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    expect(msgs.filter((m) => m.type === 'gate').length).toBe(2 * DEMO_DESIGNS.length);
    await server.demo!.idle();
    expect(server.demo!.models.size).toBe(0);
  });

  it('stops a running race when its page goes away: no lane runs on through the workload', async () => {
    const { url, server } = await testServer();
    const page = new AbortController();
    const res = await startRace(url, { workload: 'synthetic', tool_calls: 40, speed: '65' }, page.signal);
    let raceId = '';
    await readRace(res, (m) => {
      if (m.type === 'race') raceId = m.race_id;
      // Stop as soon as a lane sends its first tool outputs.
      if (m.type === 'wire' && m.dir === 'out' && m.event !== 'response.create' && m.event !== 'POST /v1/responses') page.abort();
    }).catch((err: unknown) => expect((err as Error).name).toBe('AbortError'));
    await server.demo!.idle();
    expect(server.demo!.models.size).toBe(0);
    const mine = (await records(url)).filter((r) => r.model.startsWith(`llr-demo-${raceId}-`) && !r.model.endsWith('-warmup'));
    // 41 model calls per lane had it run on; a stopped lane makes at most a few.
    for (const d of DEMO_DESIGNS) expect(sum(mine.filter((r) => r.model === `llr-demo-${raceId}-${d.id}`), 'model_calls'), d.id).toBeLessThan(5);
  });

  it('stops a race when its page goes away, and frees its lanes', async () => {
    const { url, server } = await testServer();
    const page = new AbortController();
    const res = await startRace(url, { workload: 'synthetic', tool_calls: 3, speed: 'instant', step: true }, page.signal);
    await readRace(res, (m) => {
      if (m.type === 'step' && m.waiting.length === DEMO_DESIGNS.length) page.abort();
    }).catch((err: unknown) => expect((err as Error).name).toBe('AbortError'));
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
    expect(server.demo!.models.size).toBe(0);
  });
});

describe('demo requests', () => {
  it('refuses bad fields with the field named', async () => {
    const { url } = await testServer();
    const cases: Array<[unknown, number, string | null]> = [
      [{ workload: 'synthetic', tool_calls: 3, speed: 'fast' }, 400, 'speed'],
      [{ workload: 'synthetic', tool_calls: 0, speed: 'instant' }, 400, 'tool_calls'],
      [{ workload: 'synthetic', tool_calls: 101, speed: 'instant' }, 400, 'tool_calls'],
      [{ workload: 'nope', speed: 'instant' }, 400, 'workload'],
      [{ workload: 'prompt', prompt: '   ', speed: 'instant' }, 400, 'prompt'],
      [{ workload: 'prompt', prompt: 'x'.repeat(17_000), speed: 'instant' }, 413, 'prompt'],
      [{ workload: 'synthetic', tool_calls: 1, speed: 'instant', step: 'yes' }, 400, 'step'],
      [{ workload: 'synthetic', tool_calls: 1, speed: 'instant', step: true, order: 'one-by-one' }, 400, 'order'],
      [{ workload: 'synthetic', tool_calls: 1, speed: 'instant', order: 'random' }, 400, 'order'],
      [[], 400, null],
    ];
    for (const [body, status, param] of cases) {
      const res = await startRace(url, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      const err = ((await res.json()) as { error: { param: string | null; message: string } }).error;
      expect(err.param).toBe(param);
      expect(err.message.length).toBeGreaterThan(0);
    }
    const notJson = await fetch(`${url}/demo/api/races`, { method: 'POST', body: '{', headers: { 'Content-Type': 'application/json' } });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    // A body that parses as JSON but comes as a form or plain text (what a page elsewhere could post without a
    // preflight) is refused for its type, and no race starts.
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']) {
      const res = await fetch(`${url}/demo/api/races`, { method: 'POST', body: JSON.stringify({ workload: 'synthetic', tool_calls: 1, speed: 'instant' }), headers: { 'Content-Type': type } });
      expect(res.status, type).toBe(415);
      expect(((await res.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Type' });
    }
    expect(await records(url)).toHaveLength(0);
    expect((await fetch(`${url}/demo/api/races/rnope/step`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${url}/demo/api/races`)).status).toBe(405);
  });

  it('answers one race too many with 429 while the others run', async () => {
    const { url, server } = await testServer({ demo: { maxRaces: 1 } });
    const page = new AbortController();
    const first = await startRace(url, { workload: 'synthetic', tool_calls: 2, speed: 'instant', step: true }, page.signal);
    const reading = readRace(first, async (m) => {
      if (m.type === 'step' && m.waiting.length === DEMO_DESIGNS.length) {
        const second = await startRace(url, { workload: 'synthetic', tool_calls: 2, speed: 'instant' });
        expect(second.status).toBe(429);
        expect(((await second.json()) as { error: { code: string } }).error.code).toBe('too_many_races');
        page.abort();
      }
    }).catch((err: unknown) => expect((err as Error).name).toBe('AbortError'));
    await reading;
    await server.demo!.idle();
  });

  it('serves the page with a policy that keeps it on this server, and nothing outside its files', async () => {
    const { url } = await testServer();
    const page = await fetch(`${url}/demo`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*connect-src 'self'/);
    expect(await page.text()).toMatch(/data-action="race"/);
    for (const f of ['demo.js', 'lanes.js', 'timeline.js', 'sse-frames.js', 'demo.css']) expect((await fetch(`${url}/demo/${f}`)).status, f).toBe(200);
    expect((await fetch(`${url}/demo/..%2Fpackage.json`)).status).toBe(404);
    // Names an object inherits (`in` would see them) are not files either: 404, not a 500 from reading them.
    for (const f of ['__proto__', 'constructor', 'hasOwnProperty', 'toString']) {
      const r = await fetch(`${url}/demo/${f}`);
      expect(r.status, f).toBe(404);
      expect(((await r.json()) as { error: { code: string } }).error.code, f).toBe('not_found');
    }
    expect((await fetch(`${url}/demo/index.html`, { method: 'POST' })).status).toBe(405);
    const config = (await (await fetch(`${url}/demo/api/config`)).json()) as { designs: Array<{ id: string }> };
    expect(config.designs.map((d) => d.id)).toEqual(DEMO_DESIGNS.map((d) => d.id));
  });

  it('the page\'s files carry a validator: a reload whose copy is current is answered 304 with no body', async () => {
    const { url } = await testServer();
    for (const f of ['', '/demo.js', '/lanes.js', '/timeline.js', '/sse-frames.js', '/demo.css']) {
      const first = await fetch(`${url}/demo${f}`);
      const body = await first.text();
      const etag = first.headers.get('etag');
      // Cache-Control: no-cache asks the browser to revalidate every load; with no validator it fetched every file whole.
      expect(etag, f).toMatch(/^"[0-9a-f]{16,}"$/);
      expect(first.headers.get('cache-control'), f).toBe('no-cache');
      for (const tag of [etag!, `W/${etag!}`, `"other", ${etag!}`, '*']) {
        const again = await fetch(`${url}/demo${f}`, { headers: { 'If-None-Match': tag } });
        expect(again.status, `${f} ${tag}`).toBe(304);
        expect(again.headers.get('etag'), f).toBe(etag);
        expect(await again.text(), f).toBe('');
      }
      const stale = await fetch(`${url}/demo${f}`, { headers: { 'If-None-Match': '"0000000000000000"' } });
      expect(stale.status, f).toBe(200);
      expect(await stale.text(), f).toBe(body);
      const head = await fetch(`${url}/demo${f}`, { method: 'HEAD', headers: { 'If-None-Match': etag! } });
      expect(head.status, f).toBe(304);
    }
  });

  it('on a server refusing WebSockets, lists and races only the designs served over plain HTTP', async () => {
    const { url } = await testServer({ refuseWebSockets: true });
    const httpOnly = DEMO_DESIGNS.filter((d) => !d.websocket).map((d) => d.id);
    expect(httpOnly).toEqual(['http', 'long-lived-http']);
    const config = (await (await fetch(`${url}/demo/api/config`)).json()) as { designs: Array<{ id: string }> };
    expect(config.designs.map((d) => d.id)).toEqual(httpOnly);
    const msgs = await readRace(await startRace(url, { workload: 'synthetic', tool_calls: 2, speed: 'instant', tool_time: 'none' }));
    // Every lane the race lists ends done: none was a WebSocket lane failing its upgrade with 426.
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    const race = msgs.find((m) => m.type === 'race');
    expect(race?.type === 'race' && race.designs.map((d) => d.id)).toEqual(httpOnly);
    expect(msgs.flatMap((m) => (m.type === 'lane.done' ? [m.design] : [])).sort()).toEqual(httpOnly);
    expect(msgs.some((m) => m.type === 'lane.state' && m.state === 'failed')).toBe(false);
  });

  it('lets only the key that started a race step it: another key is told no such race', async () => {
    const { url } = await testServer({ apiKeys: ['sk-a', 'sk-b'] });
    const post = (path: string, key: string, body?: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    const res = await post('/demo/api/races', 'sk-a', { workload: 'synthetic', tool_calls: 1, speed: 'instant', step: true });
    let raceId = '';
    const msgs = await readRace(res, async (m) => {
      if (m.type === 'race') raceId = m.race_id;
      if (m.type === 'step' && m.waiting.length === DEMO_DESIGNS.length) {
        const other = await post(`/demo/api/races/${raceId}/step`, 'sk-b');
        expect(other.status).toBe(404);
        expect(await other.json()).toMatchObject({ error: { code: 'not_found', message: `No running demo race '${raceId}'.` } });
        const own = await post(`/demo/api/races/${raceId}/step`, 'sk-a');
        expect(await own.json()).toEqual({ allowed: 2 });
      }
    });
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
  });

  it('asks for the API key the server asks for', async () => {
    const { url } = await testServer({ apiKeys: ['sk-demo'] });
    expect((await fetch(`${url}/demo`)).status).toBe(200);
    expect((await fetch(`${url}/demo/api/config`)).status).toBe(401);
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { Authorization: 'Bearer sk-demo', 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 1, speed: 'instant' }),
    });
    const msgs = await readRace(res);
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
    // The scheme in any case, as the server reads it: the lanes get the same key (they got none, and each failed with 401).
    const lower = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { Authorization: 'bearer sk-demo', 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 1, speed: 'instant' }),
    });
    expect(lower.status).toBe(200);
    const again = await readRace(lower);
    expect(again.filter((m) => m.type === 'lane.state' && m.state === 'failed')).toEqual([]);
    expect(again.at(-1)).toMatchObject({ type: 'race.done', status: 'done' });
  });
});
