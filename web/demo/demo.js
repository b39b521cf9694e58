// The demo page's controller: reads the server's configuration (designs,
// limits), starts a race with `POST /demo/api/races` and reads its SSE stream,
// hands its messages to their lanes in batches (a frame at most every 100 ms)
// and redraws the charts at most every 250 ms, so the page takes little of the
// machine whose server it times. "Pause animation" holds the messages back
// (nothing is lost) until resumed.
// Talks only to the server that served it.

import { CATEGORIES, apiTotal, patternDefs, swatch } from './timeline.js';
import { LaneView, fmt } from './lanes.js';
import { SseFrames } from './sse-frames.js';

const $ = (sel) => document.querySelector(sel);
const form = $('#race-form');
const raceBtn = $('[data-action="race"]');
const stepBtn = $('[data-action="step"]');
const stopBtn = $('[data-action="stop"]');
const pauseBtn = $('[data-action="pause-animation"]');
const note = $('#workload-note');
const errorBox = $('#error');
const summary = $('#summary');

let config = null;
let lanes = new Map();
let race = null;
/** The last race's description (kept after it ends, for the explanation). */
let lastInfo = null;
let held = [];
/**
 * Where in `held` the latest record of each response, and the latest byte count of each lane, waits: a newer one
 * takes its place. A response in progress is re-sent every 100 ms with its whole record (tens of KB for a long run),
 * so a page paused through a long race held every copy: the Codex run at 4,000 tokens/s sends 535 records (2.9 MB),
 * at 65 tokens/s about sixty times as many. Only the last of each is ever shown.
 */
let heldAt = new Map();
let paused = false;
let frame = 0;
/** Whether a message since the last drawing changed what the lanes draw (records, counts, states). */
let stale = false;

function authHeaders() {
  const key = form.elements.api_key.value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

function showError(text) {
  errorBox.textContent = text;
  errorBox.hidden = !text;
}

async function errorText(res) {
  try {
    const body = await res.json();
    return body.error?.message ?? `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

async function loadConfig() {
  const res = await fetch('/demo/api/config', { headers: authHeaders() });
  if (res.status === 401) {
    document.querySelector('[data-for="auth"]').hidden = false;
    showError(form.elements.api_key.value.trim() ? 'The server refused this API key: check it and start the race again.' : 'This server needs an API key: type it in and start the race.');
    return false;
  }
  if (!res.ok) {
    showError(await errorText(res));
    return false;
  }
  config = await res.json();
  document.querySelector('[data-for="auth"]').hidden = !config.auth_required;
  form.elements.tool_calls.max = String(config.workloads.synthetic.max_tool_calls);
  const codex = form.elements.workload.querySelector('option[value="codex"]');
  // The file `llr serve --demo-workload` gave is named, not called the bundled run.
  if (typeof config.workloads.codex.label === 'string') codex.textContent = config.workloads.codex.label;
  codex.disabled = !config.workloads.codex.available;
  if (codex.disabled) codex.textContent += ' (not installed)';
  buildLanes(config.designs);
  describeWorkload();
  return true;
}

function buildLanes(designs) {
  const main = $('#lanes');
  main.replaceChildren();
  main.style.setProperty('--lanes', String(designs.length));
  lanes = new Map();
  for (const d of designs) {
    const lane = new LaneView(d);
    lanes.set(d.id, lane);
    main.append(lane.el);
  }
}

function buildLegend() {
  const legend = $('#legend');
  legend.append(patternDefs());
  const ul = document.createElement('ul');
  for (const c of CATEGORIES) {
    const li = document.createElement('li');
    li.append(swatch(c), ` ${c.label}`);
    ul.append(li);
  }
  legend.append(ul);
}

function describeWorkload() {
  const kind = form.elements.workload.value;
  for (const el of document.querySelectorAll('[data-for="synthetic"], [data-for="prompt"]')) el.hidden = el.dataset.for !== kind;
  const w = config?.workloads;
  const text = {
    synthetic: `A synthetic agent run: the model calls exec_command once per model call; each tool answers with generated shell output${w ? ` (${w.synthetic.tool_ms} ms each "as recorded")` : ''}.`,
    codex:
      w?.codex?.bundled === false
        ? `${w.codex.label}: a recorded agent session, replayed call for call: the model repeats what was recorded and the tools answer with the recorded outputs.`
        : 'A real Codex CLI session, replayed call for call: the model repeats what was recorded and the tools answer with the recorded outputs.',
    prompt: `The simulated model runs each "$ " line as an exec_command call. Nothing runs on this machine: each command gets a fixed stand-in output${w ? ` (${w.prompt.tool_ms} ms each "as recorded")` : ''}.`,
  }[kind];
  note.textContent = text ?? '';
}

function raceBody() {
  const f = form.elements;
  const body = { workload: f.workload.value, speed: f.speed.value, tool_time: f.tool_time.value, step: f.step.checked, order: f.order.value };
  if (body.workload === 'synthetic') body.tool_calls = Number(f.tool_calls.value);
  if (body.workload === 'prompt') body.prompt = f.prompt.value;
  return body;
}

/** A start waiting for the configuration (a server with keys: the first fetch was refused until a key was typed). */
let starting = false;

async function startRace(event) {
  event.preventDefault();
  // One race per page: a second click while the first waited for the configuration started a second race feeding the
  // same lanes, which Stop did not stop (outside attack atk50 F2).
  if (race || starting) return;
  if (!config) {
    starting = true;
    raceBtn.disabled = true;
    const loaded = await loadConfig().catch(configFailed);
    starting = false;
    raceBtn.disabled = false;
    if (!loaded) return;
  }
  showError('');
  let ticker = 0;
  const controller = new AbortController();
  race = { id: null, controller, step: form.elements.step.checked, stopped: false, silent: false, quiet: 0, silenceMs: DEFAULT_SILENCE_MS };
  const current = race;
  // A server that stops answering without closing the connection (suspended with Ctrl-Z, its machine asleep, the
  // network gone) left every lane "running" for good: the stream carries a comment every alive_ms (the race message
  // says how often), so nothing at all for three of those gives the race up, said as such.
  heard(current);
  let streaming = false;
  let ended = false;
  raceBtn.disabled = true;
  raceBtn.textContent = 'Racing…';
  stopBtn.disabled = false;
  try {
    const res = await fetch('/demo/api/races', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...authHeaders() },
      body: JSON.stringify(raceBody()),
      signal: controller.signal,
    });
    if (!res.ok || !res.body) {
      // The last race's results stay on screen beside the refusal (one race too many, a wrong key).
      showError(await errorText(res));
      return;
    }
    summary.hidden = true;
    // Messages of the last race still held by "Pause animation" would land on this race's lanes (its counts added to these).
    held = [];
    heldAt = new Map();
    pauseBtn.dataset.held = '0';
    for (const lane of lanes.values()) lane.reset();
    streaming = true;
    // A lane's timeline grows with its time so far even while no message comes (a call decoding for seconds).
    ticker = setInterval(() => {
      if (paused) return;
      stale = true;
      schedule();
    }, DRAW_MS);
    heard(current);
    ended = await readStream(res.body, current);
    if (!ended) showError('The race stream ended before the race did (the server stopped?).');
  } catch (err) {
    // Before its stream began the race never started (the server unreachable): "broke" would say it had.
    if (current.silent) showError(`The server stopped answering: nothing came for ${fmt(current.silenceMs / 1000, current.silenceMs % 1000 ? 1 : 0)} s (is it suspended, or its machine asleep?). The race was given up.`);
    else if (err.name !== 'AbortError') showError(streaming ? `The race stream broke: ${err.message}` : `The race could not start: ${err.message}`);
  } finally {
    clearInterval(ticker);
    clearTimeout(current.quiet);
    // A stream that ended without race.done (Stop, the server gone): no lane is left showing "running" for ever.
    // Queued behind any held messages, so it is applied after them.
    if (streaming && !ended) receive({ type: 'race.lost', reason: race.stopped ? 'stopped' : race.silent ? 'the server stopped answering' : 'the race stream broke' });
    race = null;
    raceBtn.disabled = false;
    raceBtn.textContent = 'Start the race';
    stepBtn.disabled = true;
    stopBtn.disabled = true;
    schedule();
  }
}

/** Silence, ms, after which a race is given up before its stream said how often it speaks (three of the server's default 5 s). */
const DEFAULT_SILENCE_MS = 15_000;

/** Something came from the server for this race: its silence starts again. */
function heard(r) {
  clearTimeout(r.quiet);
  r.quiet = setTimeout(() => {
    r.silent = true;
    r.controller.abort();
  }, r.silenceMs);
}

/** Reads the race's stream to its end; whether it carried the race's end (race.done). */
async function readStream(body, r) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const frames = new SseFrames();
  let ended = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return ended;
    heard(r);
    for (const data of frames.push(value)) {
      const m = JSON.parse(data);
      if (m.type === 'race.done') ended = true;
      if (m.type === 'race' && m.alive_ms > 0) r.silenceMs = 3 * m.alive_ms;
      receive(m);
    }
  }
}

// The page shares the machine with the server it times: a race at 4,000 tokens/s sends over a hundred messages a
// second, and a page changed for each (a frame to style, lay out and paint each time) and redrawn whole for each
// took most of a core (18 s of renderer CPU in the Codex run's 28 s race, on two cores). So messages are applied in
// batches, one frame at most every FRAME_MS, and the drawings (rebuilt whole) at most every DRAW_MS.
const FRAME_MS = 100;
const DRAW_MS = 250;
let lastFrame = 0;
let lastDraw = 0;
let waiting = 0;

function receive(m) {
  // When the lane's time `t_ms` was, on the page's clock: for the scale of a lane still running (`LaneView.extent`).
  if (!paused && m.design && typeof m.t_ms === 'number') lanes.get(m.design)?.heard(m.t_ms, performance.now());
  const key = m.type === 'response' ? `response ${m.design} ${m.record.response_id}` : m.type === 'progress' ? `progress ${m.design}` : null;
  const at = key === null ? undefined : heldAt.get(key);
  if (at !== undefined) held[at] = m;
  else {
    if (key !== null) heldAt.set(key, held.length);
    held.push(m);
  }
  // What a paused page holds (for its test); not written per message while the page runs, which changes the DOM in batches.
  if (paused) pauseBtn.dataset.held = String(held.length);
  if (!paused) schedule();
}

function apply(m) {
  const lane = m.design ? lanes.get(m.design) : null;
  // A wire row changes its lane's log only: the drawings wait for a message that changes them.
  if (m.type !== 'wire') stale = true;
  switch (m.type) {
    case 'race':
      if (race) race.id = m.race_id;
      lastInfo = m;
      // The designs this race runs: a page loaded before the server restarted with other flags (--no-websockets, or
      // without it) showed the lanes of the old configuration, and the other lanes' messages went nowhere.
      if (m.designs.map((d) => d.id).join() !== [...lanes.keys()].join()) buildLanes(m.designs);
      note.textContent = `Racing ${m.workload.label} at ${m.speed === 'instant' ? 'instant speed' : `${m.speed} tokens/s`}, tool time ${m.tool_time}, lanes ${m.order === 'together' ? 'at the same time' : 'one after another'}. ${m.workload.tools_note}`;
      for (const d of m.designs) lanes.get(d.id)?.el.setAttribute('data-model', d.model);
      break;
    case 'lane.state':
      // Drawn at once, so a lane reads "done" only with its final figures on screen.
      if (lane) {
        draw();
        lane.setState(m.state, m.error);
      }
      break;
    case 'wire':
      lane?.onWire(m, !paused);
      break;
    case 'response':
      lane?.onResponse(m);
      break;
    case 'progress':
      if (lane) lane.bytesSent = m.bytes_sent;
      break;
    case 'gate':
      lane?.gates.push(m);
      break;
    case 'step': {
      // "Next" once every running lane waits, with their counts on screen.
      const running = [...lanes.values()].filter((l) => l.el.dataset.state === 'running').length;
      draw();
      stepBtn.disabled = !(race && race.step && m.waiting.length > 0 && m.waiting.length >= running);
      break;
    }
    case 'lane.done':
      if (lane) {
        lane.done = m;
        lane.bytesSent = m.bytes_sent;
      }
      break;
    case 'race.done':
      explain(m.status);
      break;
    // The page's own: the stream ended without race.done.
    case 'race.lost':
      draw();
      for (const l of lanes.values()) if (l.el.dataset.state !== 'done' && l.el.dataset.state !== 'failed') l.setState('failed', m.reason);
      explain(m.reason === 'stopped' ? 'stopped' : 'failed');
      break;
    default:
      break;
  }
}

function schedule() {
  if (frame || waiting) return;
  const wait = lastFrame + FRAME_MS - performance.now();
  if (wait > 0) {
    waiting = setTimeout(() => {
      waiting = 0;
      schedule();
    }, wait);
    return;
  }
  frame = requestAnimationFrame(() => {
    frame = 0;
    lastFrame = performance.now();
    if (!paused) {
      const queued = held;
      held = [];
      heldAt = new Map();
      pauseBtn.dataset.held = '0';
      for (const m of queued) apply(m);
    }
    if (stale && lastFrame - lastDraw >= DRAW_MS) draw();
    else if (stale) schedule();
    for (const l of lanes.values()) l.followWire();
  });
}

function draw() {
  stale = false;
  lastDraw = performance.now();
  const all = [...lanes.values()];
  const live = !(race && race.step);
  const scale = Math.max(1, ...all.map((l) => l.extent(live)));
  const perCall = all.map((l) => l.perCallWork());
  const maxCalls = Math.max(1, ...perCall.map((c) => c.length));
  const maxCallMs = Math.max(0.001, ...perCall.flat().map(apiTotal));
  const http = lanes.get('http')?.done ?? null;
  for (const l of all) {
    l.draw(scale, maxCalls, maxCallMs);
    l.showResult(http);
  }
}

function explain(status) {
  const p = summary.querySelector('[data-field="explanation"]');
  const done = [...lanes.values()].filter((l) => l.done);
  if (status !== 'done' || done.length === 0) {
    p.textContent = status === 'stopped' ? 'The race was stopped before every lane finished.' : 'At least one lane failed; its state says why.';
    summary.hidden = false;
    return;
  }
  // The long-lived Response over its WebSocket, or over HTTP where it is the only one (a server without WebSockets).
  const socketLl = lanes.get('long-lived');
  const httpLl = lanes.get('long-lived-http');
  const ll = socketLl?.done ? socketLl : httpLl;
  const llName = ll === httpLl ? 'the long-lived Response over HTTP' : 'the long-lived Response';
  const http = lanes.get('http');
  const ws = lanes.get('ws');
  const info = lastInfo;
  const parts = [];
  if (ll?.done && http?.done) {
    const diff = http.done.e2e_ms - ll.done.e2e_ms;
    const others = [
      ...(ws?.done ? [`${fmt(ws.done.e2e_ms, 0)} ms in WebSocket mode`] : []),
      ...(ll !== httpLl && httpLl?.done ? [`${fmt(httpLl.done.e2e_ms, 0)} ms through the long-lived Response over HTTP`] : []),
    ];
    parts.push(
      `The same run took ${fmt(ll.done.e2e_ms, 0)} ms through ${llName} and ${fmt(http.done.e2e_ms, 0)} ms over HTTP (${llName} took ${diff >= 0 ? `${fmt(diff, 0)} ms less` : `${fmt(-diff, 0)} ms more`})${others.length ? `, and ${others.join(' and ')}` : ''}.`,
    );
    const t = (l) => l.totals();
    parts.push(
      `Over HTTP nothing survives between model calls, so for each of its ${fmt(t(http).model_calls)} calls the client sent the whole conversation again (${fmt(http.done.bytes_sent)} bytes in all) and the server validated and tokenised it from the start: ${fmt(t(http).tokens_tokenized)} tokens tokenised and ${fmt(t(http).items_validated)} items validated.`,
    );
    parts.push(
      `${llName[0].toUpperCase()}${llName.slice(1)} stayed open: at each tool call it paused, the client appended only the tool outputs (${fmt(ll.done.bytes_sent)} bytes in all), and the server checked and tokenised only what was new (${fmt(t(ll).tokens_tokenized)} tokens, ${fmt(t(ll).items_validated)} items), in ${ll.responses.size === 1 ? 'one response' : `${fmt(ll.responses.size)} responses (one per user turn)`} instead of ${fmt(http.responses.size)}.`,
    );
    if (ws?.done) parts.push(`WebSocket mode keeps the previous response on the connection, so it re-tokenises little (${fmt(t(ws).tokens_tokenized)} tokens) but still starts, routes and books a new response for every call (${fmt(ws.responses.size)} of them).`);
    const share = http.done.e2e_ms > 0 ? (http.done.api_overhead_ms / http.done.e2e_ms) * 100 : 0;
    parts.push(`The slower the model, the smaller this share: here the API overhead was ${fmt(share, 0)} % of the HTTP lane's time.`);
    if (info?.order === 'together' && info?.speed === 'instant') parts.push('With the instant model and the lanes at the same time, every lane competes for this one server process, so wall times include waiting for the other lanes; the API-stage figures are each lane’s own.');
    else if (info?.order === 'together') parts.push('With the lanes at the same time, every lane shares this one server process, so wall times include waiting for the other lanes, which can turn a difference of a few percent either way; the API-stage figures are each lane’s own. Run the lanes one after another to compare wall times.');
  }
  p.textContent = parts.join(' ');
  summary.hidden = false;
}

pauseBtn.addEventListener('click', () => {
  paused = !paused;
  pauseBtn.setAttribute('aria-pressed', String(paused));
  pauseBtn.textContent = paused ? 'Resume animation' : 'Pause animation';
  if (!paused) schedule();
});

// Closing the stream stops the race on the server.
stopBtn.addEventListener('click', () => {
  if (race) race.stopped = true;
  race?.controller.abort();
  for (const lane of lanes.values()) if (lane.el.dataset.state === 'running') lane.setState('failed', 'stopped');
  explain('stopped');
});

stepBtn.addEventListener('click', async () => {
  if (!race?.id) return;
  const current = race;
  stepBtn.disabled = true;
  try {
    const res = await fetch(`/demo/api/races/${current.id}/step`, { method: 'POST', headers: authHeaders() });
    if (!res.ok) showError(await errorText(res));
  } catch (err) {
    // The step never reached the server (the lanes still wait for it): said, and Next can be pressed again. It was an
    // unhandled rejection, the button left disabled with every lane waiting until the race's deadline.
    showError(`The step did not reach the server: ${err.message}`);
    if (race === current) stepBtn.disabled = false;
  }
});

// Step mode steps all lanes together, so it runs them at the same time.
// Lanes at the same time share one process, so each lane's wall time includes waiting for the others: with the short
// synthetic run at 1,000 tokens/s (the page's default) HTTP came out ahead of the long-lived Response in every race
// (1-10 %) and last when the lanes ran one after another (outside attack atk106 F1). One after another, then, unless in
// step mode, or for the bundled Codex run at 65 tokens/s, which would pass the race limit so.
// (A Codex-format file given with --demo-workload alike; and with its tools as recorded, whose times one after another
// came within 10 s of the 600 s default at 1,000 tokens/s: outside attack atk108 I3, I5.)
function suggestOrder() {
  const f = form.elements;
  const long = f.workload.value === 'codex' && (f.speed.value === '65' || f.tool_time.value === 'recorded');
  f.order.value = f.step.checked || long ? 'together' : 'one-by-one';
  f.order.querySelector('option[value="one-by-one"]').disabled = f.step.checked;
}
form.elements.speed.addEventListener('change', suggestOrder);
form.elements.step.addEventListener('change', suggestOrder);
form.elements.workload.addEventListener('change', suggestOrder);
form.elements.tool_time.addEventListener('change', suggestOrder);
suggestOrder();

form.addEventListener('submit', startRace);
form.elements.workload.addEventListener('change', describeWorkload);
// The buttons work from here on. The page comes with them disabled and a note that this script has not loaded (shown
// after a few seconds by the stylesheet): refused (past --max-connections, the browser fetching the page's files on
// parallel connections), the page showed a working-looking form whose Start did nothing (outside attack atk89 F4).
raceBtn.disabled = false;
pauseBtn.disabled = false;
$('#script-missing')?.remove();
buildLegend();
/** The configuration could not be fetched (the server unreachable): said, and Start tries again. */
function configFailed(err) {
  showError(`Cannot load the demo configuration: ${err.message}`);
  return false;
}

loadConfig().catch(configFailed);
