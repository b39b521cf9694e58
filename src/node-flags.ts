/**
 * The Node.js options the server runs with where this repository starts it:
 * `npm start`, and the servers the benches and the chaos suite spawn
 * (bench/processes.ts, chaos/proc.ts). test/unit/node-flags.test.ts checks
 * `npm start` and `npm run bench:overhead` say exactly this.
 *
 * `--max-semi-space-size=64` (MiB; Node 20's default tops out at 16): the
 * bound on each semi-space of the young generation (which Node's docs put at
 * three semi-spaces). A long run allocates fast (events, snapshots,
 * records) and keeps a little of each. With the default, the paused phase
 * of `npm run bench:overhead` scavenged every ~200 resumes for 4–12 ms
 * (`--trace-gc`, one-off): about 1.4 % of its append → resume samples fell
 * in one, which set the p99. With 64 MiB a scavenge comes about every 800
 * resumes (the same one-off `--trace-gc`), but each copies a larger space
 * and takes longer (about 3× in a one-off review run): fewer samples reach
 * the p99, the few that meet a scavenge wait longer. docs/benchmarks.md,
 * "Third pass", has the A/B of 16, 32 and 64 MiB on the bench's command. The other cost is memory: the young
 * generation grows, only under a high allocation rate, to at most 3 × 64
 * MiB (the paused phase's RSS per run rose ~8 KB at 11,000 runs); it starts
 * small, so the idle server's RSS is unchanged.
 *
 * `npm run bench:overhead` runs its own process (the clients that stamp
 * the latencies) with them too: in the paused phase, with Node's default
 * the client holding 11,000 connections scavenged every ~300 resumes for
 * 1–2 ms, and its stamps paid for it (one-off runs of the phase's own
 * functions: p99 1.61–2.47 ms with the default, 1.27–1.45 ms with 64).
 *
 * The `llr` bin keeps `#!/usr/bin/env node`: a shebang with options needs
 * `env -S`, which BusyBox's env (Alpine images) lacks, and the bin would
 * not start there at all. Run it as `NODE_OPTIONS=--max-semi-space-size=64
 * llr serve` for the same collector; for Node's default with `npm start`'s
 * command, `node dist/cli.js serve`; for the benches' servers,
 * `LLR_BENCH_SERVER_NODE_ARGS=--max-semi-space-size=16` (a later option wins).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
