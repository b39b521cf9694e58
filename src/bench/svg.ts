/**
 * Hand-written SVG charts for the bench report: grouped bars with min–max
 * whiskers, lines, and stacked bars. Plain strings, no chart library; every
 * label is XML-escaped. Deterministic for the same input, so the report can
 * be tested and diffed.
 *
 * Used by report.ts. Leaves out interactivity, log scales and legends that
 * wrap: the charts are small and the tables beside them carry the numbers.
 */

export const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A "nice" axis maximum and tick step for values up to `max`. */
export function niceScale(max: number, ticks = 5): { max: number; step: number } {
  if (!(max > 0) || !Number.isFinite(max)) return { max: 1, step: 0.2 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  return { max: Math.ceil(max / step) * step, step };
}

function fmtTick(v: number): string {
  if (v === 0) return '0';
  if (Math.abs(v) >= 10_000) return `${(v / 1000).toFixed(0)}k`;
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(1)}k`;
  if (Math.abs(v) >= 10) return v.toFixed(0);
  return Number(v.toFixed(2)).toString();
}

interface Frame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

const FRAME: Frame = { width: 720, height: 360, left: 64, right: 170, top: 40, bottom: 56 };

function open(title: string, f: Frame): string {
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${f.width}" height="${f.height}" viewBox="0 0 ${f.width} ${f.height}" font-family="system-ui, sans-serif" font-size="12">` +
    `<rect width="100%" height="100%" fill="#fff"/>` +
    `<text x="${f.left}" y="22" font-size="14" font-weight="600">${esc(title)}</text>`
  );
}

function yAxis(f: Frame, scale: { max: number; step: number }, label: string): string {
  const plotH = f.height - f.top - f.bottom;
  let out = '';
  for (let v = 0; v <= scale.max + scale.step / 1000; v += scale.step) {
    const y = f.top + plotH - (v / scale.max) * plotH;
    out += `<line x1="${f.left}" x2="${f.width - f.right}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="#e5e5e5"/>`;
    out += `<text x="${f.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#555">${fmtTick(v)}</text>`;
  }
  const cy = f.top + plotH / 2;
  out += `<text transform="translate(14 ${cy.toFixed(1)}) rotate(-90)" text-anchor="middle" fill="#333">${esc(label)}</text>`;
  out += `<line x1="${f.left}" x2="${f.left}" y1="${f.top}" y2="${f.top + plotH}" stroke="#888"/>`;
  return out;
}

function legend(f: Frame, names: readonly string[]): string {
  return names
    .map((n, i) => {
      const y = f.top + 8 + i * 18;
      const x = f.width - f.right + 14;
      return `<rect x="${x}" y="${y - 9}" width="12" height="12" fill="${PALETTE[i % PALETTE.length]}"/><text x="${x + 18}" y="${y + 1}">${esc(n)}</text>`;
    })
    .join('');
}

export interface BarGroup {
  label: string;
  /** One per series, in series order; null leaves a gap. */
  values: Array<{ value: number; min?: number; max?: number } | null>;
}

/** Grouped bars (one group per x label, one bar per series) with optional min–max whiskers. */
export function groupedBarChart(opts: { title: string; yLabel: string; series: readonly string[]; groups: readonly BarGroup[] }): string {
  const f = FRAME;
  const all = opts.groups.flatMap((g) => g.values.flatMap((v) => (v ? [v.max ?? v.value, v.value] : [])));
  const scale = niceScale(Math.max(0, ...all));
  const plotW = f.width - f.left - f.right;
  const plotH = f.height - f.top - f.bottom;
  const groupW = plotW / Math.max(1, opts.groups.length);
  const barW = (groupW * 0.8) / Math.max(1, opts.series.length);
  const y = (v: number) => f.top + plotH - (v / scale.max) * plotH;
  let out = open(opts.title, f) + yAxis(f, scale, opts.yLabel);
  opts.groups.forEach((g, gi) => {
    const gx = f.left + gi * groupW + groupW * 0.1;
    g.values.forEach((v, si) => {
      if (!v) return;
      const x = gx + si * barW;
      const top = y(v.value);
      out += `<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(f.top + plotH - top).toFixed(1)}" fill="${PALETTE[si % PALETTE.length]}"><title>${esc(`${opts.series[si]} · ${g.label}: ${fmtTick(v.value)}`)}</title></rect>`;
      if (v.min !== undefined && v.max !== undefined) {
        const cx = x + (barW - 2) / 2;
        out += `<line x1="${cx.toFixed(1)}" x2="${cx.toFixed(1)}" y1="${y(v.min).toFixed(1)}" y2="${y(v.max).toFixed(1)}" stroke="#222"/>`;
        out += `<line x1="${(cx - 3).toFixed(1)}" x2="${(cx + 3).toFixed(1)}" y1="${y(v.max).toFixed(1)}" y2="${y(v.max).toFixed(1)}" stroke="#222"/>`;
        out += `<line x1="${(cx - 3).toFixed(1)}" x2="${(cx + 3).toFixed(1)}" y1="${y(v.min).toFixed(1)}" y2="${y(v.min).toFixed(1)}" stroke="#222"/>`;
      }
    });
    out += `<text x="${(f.left + gi * groupW + groupW / 2).toFixed(1)}" y="${f.height - f.bottom + 18}" text-anchor="middle">${esc(g.label)}</text>`;
  });
  out += `<line x1="${f.left}" x2="${f.width - f.right}" y1="${f.top + plotH}" y2="${f.top + plotH}" stroke="#888"/>`;
  return `${out}${legend(f, opts.series)}</svg>\n`;
}

export interface LineSeries {
  name: string;
  points: ReadonlyArray<readonly [number, number]>;
}

/** Lines over a numeric x axis (e.g. model call index). */
export function lineChart(opts: { title: string; xLabel: string; yLabel: string; series: readonly LineSeries[] }): string {
  const f = FRAME;
  const xs = opts.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = opts.series.flatMap((s) => s.points.map((p) => p[1]));
  const scale = niceScale(Math.max(0, ...ys));
  const xMin = xs.length ? Math.min(...xs) : 0;
  const xMax = xs.length ? Math.max(...xs) : 1;
  const plotW = f.width - f.left - f.right;
  const plotH = f.height - f.top - f.bottom;
  const x = (v: number) => f.left + (xMax === xMin ? plotW / 2 : ((v - xMin) / (xMax - xMin)) * plotW);
  const y = (v: number) => f.top + plotH - (Math.max(0, v) / scale.max) * plotH;
  let out = open(opts.title, f) + yAxis(f, scale, opts.yLabel);
  const xs5 = niceScale(xMax - xMin || 1, 6);
  for (let v = 0; xMin + v <= xMax; v += xs5.step) {
    out += `<text x="${x(xMin + v).toFixed(1)}" y="${f.top + plotH + 16}" text-anchor="middle" fill="#555">${fmtTick(xMin + v)}</text>`;
  }
  out += `<line x1="${f.left}" x2="${f.width - f.right}" y1="${f.top + plotH}" y2="${f.top + plotH}" stroke="#888"/>`;
  out += `<text x="${(f.left + plotW / 2).toFixed(1)}" y="${f.height - 12}" text-anchor="middle" fill="#333">${esc(opts.xLabel)}</text>`;
  opts.series.forEach((s, si) => {
    if (s.points.length === 0) return;
    const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)} ${y(p[1]).toFixed(1)}`).join(' ');
    out += `<path d="${d}" fill="none" stroke="${PALETTE[si % PALETTE.length]}" stroke-width="1.8"/>`;
  });
  return `${out}${legend(f, opts.series.map((s) => s.name))}</svg>\n`;
}

export interface StackedBar {
  label: string;
  /** By segment name; missing or non-positive segments are skipped. */
  segments: Record<string, number>;
}

/** One stacked bar per label, segments in `segmentNames` order from the bottom. */
export function stackedBarChart(opts: { title: string; yLabel: string; segmentNames: readonly string[]; bars: readonly StackedBar[] }): string {
  const f = { ...FRAME, right: 230 };
  const totals = opts.bars.map((b) => opts.segmentNames.reduce((n, s) => n + Math.max(0, b.segments[s] ?? 0), 0));
  const scale = niceScale(Math.max(0, ...totals));
  const plotW = f.width - f.left - f.right;
  const plotH = f.height - f.top - f.bottom;
  const slot = plotW / Math.max(1, opts.bars.length);
  const barW = slot * 0.6;
  let out = open(opts.title, f) + yAxis(f, scale, opts.yLabel);
  opts.bars.forEach((b, bi) => {
    const x = f.left + bi * slot + (slot - barW) / 2;
    let acc = 0;
    opts.segmentNames.forEach((name, si) => {
      const v = Math.max(0, b.segments[name] ?? 0);
      if (v <= 0) return;
      const y0 = f.top + plotH - ((acc + v) / scale.max) * plotH;
      const h = (v / scale.max) * plotH;
      out += `<rect x="${x.toFixed(1)}" y="${y0.toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${PALETTE[si % PALETTE.length]}"><title>${esc(`${b.label} · ${name}: ${fmtTick(v)}`)}</title></rect>`;
      acc += v;
    });
    out += `<text x="${(x + barW / 2).toFixed(1)}" y="${f.height - f.bottom + 18}" text-anchor="middle">${esc(b.label)}</text>`;
  });
  out += `<line x1="${f.left}" x2="${f.width - f.right}" y1="${f.top + plotH}" y2="${f.top + plotH}" stroke="#888"/>`;
  return `${out}${legend(f, opts.segmentNames)}</svg>\n`;
}
