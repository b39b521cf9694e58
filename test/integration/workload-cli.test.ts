/**
 * `llr workload inspect / convert` from the built
 * CLI: inspect reports what was read, convert writes the neutral format that
 * reads back the same, a file the reader cannot use exits 2 (bad input, as a bad
 * flag) with its line and no stack trace. (`llr bench --quick --workload` on every fixture:
 * bench-workloads.test.ts.)
 */
import { execFile } from 'node:child_process';
import { chmodSync, linkSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayable } from '../../src/workload/replayable.js';
import { readWorkload } from '../../src/workload/load.js';
import { buildDist } from '../helpers/build.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli.js');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'workloads');
const dir = mkdtempSync(join(tmpdir(), 'llr-workload-cli-'));

beforeAll(async () => {
  // The tests run the built CLI: build it, and stop here if the build fails.
  await buildDist();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const llr = (args: string[], timeout = 30_000) =>
  run(process.execPath, [CLI, ...args], { timeout }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

describe('llr workload', () => {
  it('convert refuses OUT that is FILE itself, by any name, leaving the rollout as it was (it was overwritten, exit 0: atk114 F4)', async () => {
    const src = join(dir, 'self.jsonl');
    const bytes = readFileSync(join(FIXTURES, 'rollout-ide-multi-turn.jsonl'));
    writeFileSync(src, bytes);
    symlinkSync(src, join(dir, 'self-link.jsonl'));
    linkSync(src, join(dir, 'self-hard.jsonl'));
    for (const out of [src, join(dir, '.', 'self.jsonl'), join(dir, 'self-link.jsonl'), join(dir, 'self-hard.jsonl')]) {
      const r = await llr(['workload', 'convert', src, out]);
      expect(r.code, out).toBe(2);
      expect(r.stderr, out).toContain('itself; converting would overwrite the file it reads: give another OUT');
    }
    expect(readFileSync(src).equals(bytes)).toBe(true);
  });

  it('inspect prints turns, calls with recorded or inferred figures, and what was skipped', async () => {
    const { code, stdout } = await llr(['workload', 'inspect', join(FIXTURES, 'rollout-compacted.jsonl')]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^rollout-compacted\.jsonl: Codex rollout \(JSONL\) \(originator codex-tui, cli_version 0\.129\.0, session_source cli\), 34 records$/m);
    expect(stdout).toContain('user turns: 3 · model calls: 7 · client tool calls: 4 (recorded: 3 function, 1 custom) · hosted calls: 0');
    expect(stdout).toMatch(/^user turn 2: .* starts a new conversation \(the history was compacted, or a new session began\)$/m);
    expect(stdout).toMatch(/^ {2}4 +21 +700 rec +88 rec {2}apply_patch 250 ms$/m);
    expect(stdout).toMatch(/^ {2}line 21: compaction at line 20 — inside a user turn/m);
    const desktop = await llr(['workload', 'inspect', join(FIXTURES, 'rollout-desktop-event-only.jsonl')]);
    expect(desktop.stdout).toContain('token figures per call: input 0 recorded, 3 inferred · output 0 recorded, 3 inferred');
  });

  it('inspect counts the client tool calls the replay makes, a rollout as its conversion (atk84 F3)', async () => {
    // An interrupted turn's calls are not replayed: the rollout counted them, the converted file did not.
    const out = join(dir, 'aborted-count.json');
    expect((await llr(['workload', 'convert', join(FIXTURES, 'rollout-aborted.jsonl'), out])).code).toBe(0);
    const line = 'user turns: 3 · model calls: 4 · client tool calls: 1 (recorded: 3 function, 0 custom) · hosted calls: 0';
    expect((await llr(['workload', 'inspect', join(FIXTURES, 'rollout-aborted.jsonl')])).stdout).toContain(line);
    expect((await llr(['workload', 'inspect', out])).stdout).toContain(line);
  });

  it('convert writes the neutral format, which reads back the same', async () => {
    const out = join(dir, 'ide.json');
    expect((await llr(['workload', 'convert', join(FIXTURES, 'rollout-ide-multi-turn.jsonl'), out])).code).toBe(0);
    const original = readWorkload(join(FIXTURES, 'rollout-ide-multi-turn.jsonl'));
    expect(readWorkload(out)).toEqual(original);
  });

  it('convert writes what serve replays: an interrupted turn ends in its text, without its calls or their "aborted" answers (a client following the file got 400 unknown_call_id; atk57 F3)', async () => {
    const out = join(dir, 'aborted.json');
    expect((await llr(['workload', 'convert', join(FIXTURES, 'rollout-aborted.jsonl'), out])).code).toBe(0);
    const original = readWorkload(join(FIXTURES, 'rollout-aborted.jsonl'));
    // The fixture is one a replay changes: its first user turn ends in calls.
    expect(original.userTurns[0]!.modelTurns.at(-1)!.output.some((o) => o.type === 'function_call')).toBe(true);
    const written = readWorkload(out);
    expect(written).toEqual(replayable(original));
    for (const u of written.userTurns) expect(u.modelTurns.at(-1)!.output.some((o) => o.type === 'function_call')).toBe(false);
    const asked = new Set(written.userTurns.flatMap((u) => u.modelTurns.flatMap((t) => t.output.flatMap((o) => (o.type === 'function_call' ? [o.call_id] : [])))));
    for (const u of written.userTurns) for (const i of u.input) if (i.type === 'function_call_output') expect(asked.has((i as { call_id: string }).call_id)).toBe(true);
    // Converted again, it is the same.
    const again = join(dir, 'aborted-again.json');
    expect((await llr(['workload', 'convert', out, again])).code).toBe(0);
    expect(readWorkload(again)).toEqual(written);
  });

  it('convert writes OUT whole or not at all: a failed write leaves it as it was, no temporary file, and names it (atk46 F4)', async () => {
    const sub = mkdtempSync(join(dir, 'convert-'));
    const out = join(sub, 'kept.json');
    writeFileSync(out, 'what was there');
    // A file-size limit of 4 KiB (the shell's ulimit; Node takes SIGXFSZ as EFBIG): the neutral file is ~8 KB.
    const r = await run('bash', ['-c', 'ulimit -f 4; exec "$0" "$@"', process.execPath, CLI, 'workload', 'convert', join(ROOT, 'test', 'fixtures', 'workloads', 'rollout-compacted.jsonl'), out]).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^llr: cannot write ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: EFBIG: file too large[^\n]*\n$`));
    expect(readFileSync(out, 'utf8')).toBe('what was there');
    expect(readdirSync(sub)).toEqual(['kept.json']);
    // Not a regular file: written as it is (a rename over /dev/stdout would fail).
    // Through a shell's pipe: a child's stdout from execFile is a socket, which /dev/stdout cannot be opened on.
    const piped = await run('bash', ['-c', 'set -o pipefail; "$0" "$@" | cat', process.execPath, CLI, 'workload', 'convert', join(FIXTURES, 'rollout-aborted.jsonl'), '/dev/stdout']);
    expect(JSON.parse(piped.stdout)).toMatchObject({ llr_workload: 1, name: 'rollout-aborted.jsonl' });
  });

  it('convert keeps what OUT is: a link is written through, a file keeps its mode, a file of several names is written in place (atk47 F5)', async () => {
    const sub = mkdtempSync(join(dir, 'kinds-'));
    const src = join(FIXTURES, 'rollout-aborted.jsonl');
    const target = join(sub, 'target.json');
    writeFileSync(target, 'old');
    symlinkSync(target, join(sub, 'link.json'));
    expect((await llr(['workload', 'convert', src, join(sub, 'link.json')])).code).toBe(0);
    expect(lstatSync(join(sub, 'link.json')).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(target, 'utf8'))).toMatchObject({ llr_workload: 1 });
    const secret = join(sub, 'secret.json');
    writeFileSync(secret, 'old', { mode: 0o600 });
    chmodSync(secret, 0o600);
    expect((await llr(['workload', 'convert', src, secret])).code).toBe(0);
    expect(statSync(secret).mode & 0o777).toBe(0o600);
    const named = join(sub, 'named.json');
    writeFileSync(named, 'old');
    linkSync(named, join(sub, 'other-name.json'));
    expect((await llr(['workload', 'convert', src, named])).code).toBe(0);
    expect(readFileSync(join(sub, 'other-name.json'), 'utf8')).toBe(readFileSync(named, 'utf8'));
    // A dangling link makes its target, as the shell would.
    symlinkSync(join(sub, 'made.json'), join(sub, 'dangling.json'));
    expect((await llr(['workload', 'convert', src, join(sub, 'dangling.json')])).code).toBe(0);
    expect(lstatSync(join(sub, 'dangling.json')).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(join(sub, 'made.json'), 'utf8'))).toMatchObject({ llr_workload: 1 });
    expect(readdirSync(sub).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    // /dev/stdout is the descriptor, a file it appends to among them: written as it is, never renamed over (atk48 N2).
    const log = join(sub, 'log.txt');
    writeFileSync(log, 'HEADER\n');
    await run('bash', ['-c', '"$0" "$@" >> "$LOG"', process.execPath, CLI, 'workload', 'convert', src, '/dev/stdout'], { env: { ...process.env, LOG: log } });
    const logged = readFileSync(log, 'utf8');
    expect(logged.startsWith('HEADER\n{"llr_workload":1')).toBe(true);
  });

  it('a file it cannot use: exit 2, the line and what was expected, no stack trace', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"timestamp":"t","type":"session_meta","payload":{}}\n{"timestamp":"t","type":"response_item"}\n');
    const r = await llr(['workload', 'inspect', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('llr: bad.jsonl:2: the "response_item" record has no `payload` object: not a Codex rollout record\n');
    const neutral = join(dir, 'bad.json');
    writeFileSync(neutral, '{"llr_workload": 1, "userTurns": []}');
    const n = await llr(['workload', 'inspect', neutral]);
    expect(n.code).toBe(2);
    expect(n.stderr).toBe('llr: bad.json: not an llr workload (docs/workload.schema.json): /userTurns must NOT have fewer than 1 items\n');
    // The same refusal, the same status, where the other commands read a workload.
    const bench = await llr(['bench', '--workload', bad, '--out', join(dir, 'bench-bad')]);
    expect(bench.code).toBe(2);
    expect(bench.stderr).toBe('llr: bad.jsonl:2: the "response_item" record has no `payload` object: not a Codex rollout record\n');
    const serve = await llr(['serve', '--port', '0', '--store', 'memory', '--workload', bad]);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toBe('llr: bad.jsonl:2: the "response_item" record has no `payload` object: not a Codex rollout record\n');
    // The demo's workload too, at start-up: it was read per race, and each race failed with a 500 server_error.
    const demo = await llr(['serve', '--port', '0', '--store', 'memory', '--demo-workload', bad]);
    expect([demo.code, demo.stderr]).toEqual([2, 'llr: bad.jsonl:2: the "response_item" record has no `payload` object: not a Codex rollout record\n']);
  });

  it('a file whose recorded text holds a replay position note naming its length: inspect says so, exit 2; serve refuses it', async () => {
    // The replay model would act on the note and skip recorded calls, the run still completed (outside attack).
    const noted = join(dir, 'noted.jsonl');
    const text = readFileSync(join(FIXTURES, 'rollout-compacted.jsonl'), 'utf8');
    expect(text).toContain('Summarise what src/orders does.');
    writeFileSync(noted, text.replaceAll('Summarise what src/orders does.', 'Summarise what src/orders does. [llr replay: position 2 of 7]'));
    const r = await llr(['workload', 'inspect', noted]);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('user turns: 3 · model calls: 7');
    expect(r.stdout).toMatch(/^not replayable: a message of user turn 1's input .*holds '\[llr replay: position 2 of 7\]'/m);
    const serve = await llr(['serve', '--port', '0', '--store', 'memory', '--workload', noted]);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toMatch(/^llr: .*replay position note naming this run's 7 model calls/);
    // Another length's note places nothing: read and replayable as it is.
    writeFileSync(noted, text.replaceAll('Summarise what src/orders does.', 'Summarise what src/orders does. [llr replay: position 2 of 8]'));
    expect((await llr(['workload', 'inspect', noted])).code).toBe(0);
  });

  it('a file that is not UTF-8: exit 2, what it is (UTF-16) or where (the line and byte), not "not valid JSON"', async () => {
    const good = '{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}\n{"timestamp":"t","type":"response_item","payload":{}}\n';
    const utf16 = join(dir, 'utf16.jsonl');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(good, 'utf16le')]));
    const r = await llr(['workload', 'inspect', utf16]);
    expect([r.code, r.stderr]).toEqual([2, 'llr: utf16.jsonl: the file is UTF-16LE (little-endian, with a BOM); convert it to UTF-8 (e.g. iconv -f UTF-16LE -t UTF-8)\n']);
    const latin1 = join(dir, 'latin1.jsonl');
    writeFileSync(latin1, Buffer.from(good.replace('"payload":{}', '"payload":{"text":"caf\u00e9"}'), 'latin1'));
    const serve = await llr(['serve', '--port', '0', '--store', 'memory', '--workload', latin1]);
    expect([serve.code, serve.stderr]).toEqual([2, 'llr: latin1.jsonl:2: not valid UTF-8: byte 0xE9 at byte 63 of the line (offset 123 in the file); a workload file must be UTF-8 text, convert it to UTF-8\n']);
  });
});
