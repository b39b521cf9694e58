// The demo's drawings: a lane's timeline at true scale and its API work per
// model call, as SVG built from the server's run records (spans relative to
// each response's start, placed at the time the client sent its request).
// Colours are the Okabe–Ito palette; the model and tool bars also carry
// patterns, and every category is named in the legend and in each shape's
// tooltip, so nothing depends on telling colours apart.

const SVG = 'http://www.w3.org/2000/svg';

/** Display categories, in legend order. */
export const CATEGORIES = [
  { id: 'ttft', label: 'time to first token', fill: 'url(#pat-ttft)', swatch: 'swatch-ttft' },
  { id: 'decode', label: 'decode', fill: '#56B4E9', swatch: 'swatch-decode' },
  { id: 'tool', label: 'tool / paused', fill: 'url(#pat-tool)', swatch: 'swatch-tool' },
  { id: 'validate', label: 'parse / validate', fill: '#009E73', swatch: 'swatch-validate' },
  { id: 'render', label: 'render (tokenise)', fill: '#D55E00', swatch: 'swatch-render' },
  { id: 'safety', label: 'safety', fill: '#CC79A7', swatch: 'swatch-safety' },
  { id: 'route', label: 'route / load state', fill: '#0072B2', swatch: 'swatch-route' },
  { id: 'billing', label: 'usage / billing / log', fill: '#F0E442', swatch: 'swatch-billing' },
  { id: 'persist', label: 'persist', fill: '#000000', swatch: 'swatch-persist' },
];
export const API_CATEGORIES = ['validate', 'render', 'safety', 'route', 'billing', 'persist'];

/** A category's name as the legend says it. */
function categoryLabel(id) {
  return CATEGORIES.find((c) => c.id === id)?.label ?? id;
}

const STAGE_CATEGORY = {
  prefill: 'ttft',
  decode: 'decode',
  paused: 'tool',
  parse: 'validate',
  parse_append: 'validate',
  validate: 'validate',
  validate_append: 'validate',
  render: 'render',
  render_append: 'render',
  safety: 'safety',
  safety_append: 'safety',
  route: 'route',
  hop: 'route',
  load_state: 'route',
  auth: 'route',
  usage: 'billing',
  billing: 'billing',
  log: 'billing',
  persist: 'persist',
};

export function categoryOf(stage) {
  return STAGE_CATEGORY[stage] ?? 'route';
}

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

/** The shared pattern definitions, once per page (referenced by id from every SVG). */
export function patternDefs() {
  const svg = el('svg', { width: 0, height: 0, 'aria-hidden': 'true', class: 'defs' });
  const defs = el('defs', {}, svg);
  const ttft = el('pattern', { id: 'pat-ttft', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' }, defs);
  el('rect', { width: 6, height: 6, fill: '#E69F00' }, ttft);
  el('rect', { width: 2, height: 6, fill: '#ffffff', opacity: 0.6 }, ttft);
  const tool = el('pattern', { id: 'pat-tool', width: 6, height: 6, patternUnits: 'userSpaceOnUse' }, defs);
  el('rect', { width: 6, height: 6, fill: '#dddddd' }, tool);
  el('path', { d: 'M0 6 L6 0 M0 0 L6 6', stroke: '#777777', 'stroke-width': 1 }, tool);
  return svg;
}

/** A legend swatch as a tiny SVG, so the pattern is the same as in the drawings. */
export function swatch(cat) {
  const svg = el('svg', { width: 18, height: 12, 'aria-hidden': 'true', class: 'swatch' });
  el('rect', { x: 0.5, y: 0.5, width: 17, height: 11, fill: cat.fill, stroke: '#333', 'stroke-width': 1 }, svg);
  return svg;
}

/**
 * Map lane time to display time with the step-gate waits cut out:
 * a presenter's pause is nobody's cost.
 */
export function compressor(gates) {
  const sorted = [...gates].sort((a, b) => a.from_ms - b.from_ms);
  return (t) => {
    let cut = 0;
    for (const g of sorted) {
      if (t >= g.to_ms) cut += g.to_ms - g.from_ms;
      else if (t > g.from_ms) cut += t - g.from_ms;
    }
    return t - cut;
  };
}

/**
 * Lane segments at lane time: every recorded span at its response's send time
 * plus the span's start, and (designs whose responses end at a tool call) the
 * client's time between one response's end and the next request.
 */
export function laneSegments(responses) {
  const segs = [];
  let prevEnd = null;
  for (const r of responses) {
    let end = r.sent_at_ms;
    for (const s of r.record.spans) {
      const start = r.sent_at_ms + s.start_ms;
      segs.push({ cat: categoryOf(s.stage), stage: s.stage, start, end: start + s.duration_ms });
      if (s.stage !== 'paused') end = Math.max(end, start + s.duration_ms);
    }
    if (prevEnd !== null && r.sent_at_ms > prevEnd) segs.push({ cat: 'tool', stage: 'client: tools, then the next request', start: prevEnd, end: r.sent_at_ms });
    prevEnd = end;
  }
  return segs;
}

/** The lane's timeline: model and tools on the top row, the API's stages below, one time scale for every lane. */
export function drawTimeline(svg, segs, gates, scaleMs) {
  svg.replaceChildren();
  const W = 1000;
  const squeeze = compressor(gates);
  const x = (t) => (Math.max(0, squeeze(t)) / scaleMs) * W;
  for (const s of segs) {
    const api = API_CATEGORIES.includes(s.cat);
    const x0 = x(s.start);
    // True scale; a stage shorter than a pixel still gets one, so it can be seen to exist.
    const w = Math.max(api ? 1.5 : 0, x(s.end) - x0);
    if (w <= 0) continue;
    const rect = el('rect', { x: x0, y: api ? 22 : 2, width: w, height: 18, fill: CATEGORIES.find((c) => c.id === s.cat).fill }, svg);
    // A request's parse and auth come before its response starts: drawn, and said, from the lane's start at the earliest.
    // Named as the legend names its colour, the server's own stage after it (the stage alone, `prefill`, `parse_append`,
    // left the reader to map it to "time to first token", "parse / validate"; outside attack atk89 F8).
    el('title', {}, rect).textContent = `${categoryLabel(s.cat)} (${s.stage}): ${(s.end - s.start).toFixed(2)} ms at ${Math.max(0, squeeze(s.start)).toFixed(1)} ms`;
  }
}

/**
 * Each model call's API work, stacked by stage. The spans of a response
 * before a prefill belong to that call, those after its last decode to its
 * last call (the same attribution as `llr bench`).
 */
export function apiPerCall(responses) {
  const calls = [];
  for (const r of responses) {
    const spans = [...r.record.spans].sort((a, b) => a.start_ms - b.start_ms);
    let pending = {};
    let mine = 0;
    for (const s of spans) {
      const cat = categoryOf(s.stage);
      if (s.stage === 'prefill') {
        calls.push(pending);
        pending = {};
        mine++;
      } else if (API_CATEGORIES.includes(cat)) {
        pending[cat] = (pending[cat] ?? 0) + s.duration_ms;
      }
    }
    if (mine > 0) {
      const last = calls[calls.length - 1];
      for (const [k, v] of Object.entries(pending)) last[k] = (last[k] ?? 0) + v;
    } else if (Object.keys(pending).length > 0) {
      calls.push(pending);
    }
  }
  return calls;
}

export function drawPerCall(svg, calls, maxCalls, maxMs) {
  svg.replaceChildren();
  const W = 1000;
  const H = 100;
  const slot = W / Math.max(1, maxCalls);
  calls.forEach((c, i) => {
    let y = H;
    for (const cat of API_CATEGORIES) {
      const v = c[cat] ?? 0;
      if (v <= 0) continue;
      const h = (v / maxMs) * H;
      y -= h;
      const rect = el('rect', { x: i * slot + slot * 0.1, y, width: Math.max(1, slot * 0.8), height: Math.max(0.5, h), fill: CATEGORIES.find((k) => k.id === cat).fill }, svg);
      el('title', {}, rect).textContent = `model call ${i + 1}: ${categoryLabel(cat)} ${v.toFixed(2)} ms`;
    }
  });
}

export function apiTotal(call) {
  return API_CATEGORIES.reduce((n, c) => n + (call[c] ?? 0), 0);
}
