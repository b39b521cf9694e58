// One lane of the page per design: its state, counters, timeline, API work
// per model call, wire log and result. It only shows what the server sent:
// records (`response`), wire events the client saw (`wire`), the client's
// byte counts (`progress`) and the lane's figures (`lane.done`).

import { apiPerCall, compressor, drawPerCall, drawTimeline, laneSegments } from './timeline.js';

const SVG = 'http://www.w3.org/2000/svg';
/** Wire entries kept in the page per lane (the server sends at most 2,000). */
const MAX_WIRE_ROWS = 2000;

// Small counts first (three to a row), the large ones below (two to a row).
const COUNTERS = [
  { field: 'model-calls', label: 'model calls' },
  { field: 'responses', label: 'responses created' },
  { field: 'items-validated', label: 'items validated' },
  { field: 'tokens-tokenized', label: 'tokens tokenised' },
  { field: 'bytes-sent', label: 'bytes sent by the client' },
];

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

export const fmt = (n, digits = 0) => Number(n).toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });

export class LaneView {
  constructor(design) {
    this.design = design;
    const id = `lane-${design.id}`;
    this.state = h('span', { class: 'state', 'data-field': 'state', text: 'idle' });
    this.e2e = h('span', { 'data-field': 'e2e-ms', text: '—' });
    this.timeline = document.createElementNS(SVG, 'svg');
    this.timeline.setAttribute('viewBox', '0 0 1000 42');
    this.timeline.setAttribute('preserveAspectRatio', 'none');
    this.timeline.setAttribute('class', 'timeline');
    this.timeline.setAttribute('role', 'img');
    this.perCall = document.createElementNS(SVG, 'svg');
    this.perCall.setAttribute('viewBox', '0 0 1000 100');
    this.perCall.setAttribute('preserveAspectRatio', 'none');
    this.perCall.setAttribute('class', 'percall');
    this.perCall.setAttribute('role', 'img');
    this.counterEls = {};
    const dl = h('dl', { class: 'counters' });
    for (const c of COUNTERS) {
      const dd = h('dd', { 'data-field': c.field, text: '0' });
      this.counterEls[c.field] = dd;
      dl.append(h('div', {}, h('dt', { text: c.label }), dd));
    }
    this.wire = h('ol', { class: 'wire', tabindex: '0', 'aria-label': `${design.label}: wire events` });
    this.result = h('div', { class: 'result', 'data-field': 'result' });
    this.el = h(
      'article',
      { class: 'lane', 'data-design': design.id, 'data-state': 'idle', 'aria-labelledby': `${id}-title` },
      h('header', { class: 'lane-head' }, h('h2', { id: `${id}-title`, text: design.label }), this.state),
      h('p', { class: 'keeps', text: design.keeps }),
      h('p', { class: 'e2e' }, h('span', { class: 'e2e-label', text: 'End to end ' }), this.e2e, ' ms'),
      h('p', { class: 'chart-label', text: 'Timeline (same scale in every lane): model and tools above, API stages below' }),
      this.timeline,
      dl,
      h('p', { class: 'chart-label', text: 'API work per model call (same scale in every lane)' }),
      this.perCall,
      h('p', { class: 'chart-label', text: `Wire, as the client saw it (→ sent, ← received; continues with ${design.continues_with})` }),
      this.wire,
      this.result,
    );
    this.reset();
  }

  reset() {
    this.responses = new Map();
    /** Page time less lane time, from the latest message heard live (`heard`); null before any. */
    this.offset = null;
    /** The lane's time so far, as last seen while it ran (`extent`): kept once it has stopped running. */
    this.elapsed = 0;
    this.gates = [];
    this.bytesSent = 0;
    this.done = null;
    this.wireRows = 0;
    this.following = false;
    this.setState('idle');
    this.e2e.textContent = '—';
    this.wire.replaceChildren();
    this.result.replaceChildren();
    this.timeline.replaceChildren();
    this.perCall.replaceChildren();
    this.timeline.setAttribute('aria-label', `${this.design.label}: no run yet`);
    this.perCall.setAttribute('aria-label', `${this.design.label}: no run yet`);
    for (const el of Object.values(this.counterEls)) el.textContent = '0';
  }

  setState(state, error) {
    this.el.dataset.state = state;
    this.state.textContent = error ? `${state}: ${error}` : state;
  }

  onResponse(m) {
    this.responses.set(m.record.response_id, { sent_at_ms: m.sent_at_ms, record: m.record });
  }

  onWire(m, follow) {
    if (this.wireRows >= MAX_WIRE_ROWS) return;
    this.wireRows++;
    const arrow = m.dir === 'out' ? '→' : '←';
    // With the step-mode waits cut out, as the timelines and the times are: the rows were stamped on the lane's clock,
    // waits included, 11,568 ms beside an end to end of 1,502 ms (outside attack atk106 F5).
    if (this.squeezed?.list !== this.gates || this.squeezed.gates !== this.gates.length) this.squeezed = { list: this.gates, gates: this.gates.length, at: compressor(this.gates) };
    const li = h(
      'li',
      { class: `wire-${m.dir}` },
      h('span', { class: 'wire-t', text: `${fmt(this.squeezed.at(m.t_ms), 1)} ms` }),
      h('span', { class: 'wire-dir', 'aria-label': m.dir === 'out' ? 'sent' : 'received', text: arrow }),
      h('span', { class: 'wire-event', text: m.event }),
      h('span', { class: 'wire-detail', text: m.detail }),
    );
    this.wire.append(li);
    // Followed once per frame (followWire): reading scrollHeight here laid the whole page out for every row.
    if (follow) this.following = true;
  }

  /** Scroll the wire log to its newest row if rows came since the last frame. */
  followWire() {
    if (!this.following) return;
    this.following = false;
    this.wire.scrollTop = this.wire.scrollHeight;
  }

  /** The lane's responses in creation order (the order the client saw them created). */
  ordered() {
    return [...this.responses.values()].sort((a, b) => a.sent_at_ms - b.sent_at_ms);
  }

  totals() {
    const t = { model_calls: 0, tokens_tokenized: 0, items_validated: 0 };
    for (const r of this.responses.values()) for (const k of Object.keys(t)) t[k] += r.record.counters[k] ?? 0;
    return t;
  }

  /** A message stamped `t` (lane time) arrived live at page time `at`. */
  heard(t, at) {
    this.offset = at - t;
  }

  /**
   * The time the shared scale must hold for this lane: the latest time it has drawn anything at, or, while it runs,
   * its time so far (`live`: not in step mode, whose waits are left out of the drawing). A model call's spans come
   * only when it ends, so a scale fitted to what was drawn made the first call's few milliseconds of API stages fill
   * the timeline while the model had decoded for seconds (outside attack atk50 F3).
   */
  extent(live = true) {
    let end = 0;
    for (const s of laneSegments(this.ordered())) end = Math.max(end, s.end);
    if (this.done) {
      // Ended: its own end to end (with the step-mode waits, cut below), not the time the page saw it running, which
      // takes in the page's batching and the server's post-inference wait: the instant model's 22 ms lanes were drawn
      // in the first fifth of a scale held at the page's ~150 ms (outside attack atk89 F2, seen in a screenshot).
      end = Math.max(end, this.done.e2e_ms + this.done.gate_ms);
    } else {
      if (live && this.offset !== null && this.el.dataset.state === 'running') this.elapsed = Math.max(this.elapsed, performance.now() - this.offset);
      end = Math.max(end, this.elapsed);
    }
    const cut = this.gates.reduce((n, g) => n + (g.to_ms - g.from_ms), 0);
    return Math.max(0, end - cut);
  }

  perCallWork() {
    return apiPerCall(this.ordered());
  }

  draw(scaleMs, maxCalls, maxCallMs) {
    const t = this.totals();
    this.counterEls['model-calls'].textContent = fmt(t.model_calls);
    this.counterEls['tokens-tokenized'].textContent = fmt(t.tokens_tokenized);
    this.counterEls['items-validated'].textContent = fmt(t.items_validated);
    this.counterEls['bytes-sent'].textContent = fmt(this.bytesSent);
    this.counterEls['responses'].textContent = fmt(this.responses.size);
    const segs = laneSegments(this.ordered());
    drawTimeline(this.timeline, segs, this.gates, scaleMs);
    this.timeline.setAttribute('aria-label', `${this.design.label}: ${t.model_calls} model calls drawn over ${fmt(this.extent())} ms`);
    const calls = this.perCallWork();
    drawPerCall(this.perCall, calls, maxCalls, maxCallMs);
    this.perCall.setAttribute('aria-label', `${this.design.label}: API work per model call, ${calls.length} calls`);
  }

  showResult(http) {
    const d = this.done;
    if (!d) return;
    this.e2e.textContent = fmt(d.e2e_ms, 1);
    const stages = Object.values(d.stage_ms).reduce((n, v) => n + v, 0);
    const rows = [
      ['model (TTFT + decode)', `${fmt(d.model_ms, 1)} ms`],
      ['tools', `${fmt(d.tool_ms, 1)} ms`],
      ['API overhead (end to end − model − tools)', `${fmt(d.api_overhead_ms, 1)} ms`],
      ['of which the server’s own API stages', `${fmt(stages, 1)} ms`],
    ];
    if (http && http !== d) {
      const diff = d.e2e_ms - http.e2e_ms;
      const stageDiff = stages - Object.values(http.stage_ms).reduce((n, v) => n + v, 0);
      rows.push(['end to end vs HTTP', `${diff <= 0 ? '−' : '+'}${fmt(Math.abs(diff), 1)} ms (${fmt((Math.abs(diff) / http.e2e_ms) * 100, 0)} % ${diff <= 0 ? 'faster' : 'slower'})`]);
      rows.push(['API stages vs HTTP', `${stageDiff <= 0 ? '−' : '+'}${fmt(Math.abs(stageDiff), 1)} ms`]);
    }
    if (d.gate_ms > 0) rows.push(['waiting for “next” (left out)', `${fmt(d.gate_ms, 0)} ms`]);
    const dl = h('dl', {});
    for (const [k, v] of rows) dl.append(h('div', {}, h('dt', { text: k }), h('dd', { text: v })));
    this.result.replaceChildren(dl);
  }
}
