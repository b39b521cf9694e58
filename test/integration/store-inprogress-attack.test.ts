/**
 * A background response stored `in_progress` as it started, whose final write then failed (another process held the
 * file's write lock as the run ended): the row is still `in_progress` with a live runner, so every other server on the
 * file answered it `in_progress` (and refused its DELETE and cancel, 409) for as long as its server lived, while its own
 * server answered it `failed`. Real sockets: the runner is an `llr serve` child process, the reader an in-process server.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { CLI } from '../helpers/build.js';
import { call, storeChildren } from '../helpers/serve-child.js';
import { testServer } from '../helpers/server.js';

const { dir, children, serve: serveChild } = storeChildren('llr-inprogress-');

/** A background response's events until its end (`data: [DONE]`): resolves with the stream's text. */
async function untilEnd(url: string, id: string): Promise<string> {
  const res = await fetch(`${url}/v1/responses/${id}?stream=true`);
  return res.text();
}

describe('a background response whose final write failed after its in_progress row was stored', () => {
  it('is not answered in_progress by another server on the file while its own server lives', async () => {
    const path = join(dir, 'final-failed.sqlite');
    const child = await serveChild(path, ['--tokens-per-second', '100', '--ttft-ms', '0']);
    const started = await call(child.url, 'POST', '/v1/responses', { model: 'm', input: 'task', background: true, max_output_tokens: 16 });
    expect(started.body.status).toBe('in_progress');
    const id = started.body.id!;
    const other = new Database(path);
    try {
      // Its in_progress row is stored (the create is answered after it); the lock is held as the run ends.
      other.exec('BEGIN IMMEDIATE');
      const events = await untilEnd(child.url, id);
      expect(events).toMatch(/could not be stored/);
      other.exec('COMMIT');
    } finally {
      other.close();
    }
    expect((await call(child.url, 'GET', `/v1/responses/${id}`)).body.status).toBe('failed');
    // The file writable again: the server's next background response ends (and stores) once more.
    const next = await call(child.url, 'POST', '/v1/responses', { model: 'm', input: 'next', background: true, max_output_tokens: 16 });
    await untilEnd(child.url, next.body.id!);
    expect((await call(child.url, 'GET', `/v1/responses/${next.body.id}`)).body.status).toMatch(/^(completed|incomplete)$/);

    const beside = await testServer({ store: path });
    const seen = await call(beside.url, 'GET', `/v1/responses/${id}`);
    // It was in_progress here (its runner lives), and its DELETE and cancel 409, until that server exits.
    expect([seen.status, seen.body.status]).toEqual([200, 'failed']);
    expect((await call(beside.url, 'DELETE', `/v1/responses/${id}`)).status).toBe(200);
    child.proc.kill('SIGTERM');
    await child.exited;
  }, 60_000);
});

describe('a store file deleted while another server process has it open', () => {
  it('is opened again at once by the server that writes next, not refused until the other server touches it', async () => {
    const path = join(dir, 'deleted-beside.sqlite');
    const { url } = await testServer({ store: path });
    const idle = await serveChild(path);
    const before = await call(url, 'POST', '/v1/responses', { model: 'm', input: 'before', store: true });
    expect(before.body.status).toBe('completed');
    // Only the database file: its `-wal` and `-shm` stay, the other server still has them open.
    rmSync(path);
    // The file opened again over the deleted database's `-shm` (its index of a log that is not this file's): every
    // write and read failed 'SQLITE_IOERR_SHORT_READ: disk I/O error' until the other server happened to use the store.
    const after = await call(url, 'POST', '/v1/responses', { model: 'm', input: 'after', store: true });
    expect([after.status, after.body.status]).toEqual([200, 'completed']);
    expect((await call(url, 'GET', `/v1/responses/${after.body.id}`)).status).toBe(200);
    // And the other server, when it next looks, finds what was stored there.
    expect((await call(idle.url, 'GET', `/v1/responses/${after.body.id}`)).status).toBe(200);
    idle.proc.kill('SIGTERM');
    await idle.exited;
  }, 60_000);
});

describe('a background response whose server died and was not reaped (a zombie)', () => {
  it('is answered failed, not in_progress for as long as its parent does not wait for it', async () => {
    const path = join(dir, 'zombie.sqlite');
    // The server's parent execs `sleep`, which never waits for it: once killed, it stays a zombie (its pid and start
    // time still in /proc) until `sleep` is gone. Its stdout is the server's alone: its end is the server's death.
    const parent = spawn(
      '/bin/sh',
      ['-c', '"$0" "$@" & exec sleep 600 >/dev/null 2>&1', process.execPath, CLI, 'serve', '--port', '0', '--store', path, '--tokens-per-second', '2', '--ttft-ms', '0'],
      { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, LLR_LOG_LEVEL: 'info' } },
    );
    children.add(parent);
    const parentGone = new Promise<void>((resolve) => parent.once('exit', () => resolve()));
    let out = '';
    const closed = new Promise<void>((resolve) => parent.stdout!.once('close', () => resolve()));
    const { url, pid } = await new Promise<{ url: string; pid: number }>((resolve) => {
      parent.stdout!.setEncoding('utf8').on('data', (c: string) => {
        out += c;
        const m = /"pid":(\d+).*"url":"(http[^"]+)"/.exec(out);
        if (m) resolve({ url: m[2]!, pid: Number(m[1]) });
      });
    });
    const started = await call(url, 'POST', '/v1/responses', { model: 'm', input: 'a long task', background: true, max_output_tokens: 4000 });
    expect(started.body.status).toBe('in_progress');
    process.kill(pid, 'SIGKILL');
    await closed;
    // Its exit goes on after its files close: until the kernel has made it a zombie.
    const state = () => readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]![0];
    while (state() !== 'Z') await new Promise((r) => setImmediate(r));

    const beside = await testServer({ store: path });
    const after = await call(beside.url, 'GET', `/v1/responses/${started.body.id}`);
    expect([after.status, after.body.status]).toEqual([200, 'failed']);
    parent.kill('SIGKILL');
    await parentGone;
  }, 60_000);
});

describe('a streamed retrieve of a background response another server process runs', () => {
  it('is refused 409 response_running_elsewhere, not told its events are no longer kept after its end', async () => {
    const path = join(dir, 'resume-elsewhere.sqlite');
    const child = await serveChild(path, ['--tokens-per-second', '2', '--ttft-ms', '0']);
    const started = await call(child.url, 'POST', '/v1/responses', { model: 'm', input: 'a long task', background: true, max_output_tokens: 4000 });
    const id = started.body.id!;
    const beside = await testServer({ store: path });
    const resumed = await call(beside.url, 'GET', `/v1/responses/${id}?stream=true&starting_after=0`);
    expect([resumed.status, resumed.body.error?.code]).toEqual([409, 'response_running_elsewhere']);
    expect(resumed.body.error?.message).toMatch(/another server process/);
    child.proc.kill('SIGTERM');
    await child.exited;
  }, 60_000);
});

describe('a background response stored in_progress before the machine rebooted', () => {
  it('is failed even when a process after the reboot has its runner pid and start time', async () => {
    const path = join(dir, 'rebooted.sqlite');
    const { url } = await testServer({ store: path });
    const made = await call(url, 'POST', '/v1/responses', { model: 'm', input: 'before the reboot', store: true });
    // A live process standing in for one of the next boot that got the same pid and start (clock ticks since boot).
    const other = spawn('sleep', ['600'], { stdio: 'ignore' });
    children.add(other);
    const gone = new Promise<void>((resolve) => other.once('exit', () => resolve()));
    await new Promise<void>((resolve) => other.once('spawn', () => resolve()));
    const stat = readFileSync(`/proc/${other.pid}/stat`, 'latin1');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const db = new Database(path);
    db.prepare(`UPDATE responses SET runner = ?, response = json_set(response, '$.status', 'in_progress') WHERE id = ?`).run(
      `${other.pid}:${start}:00000000-0000-4000-8000-000000000000`,
      made.body.id,
    );
    db.close();
    const beside = await testServer({ store: path });
    const after = await call(beside.url, 'GET', `/v1/responses/${made.body.id}`);
    expect([after.status, after.body.status]).toEqual([200, 'failed']);
    other.kill('SIGKILL');
    await gone;
  }, 60_000);
});
