/**
 * `llr serve` says it is ready with one log line ("llr listening on …", src/cli.ts), and whoever started it waits
 * for that line: by then SIGTERM and SIGINT must already stop it gracefully (every run in flight told, the log
 * flushed, exit status 0; docs/reliability.md). The handlers were installed after the line was written, so a
 * supervisor stopping the server as soon as it was ready sometimes killed it outright (Node's default action:
 * exit by the signal, no "shutting down", nothing flushed; about one time in eight on a busy 2-vCPU VM). The
 * child here sends itself SIGTERM the moment it writes the line (test/fixtures/sigterm-at-ready.mjs), so the
 * order is tested without depending on scheduling.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { buildDist, CLI, ROOT } from '../helpers/build.js';

beforeAll(async () => {
  await buildDist();
}, 120_000);

it('a SIGTERM sent as the ready line is written stops the server gracefully: exit status 0, "shutting down" logged', async () => {
  const preload = join(ROOT, 'test', 'fixtures', 'sigterm-at-ready.mjs');
  const proc = spawn(process.execPath, ['--import', preload, CLI, 'serve', '--port', '0', '--store', 'memory'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  proc.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => proc.once('close', (c, s) => resolve([c, s])));
  expect({ code, signal }).toEqual({ code: 0, signal: null });
  expect(out).toContain('llr listening on');
  expect(out).toContain('"msg":"shutting down"');
}, 60_000);
