/**
 * The soak benchmark: does the server's memory stay flat over a long run?
 * It starts `llr serve --store memory --instant` in its own process (with
 * `--expose-gc`, so `/llr/stats?gc=1` measures live memory, not garbage),
 * sends many HTTP `store: false` requests with 50 KB inputs at a bounded
 * concurrency, samples the server's RSS and heap after a warm-up and at
 * intervals until the end, and prints a table and whether RSS stayed within
 * `SOAK_RSS_BOUND_MB` of its warm value.
 *
 *   npm run soak                 20,000 requests (the figure)
 *   npm run soak -- --quick      2,000 requests (the vitest test asserts the heap bound)
 *   npm run soak -- --requests N --concurrency C --input-kb K --json
 *
 * Leaves out WebSocket traffic and stored responses: the point is what the
 * server keeps per request when it is asked to keep nothing.
 */
import { fileURLToPath } from 'node:url';
import { intFlag, parseCommandLine, usageError } from '../command-line.js';
import { spawnServer } from './processes.js';

/** How far RSS may rise above its warm value over the whole soak. */
export const SOAK_RSS_BOUND_MB = 50;

export interface SoakOptions {
  requests: number;
  /** Requests sent before the warm sample (caches, JIT, pools filled). */
  warmup: number;
  concurrency: number;
  inputBytes: number;
  /** Extra `llr serve` flags. */
  serverArgs?: string[];
}

export interface SoakSample {
  requests: number;
  rss_mb: number;
  heap_used_mb: number;
  external_mb: number;
}

export interface SoakResult {
  options: SoakOptions;
  samples: SoakSample[];
  warm: SoakSample;
  end: SoakSample;
  rss_growth_mb: number;
  heap_growth_mb: number;
  within_bound: boolean;
  failures: number;
  elapsed_s: number;
}

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'server', 'token', 'stream', 'render', 'cache', 'socket', 'loop', 'agent', 'tool', 'call', 'output', 'model'];

/** A distinct ~`bytes` input per request: ordinary words, seeded by the request number. */
function inputFor(n: number, bytes: number): string {
  let s = `request ${n}: `;
  let x = (n + 1) * 2654435761;
  while (s.length < bytes) {
    x = (x ^ (x >>> 13)) * 1274126177;
    s += `${WORDS[(x >>> 7) & 15]} `;
  }
  return s.slice(0, bytes);
}

async function sample(url: string, requests: number): Promise<SoakSample> {
  const res = await fetch(`${url}/llr/stats?gc=1`);
  const body = (await res.json()) as { memory: NodeJS.MemoryUsage; gc_available: boolean };
  if (!body.gc_available) throw new Error('the server has no gc(): it must run with --expose-gc');
  const mb = (b: number) => Math.round((b / 1048576) * 10) / 10;
  return { requests, rss_mb: mb(body.memory.rss), heap_used_mb: mb(body.memory.heapUsed), external_mb: mb(body.memory.external) };
}

export async function runSoak(opts: SoakOptions, onSample: (s: SoakSample) => void = () => {}): Promise<SoakResult> {
  const server = await spawnServer(['--instant', ...(opts.serverArgs ?? [])], { nodeArgs: ['--expose-gc'] });
  const started = performance.now();
  try {
    let next = 0;
    let done = 0;
    let failures = 0;
    const samples: SoakSample[] = [];
    const checkpoints = new Set<number>([opts.warmup]);
    const step = Math.max(1, Math.floor((opts.requests - opts.warmup) / 5));
    for (let n = opts.warmup + step; n < opts.requests; n += step) checkpoints.add(n);
    checkpoints.add(opts.requests);

    /** Send requests up to `until`, `concurrency` at a time. */
    const sendUntil = async (until: number) => {
      const worker = async () => {
        while (next < until) {
          const n = next++;
          const res = await fetch(`${server.url}/v1/responses`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ model: 'sim-model', input: inputFor(n, opts.inputBytes), store: false }),
          });
          const body = (await res.json()) as { status?: string };
          if (res.status !== 200 || body.status !== 'completed') failures++;
          done++;
        }
      };
      await Promise.all(Array.from({ length: opts.concurrency }, worker));
    };

    for (const at of [...checkpoints].sort((a, b) => a - b)) {
      await sendUntil(at);
      const s = await sample(server.url, done);
      samples.push(s);
      onSample(s);
    }
    const warm = samples[0]!;
    const end = samples.at(-1)!;
    const rss_growth_mb = Math.round((end.rss_mb - warm.rss_mb) * 10) / 10;
    return {
      options: opts,
      samples,
      warm,
      end,
      rss_growth_mb,
      heap_growth_mb: Math.round((end.heap_used_mb - warm.heap_used_mb) * 10) / 10,
      within_bound: rss_growth_mb <= SOAK_RSS_BOUND_MB,
      failures,
      elapsed_s: Math.round((performance.now() - started) / 100) / 10,
    };
  } finally {
    await server.stop();
  }
}

function formatSoak(r: SoakResult): string {
  const o = r.options;
  const lines = [
    `soak: ${o.requests} HTTP store:false requests, ${Math.round(o.inputBytes / 1024)} KB inputs, concurrency ${o.concurrency}, warm-up ${o.warmup}; server: llr serve --store memory --instant (--expose-gc)`,
    '',
    '| requests | RSS MB | heap used MB | external MB |',
    '|---:|---:|---:|---:|',
    ...r.samples.map((s) => `| ${s.requests} | ${s.rss_mb} | ${s.heap_used_mb} | ${s.external_mb} |`),
    '',
    `RSS growth after warm-up: ${r.rss_growth_mb} MB (bound ${SOAK_RSS_BOUND_MB} MB): ${r.within_bound ? 'within bound' : 'OVER BOUND'}`,
    `heap growth after warm-up: ${r.heap_growth_mb} MB; failed requests: ${r.failures}; elapsed ${r.elapsed_s} s`,
  ];
  return lines.join('\n');
}

const SOAK_COMMAND = {
  name: 'soak',
  usage: `usage: npm run soak -- [--quick] [--requests N] [--warmup N] [--concurrency N] [--input-kb N] [--json]
  --quick          2,000 requests instead of 20,000
  --requests N     requests in all (20000)   --warmup N   requests before the baseline (a tenth)
  --concurrency N  requests in flight (8)    --input-kb N  KB of input per request (50)
  --json           the result as JSON
  -h, --help       print this and exit`,
};

async function main(): Promise<void> {
  const { values } = parseCommandLine(SOAK_COMMAND, {
    options: {
      quick: { type: 'boolean' },
      requests: { type: 'string' },
      warmup: { type: 'string' },
      concurrency: { type: 'string' },
      'input-kb': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const int = (name: 'requests' | 'warmup' | 'concurrency' | 'input-kb', fallback: number) => intFlag(SOAK_COMMAND, name, values[name], fallback, 1);
  const requests = int('requests', values.quick ? 2000 : 20_000);
  const opts: SoakOptions = {
    requests,
    warmup: int('warmup', Math.floor(requests / 10)),
    concurrency: int('concurrency', 8),
    inputBytes: int('input-kb', 50) * 1024,
  };
  if (opts.warmup >= opts.requests) usageError(SOAK_COMMAND, '--warmup must be smaller than --requests');
  const result = await runSoak(opts, (s) => process.stderr.write(`  ${s.requests} requests: RSS ${s.rss_mb} MB, heap ${s.heap_used_mb} MB\n`));
  process.stdout.write(`${values.json ? JSON.stringify(result, null, 2) : formatSoak(result)}\n`);
  if (!result.within_bound || result.failures > 0) process.exitCode = 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
