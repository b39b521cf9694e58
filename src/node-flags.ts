/**
 * The Node.js options the server runs with where this repository starts it:
 * `npm start`, and the servers the benches and the chaos suite spawn
 * (bench/processes.ts, chaos/proc.ts). test/unit/node-flags.test.ts checks
 * `npm start` and `npm run bench:overhead` say exactly this.
 *
 * `--max-semi-space-size=64` (MiB; Node 20's default tops out at 16): the
 * bound on each semi-space of the young generation (which Node's docs put at
 * three semi-spaces). A long run allocates fast (events, snapshots,
 * records) and keeps a little of each. A larger young generation is
 * collected less often, each time for longer: fewer append → resume samples
 * meet a collection, which is what sets the paused phase's p99. The cost is
 * memory: the young generation grows, only under a high allocation rate, to
 * at most 3 × 64 MiB; it starts small, so the idle server's RSS is
 * unchanged. docs/benchmarks.md, "Third pass", has the A/B of 16, 32 and 64
 * MiB on the bench's command (p99, max, RSS per paused run).
 *
 * `npm run bench:overhead` runs its own process (the clients that stamp
 * the latencies) with them too: the client holding 11,000 connections
 * collects its garbage between a frame's arrival and its stamp (the same
 * section has that A/B too).
 *
 * The `llr` bin keeps `#!/usr/bin/env node`: a shebang with options needs
 * `env -S`, which BusyBox's env (Alpine images) lacks, and the bin would
 * not start there at all. Run it as `NODE_OPTIONS=--max-semi-space-size=64
 * llr serve` for the same collector; for Node's default with `npm start`'s
 * command, `node dist/cli.js serve`; for the benches' servers,
 * `LLR_BENCH_SERVER_NODE_ARGS=--max-semi-space-size=16` (a later option wins).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
