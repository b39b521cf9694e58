/**
 * What an ended background response's kept events cost the server's heap,
 * against what `background_kept_bytes` counts of them (the figure
 * `--max-background-kept-bytes` bounds): the check behind `KEPT_EVENT_BYTES`
 * and `KEPT_RESPONSE_BYTES` (src/modes/background.ts).
 *
 * Two `llr serve --instant` of its own, with `--expose-gc`, each keeping as
 * little else per response as it can (one stored response, one run record,
 * one ledger entry): one keeps every ended response's events (no TTL, no
 * server-wide bound), the other drops them at the end
 * (`--background-events-ttl-ms 0`), so the difference is what keeping costs.
 * Each runs `--responses` background creates (`store: true`, 50 at a time)
 * after 50 unmeasured ones, then reads its heap after a forced GC
 * (`GET /llr/stats?gc=1`) and its `background_kept_bytes` (`GET /health`).
 * Printed per response: the heap that keeping costs, what was counted, and
 * their ratio (counted / heap: 1 or more means the bound holds the heap it
 * is set for).
 *
 *   npm run bench:kept [-- --responses 2000 --input-words 1]
 */
import { intFlag, parseCommandLine } from '../command-line.js';
import type { ServerStats } from './guard.js';
import { spawnServer, type Child } from './processes.js';

const COMMAND = {
  name: 'bench:kept',
  usage: `usage: npm run bench:kept -- [--responses N] [--input-words N]
  --responses N    background responses measured on each server (2000, at most 20000)
  --input-words N  words of each create's input (1, at most 10000): a longer input, a longer answer
  -h, --help       print this and exit`,
};

const BATCH = 50;

async function json<T>(url: string): Promise<T> {
  return (await (await fetch(url)).json()) as T;
}

async function settle(url: string): Promise<void> {
  // Each background create is answered once its run has started; it ends a few turns later (an instant model).
  for (let i = 0; (await json<{ background_in_flight: number }>(`${url}/health`)).background_in_flight > 0; i++) {
    if (i === 100_000) throw new Error('background runs still in flight after 100,000 polls of /health');
  }
}

async function creates(url: string, n: number, input: string): Promise<void> {
  for (let i = 0; i < n; i += BATCH) {
    await Promise.all(
      Array.from({ length: Math.min(BATCH, n - i) }, async () => {
        const res = await fetch(`${url}/v1/responses`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: 'sim-model', input, background: true, store: true }),
        });
        if (res.status !== 200) throw new Error(`background create: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
        await res.arrayBuffer();
      }),
    );
  }
  await settle(url);
}

/** Heap and counted kept bytes after `n` responses, per response. */
async function measure(extra: string[], n: number, input: string): Promise<{ heap: number; counted: number }> {
  const args = ['--instant', '--max-memory-store-responses', '1', '--max-run-records', '1', '--ledger-entries', '1', ...extra];
  const server: Child = await spawnServer(args, { nodeArgs: ['--expose-gc'] });
  try {
    await creates(server.url, BATCH, input);
    const h0 = (await json<ServerStats>(`${server.url}/llr/stats?gc=1`)).memory.heapUsed;
    const k0 = (await json<{ background_kept_bytes: number }>(`${server.url}/health`)).background_kept_bytes;
    await creates(server.url, n, input);
    const h1 = (await json<ServerStats>(`${server.url}/llr/stats?gc=1`)).memory.heapUsed;
    const k1 = (await json<{ background_kept_bytes: number }>(`${server.url}/health`)).background_kept_bytes;
    return { heap: (h1 - h0) / n, counted: (k1 - k0) / n };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseCommandLine(COMMAND, { options: { responses: { type: 'string' }, 'input-words': { type: 'string' } } });
  const n = intFlag(COMMAND, 'responses', values.responses, 2000, 1, 20_000);
  const words = intFlag(COMMAND, 'input-words', values['input-words'], 1, 1, 10_000);
  const input = Array.from({ length: words }, (_, i) => `word${i}`).join(' ');
  const kept = await measure(['--max-background-kept-bytes', String(2 ** 50), '--background-events-ttl-ms', String(2 ** 31 - 1)], n, input);
  const dropped = await measure(['--background-events-ttl-ms', '0'], n, input);
  const heap = kept.heap - dropped.heap;
  process.stdout.write(
    [
      `${n} background responses, input of ${words} word(s), per response:`,
      `  heap, events kept:    ${Math.round(kept.heap)} B`,
      `  heap, events dropped: ${Math.round(dropped.heap)} B`,
      `  what keeping costs:   ${Math.round(heap)} B of heap`,
      `  counted (background_kept_bytes): ${Math.round(kept.counted)} B = ${(kept.counted / heap).toFixed(2)} × the heap`,
    ].join('\n') + '\n',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:kept: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
