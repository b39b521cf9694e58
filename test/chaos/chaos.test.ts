/**
 * The chaos suite's short form, as CI runs it on every `npm test`: the same
 * scenarios as `npm run chaos` (seeded fuzzing of every client frame type and
 * HTTP request on every design, disconnects in every protocol state, slow
 * readers, concurrent runs of the designs that pause, SIGTERM and SIGKILL
 * with restarts, each scenario on every design it applies to), fewer inputs. The server under test runs from `dist/cli.js` in its own
 * process, so dist is rebuilt first (as the bench test does).
 *
 * It asserts that every property held (zero failures of every kind) and
 * that the scenarios really exercised the server (inputs sent, responses
 * streamed), so it cannot pass by doing nothing.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultOptions, designsFor, runChaos, SCENARIOS } from '../../src/chaos/suite.js';
import { DESIGNS, PROTOCOLS } from '../../src/protocol/designs.js';
import { details, table } from '../../src/chaos/report.js';
import type { Tally } from '../../src/chaos/oracle.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli.js');

let rows: Tally[] = [];

// One run of the suite; the tests below judge it (so they pass in any order).
beforeAll(async () => {
  // Emit even if someone's work in progress elsewhere has a type error; the typecheck is `npm test`'s job.
  await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')]).catch(() => {});
  if (!existsSync(CLI)) throw new Error(`${CLI} was not built`);
  rows = await runChaos({ ...defaultOptions(CLI, true), seed: 7 });
  // About 35 s on a 2-core VM at load 12 (the build first, 10–20 s more); every wait inside is bounded, so this bound only
  // catches a harness bug.
}, 300_000);

describe('chaos suite (short form)', () => {
  it('ran every scenario and design', () => {
    // From the designs table (today: fuzz and disconnect a row per design, slow-reader one row over all four,
    // concurrency a row per design that pauses, long-lived and long-lived-http), so a new design needs no edit here.
    expect(rows.map((r) => `${r.scenario}/${r.design}`)).toEqual([
      ...designsFor('fuzz').map((d) => `fuzz/${d}`),
      ...designsFor('disconnect').map((d) => `disconnect/${d}`),
      `slow-reader/${designsFor('slow-reader').join('+')}`,
      ...designsFor('concurrency').map((d) => `concurrency/${d} 100×5`),
      'signals/SIGTERM',
      'signals/SIGKILL durability',
    ]);
  });

  it('sent inputs to every design of the designs table in each scenario that applies to it, and to no other', () => {
    // Every scenario applies to every design but concurrency, which applies to those whose runs pause.
    for (const s of SCENARIOS) expect(designsFor(s), s).toEqual(s === 'concurrency' ? PROTOCOLS.filter((p) => DESIGNS[p].pauses) : PROTOCOLS);
    for (const s of SCENARIOS) {
      const exercised = new Set(rows.filter((r) => r.scenario === s).flatMap((r) => [...r.exercised].filter(([, n]) => n > 0).map(([d]) => d)));
      expect([...exercised].sort(), s).toEqual([...designsFor(s)].sort());
    }
  });

  it('exercised the server: inputs sent and answered on every row, responses streamed', () => {
    for (const r of rows) {
      expect(r.inputs, `${r.scenario}/${r.design} inputs`).toBeGreaterThan(0);
      expect(r.errors + r.responses + r.closes, `${r.scenario}/${r.design} answers`).toBeGreaterThan(0);
    }
    for (const r of rows.filter((x) => x.scenario === 'fuzz')) {
      expect(r.inputs).toBeGreaterThanOrEqual(60);
      expect(r.responses, `${r.design} fuzz inputs that reached a response`).toBeGreaterThan(5);
      expect(r.errors, `${r.design} fuzz inputs refused with an error`).toBeGreaterThan(5);
    }
  });

  it('every property held: no crash, hang, unsettled run, double billing, sequence gap, malformed answer, lost response', () => {
    const failures = rows.flatMap((r) => r.examples.map((f) => `${r.scenario}/${r.design} ${f.kind}: ${f.detail} — input: ${f.input}`));
    expect(failures, `\n${table(rows)}\n\n${details(rows)}`).toEqual([]);
  });
});
