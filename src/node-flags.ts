/**
 * The Node.js options the server runs with where this repository starts it:
 * `npm start`, and the servers the benches and the chaos suite spawn
 * (bench/processes.ts, chaos/proc.ts). test/unit/node-flags.test.ts checks
 * `npm start` and `npm run bench:overhead` say exactly this.
 *
 * `--max-semi-space-size=16` (MiB): the bound on each semi-space of the
 * young generation, Node 20's own default, written down so the server's
 * collector stays what the benches measured whatever a later Node picks.
 * It was 64 until 2026-12-04. A young generation that grows to 64 MiB
 * shrinks again between bursts, and grows back into fresh pages. On this
 * project's benchmark host, a first touch of a page costs ~11 µs, against
 * ~0.1 µs on bare metal (`node -e` touching 64 MiB of a fresh Buffer). A ws
 * continuation then took 6.6–6.9 page faults and 0.57–0.66 ms of server CPU;
 * at 16 MiB it took 0.5–1.4 faults and 0.40–0.50 ms. With 16 the paused
 * phase's p99 was also lower in three pairs of three, and its RSS per paused
 * run fell from 32 KB to 26 KB. `npm run bench:faults` prints the fault
 * cost and each size's faults and CPU per step; docs/benchmarks.md,
 * "Nineteenth pass", has the A/B; "Third pass" has the older one that chose 64, on code that
 * allocated more per step.
 *
 * `npm run bench:overhead` runs its own process (the clients that stamp
 * the latencies) with `BENCH_CLIENT_FLAGS`, 64 MiB semi-spaces: the client
 * holding 11,000 connections collects its garbage between a frame's arrival
 * and its stamp, less often with a larger young generation ("Third pass"
 * has that A/B).
 *
 * The `llr` bin keeps `#!/usr/bin/env node`: a shebang with options needs
 * `env -S`, which BusyBox's env (Alpine images) lacks, and the bin would
 * not start there at all. Run it as `NODE_OPTIONS=--max-semi-space-size=16
 * llr serve` for the same collector; for Node's default with `npm start`'s
 * command, `node dist/cli.js serve`; for the benches' servers,
 * `LLR_BENCH_SERVER_NODE_ARGS=--max-semi-space-size=64` (a later option wins).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** The options `npm run bench:overhead` runs its own process (the client side) with: see above. */
export const BENCH_CLIENT_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
