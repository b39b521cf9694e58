/**
 * Named cost profiles for `llr bench --profile NAME`: which remote hops a
 * deployment pays around inference, how many, how long each, and where each
 * number comes from. The server simulates two kinds (see
 * src/pipeline/route.ts): hops on the path to the model, paid by every
 * routed request (`--hop-ms`, `--hops`; a cached ws continuation skips one,
 * a long-lived continuation pays none), and remote calls before every model
 * call that no design skips (`--call-hop-ms`, `--call-hops`). A hop the
 * server cannot place yet is listed with count 0 and the reason, so the
 * profile says what it leaves out.
 *
 * Pure data; the runner turns a profile into `llr serve` flags.
 */
import { ownValue } from '../protocol/fields.js';
import { quoted } from '../terminal-text.js';

export interface HopSpec {
  name: string;
  /** `route`: on the path to the model, per routed request; `call`: before every model call, every design; `none`: not simulated. */
  kind: 'route' | 'call' | 'none';
  count: number;
  latencyMs: number;
  /** Where the number comes from, or that it is an assumption. */
  source: string;
}

export interface CostProfile {
  name: string;
  description: string;
  hops: HopSpec[];
}

export const PROFILES: Record<string, CostProfile> = {
  loopback: {
    name: 'loopback',
    description: 'One machine, no remote services: every cost is the CPU work of the pipeline in one process and loopback I/O (the bench before profiles existed).',
    hops: [
      { name: 'gateway → router → engine', kind: 'route', count: 2, latencyMs: 0, source: 'no network: the hops exist (they are counted) but cost nothing' },
    ],
  },
  production: {
    name: 'production',
    description:
      'A single-region deployment with the API front end, the router and the inference engine on separate hosts, and a hosted safety classifier called before every model call. Latencies are medians for one request/response; queueing and tails are left out.',
    hops: [
      {
        name: 'gateway → router → engine',
        kind: 'route',
        count: 2,
        latencyMs: 1,
        source:
          'intra-region round trip: a public EC2 ping test measured 0.39–0.65 ms within one availability zone and 1.3–2.1 ms across zones (gist.github.com/josephmisiti/10312241); AWS describes its zones as "<2 ms apart, usually <1 ms" (re:Invent 2014 SPOT301, summarised at gist.github.com/rjhintz/a27d0ef48121a410e714). 1 ms per hop is our assumption within that range, request handling included.',
      },
      {
        name: 'safety classifier',
        kind: 'call',
        count: 1,
        latencyMs: 20,
        source:
          'a third-party review reports 15–25 ms typical for the OpenAI Moderation API (aimoderationtools.com/posts/openai-moderation-api-review); a user reports 300–400 ms for the same call over the public internet (reddit r/OpenAI). An in-region internal classifier should sit at the low end: 20 ms is our assumption, not a published figure for any provider’s internal path.',
      },
      {
        name: 'persistence / billing commit',
        kind: 'none',
        count: 0,
        latencyMs: 5,
        source:
          'a managed key-value store advertises "single-digit millisecond" writes (Amazon DynamoDB); 5 ms would be our assumption. Not simulated: the server’s post-inference work is in-process, and off the critical path in ws and long-lived (overlapped) but on it in http, so leaving the commit out understates http’s cost — the profile is conservative for the gain.',
      },
    ],
  },
};

export const PROFILE_NAMES = Object.keys(PROFILES);

export interface ServerKnobs {
  hopMs: number;
  hops: number;
  callHopMs: number;
  callHops: number;
}

/** The `llr serve` knobs a profile stands for. Route hops share one latency (the router has one); a profile that mixes them is refused. */
export function profileKnobs(p: CostProfile): ServerKnobs {
  const route = p.hops.filter((h) => h.kind === 'route' && h.count > 0);
  const call = p.hops.filter((h) => h.kind === 'call' && h.count > 0);
  const one = (hs: HopSpec[], what: string) => {
    const lat = [...new Set(hs.map((h) => h.latencyMs))];
    if (lat.length > 1) throw new Error(`profile '${p.name}': ${what} hops must share one latency, got ${lat.join(', ')} ms`);
    return { ms: lat[0] ?? 0, n: hs.reduce((k, h) => k + h.count, 0) };
  };
  const r = one(route, 'route');
  const c = one(call, 'call');
  return { hopMs: r.ms, hops: r.n, callHopMs: c.ms, callHops: c.n };
}

export function profileByName(name: string): CostProfile {
  const p = ownValue(PROFILES, name);
  if (!p) throw new Error(`unknown --profile ${quoted(name)}; known: ${PROFILE_NAMES.join(', ')}`);
  return p;
}

/** The profile as a markdown table (report and docs). */
export function profileMarkdown(p: CostProfile): string {
  return [
    `**${p.name}**: ${p.description}`,
    '',
    '| hop | simulated as | count | latency ms | source or reasoning |',
    '|---|---|---|---|---|',
    ...p.hops.map((h) => `| ${h.name} | ${h.kind === 'route' ? 'per routed request (`--hops`, `--hop-ms`)' : h.kind === 'call' ? 'per model call, every design (`--call-hops`, `--call-hop-ms`)' : 'not simulated'} | ${h.count} | ${h.latencyMs} | ${h.source} |`),
  ].join('\n');
}
