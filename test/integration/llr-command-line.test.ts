/**
 * `llr`'s own command lines, run from the built files as a person runs
 * them: a bad value (empty, negative, fractional where a count is meant,
 * out of range, past what a Node timer holds, not a number), an unknown
 * flag or a missing argument gets one line on stderr naming the flag and
 * exit status 2, nothing on stdout, no stack trace, and nothing listening:
 * each case fails before the server binds (the timeout would catch a
 * server that started instead).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from '../helpers/build.js';
import { serveChild } from '../helpers/serve-child.js';

const run = promisify(execFile);
const CLI = join(ROOT, 'dist', 'cli.js');

beforeAll(async () => {
  await buildDist();
}, 120_000);

async function llr(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run(process.execPath, [CLI, ...args], { timeout: 15_000, env: { ...process.env, ...env } }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number | null; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

const SERVE = ['serve', '--store', 'memory', '--port', '0'];
/** For the cases that give a port of their own: a flag is given once. */
const SERVE_ANY_PORT = ['serve', '--store', 'memory'];

/** [arguments, environment, what stderr says] */
const BAD: Array<[string[], Record<string, string>, string]> = [
  [[...SERVE, '--nope'], {}, "Unknown option '--nope'"],
  // A flag given twice kept its last value, unsaid (outside attack atk70 F2); those that take many may repeat.
  [[...SERVE, '--max-tools', '5', '--max-tools=7'], {}, '--max-tools is given more than once; give it once'],
  [[...SERVE, '--instant', '--instant'], {}, '--instant is given more than once'],
  [['bench', '--reps', '1', '--reps', '2'], {}, '--reps is given more than once'],
  [['run', '--url', 'http://a', '--url', 'http://b', 'hi'], {}, '--url is given more than once'],
  [[...SERVE_ANY_PORT, '--port=65536'], {}, "--port needs an integer >= 0 and <= 65535, got '65536'"],
  [[...SERVE_ANY_PORT, '--port=1.5'], {}, '--port needs an integer'],
  [[...SERVE_ANY_PORT, '--port=-1'], {}, "got '-1'"],
  // parseArgs' own message for a value that starts with a dash is two lines: said on one.
  [[...SERVE_ANY_PORT, '--port', '-1'], {}, "Option '--port' argument is ambiguous. Did you forget to specify the option argument for '--port'? To specify"],
  // Number('') is 0: an empty port listened on a random one.
  [[...SERVE_ANY_PORT, '--port='], {}, "--port needs a value, got ''"],
  [['serve', '--store', 'memory'], { LLR_PORT: 'abc' }, "--port needs an integer >= 0 and <= 65535, got 'abc'"],
  // A rate of 0 started, then every request failed with a 500.
  [[...SERVE, '--tokens-per-second', '0'], {}, "--tokens-per-second needs a number > 0 (or Infinity), got '0'"],
  [[...SERVE, '--prefill-tps', '0'], {}, '--prefill-tps needs a number > 0'],
  // Node fires a timer longer than 2^31-1 ms at once.
  [[...SERVE, '--ttft-ms', '3e9'], {}, '--ttft-ms needs a number >= 0 and <= 2147483647'],
  [[...SERVE, '--hop-ms', 'Infinity'], {}, '--hop-ms needs a number >= 0 and <= 2147483647'],
  [[...SERVE, '--demo-race-timeout-ms', '3000000000'], {}, '--demo-race-timeout-ms needs an integer >= 1 and <= 2147483647'],
  // Infinity hops never reached the model.
  [[...SERVE, '--hops', 'Infinity'], {}, "--hops needs an integer >= 0, got 'Infinity'"],
  [[...SERVE, '--call-hops', '1.5'], {}, '--call-hops needs an integer >= 0'],
  [[...SERVE, '--seed', '1.5'], {}, '--seed needs an integer >= 0'],
  [[...SERVE, '--chaos-seed', 'Infinity'], {}, '--chaos-seed needs an integer >= 0'],
  [[...SERVE, '--ledger-entries', '0'], {}, '--ledger-entries needs an integer >= 1'],
  [[...SERVE, '--record-requests', 'Infinity'], {}, '--record-requests needs an integer >= 0'],
  [[...SERVE, '--tokenizer-cache-entries', '1.5'], {}, '--tokenizer-cache-entries needs an integer >= 0'],
  [[...SERVE, '--demo-max-races', '0'], {}, '--demo-max-races needs an integer >= 1'],
  // Node's own refusal of a fractional HTTP timeout did not name the flag.
  [[...SERVE, '--headers-timeout-ms', '1.5'], {}, '--headers-timeout-ms needs an integer >= 0'],
  [[...SERVE, '--max-connections', '1.5'], {}, '--max-connections needs an integer >= 1 (or Infinity)'],
  // At 0 every request was refused, the server started all the same; past a double, Infinity (atk70 F5, F4).
  [[...SERVE, '--max-json-keys', '0'], {}, "--max-json-keys needs an integer >= 1 (or Infinity), got '0'"],
  [[...SERVE, '--max-server-bytes', '0'], {}, '--max-server-bytes needs an integer >= 1'],
  [[...SERVE, '--max-tools', '1e309'], {}, "--max-tools needs an integer >= 0 (or Infinity), got '1e309'"],
  [[...SERVE, '--max-frame-bytes', '0x10'], {}, "--max-frame-bytes needs an integer >= 1 (or Infinity), got '0x10'"],
  [[...SERVE, '--max-queued-bytes= 5'], {}, "got ' 5'"],
  [[...SERVE, '--lifetime-ms', 'Infinity'], {}, '--lifetime-ms is at most 2147483647 ms'],
  [SERVE, { LLR_MAX_CONNECTIONS: '-1' }, "--max-connections needs an integer >= 1 (or Infinity), got '-1'"],
  [[...SERVE, '--max-file-store-responses', '1.5'], {}, "--max-file-store-responses needs an integer >= 0 (or Infinity), got '1.5'"],
  [[...SERVE, '--store-ttl-ms', '0'], {}, "--store-ttl-ms needs an integer >= 1 (or Infinity), got '0'"],
  [SERVE, { LLR_MAX_FILE_STORE_BYTES: '4GiB' }, "--max-file-store-bytes needs an integer >= 0 (or Infinity), got '4GiB'"],
  // An empty host listened on every interface, with the Host check off, then failed with 'Invalid URL' and kept serving.
  [[...SERVE, '--host='], {}, "--host needs a value, got ''"],
  // An empty store path opened a throw-away SQLite file.
  [['serve', '--port', '0', '--store='], {}, "--store needs a value, got ''"],
  // A key no request can present (the Bearer value is trimmed; an empty one is no key).
  [[...SERVE, '--api-key='], {}, '--api-key needs a value'],
  // A refused key is named by its place, never printed (an error line reaches terminals and CI logs).
  [SERVE, { LLR_API_KEYS: 'a, b' }, 'an API key (--api-key, LLR_API_KEYS, LLR_API_KEY) cannot be empty or start or end with whitespace (key 2 of 2, 2 characters; keys are not printed)'],
  // A key with a control character no Authorization header can carry (RFC 9110 §5.5): the server ran and refused
  // every client that had it, and the run's client failed at its first request ('Invalid character in header content').
  [[...SERVE, '--api-key', 'sk-a\nb'], {}, 'an API key (--api-key, LLR_API_KEYS, LLR_API_KEY) cannot contain control characters, as it travels in an HTTP header (key 1 of 1, 6 characters; keys are not printed)'],
  [SERVE, { LLR_API_KEYS: 'sk-a\u0001b' }, 'an API key (--api-key, LLR_API_KEYS, LLR_API_KEY) cannot contain control characters'],
  [['run', '--api-key', 'sk-a\u007fb', 'hi'], {}, 'an API key (--api-key, LLR_API_KEY) cannot contain control characters'],
  [[...SERVE, '--off', 'nope'], {}, "unknown switch 'nope'"],
  // Both: --on won whatever their order, unsaid.
  [[...SERVE, '--off', 'incremental_checks', '--on', 'incremental_checks'], {}, '--on incremental_checks and --off incremental_checks contradict each other'],
  // A switch's variable other than 1 or 0 was silently off: websockets served, the demo on, the model not instant.
  [SERVE, { LLR_NO_WEBSOCKETS: 'true' }, "LLR_NO_WEBSOCKETS needs 1 or 0, got 'true'"],
  [SERVE, { LLR_INSTANT: 'yes' }, "LLR_INSTANT needs 1 or 0, got 'yes'"],
  [SERVE, { LLR_NO_DEMO: 'on' }, "LLR_NO_DEMO needs 1 or 0, got 'on'"],
  [[...SERVE, '--policy', 'nope'], {}, "unknown policy 'nope'"],
  [[...SERVE, '--synthetic', '0,0,0'], {}, 'turns must be an integer >= 1'],
  [[...SERVE, '--chaos', 'stall@pause:0.2'], {}, "--chaos 'stall@pause:0.2': a stall needs a duration in ms"],
  // pino's refusal came after the logger's exit hook was registered, which then threw: a stack trace.
  [[...SERVE, '--log-level', 'nope'], {}, "unknown log level 'nope' (--log-level, LLR_LOG_LEVEL); known: trace, debug, info, warn, error, fatal, silent"],
  [SERVE, { LLR_LOG_LEVEL: 'verbose' }, "unknown log level 'verbose'"],
  // An empty LLR_LOG_LEVEL is unset, as every other LLR_ variable is (it was the level '': the same stack trace).
  [[...SERVE, '--off', 'nope'], { LLR_LOG_LEVEL: '' }, "unknown switch 'nope'"],
  // `memory` in other letters made a SQLite file of that name where an in-memory store was meant (outside attack atk39 F4).
  [['serve', '--port', '0', '--store', 'MEMORY'], {}, "--store 'MEMORY': the in-memory stores are 'memory' and ':memory:', in lower case; a file of that name is './MEMORY'"],
  // Outside attack atk43: a value too small for a double read as 0 (F3), a name with white space at an end made a file
  // under another name then failed (F1), LLR_STORE was not named (F2), a huge value was repeated whole (F4).
  [['serve', '--store', 'memory', '--port', '1e-400'], {}, "--port needs an integer >= 0 and <= 65535, got '1e-400'"],
  [[...SERVE, '--pause-timeout-ms', '0.5e-400'], {}, "--pause-timeout-ms needs an integer >= 0, got '0.5e-400'"],
  [['serve', '--port', '0', '--store', ' lead.db'], {}, "--store ' lead.db' begins or ends with white space"],
  [['serve', '--port', '0'], { LLR_STORE: 'MEMORY' }, "a file of that name is './MEMORY' (from LLR_STORE)"],
  [['serve', '--store', 'memory'], { LLR_PORT: '9'.repeat(5000) }, `--port needs an integer >= 0 and <= 65535, got '${'9'.repeat(100)}…' (from LLR_PORT)`],
  // A refused value is one safe line: an escape sequence in a variable reached the terminal as sent.
  [SERVE, { LLR_INSTANT: '\u001b]0;owned\u0007' }, "LLR_INSTANT needs 1 or 0, got '\\u{1b}]0;owned\\u{7}'"],
  [['bench', '--designs', 'x\ry'], {}, "unknown design 'x\\u{d}y'"],
  [['serve', '--port', '0'], { LLR_STORE: ':Memory:' }, "--store ':Memory:': the in-memory stores are 'memory' and ':memory:', in lower case"],
  [['bench', '--synthetic', '3,10,1000000000', '--speeds', '65'], {}, 'at 65 tokens/s one grid run takes at least 534 days'],
  [['run'], {}, 'llr run needs a prompt'],
  [['run', '--protocol', 'nope', 'hi'], {}, "unknown protocol 'nope'; known: long-lived, ws, http, http-stored, long-lived-http"],
  [['run', '--url', 'nope', 'hi'], {}, "--url needs an http:// URL, got 'nope'"],
  // A password or a query value is never printed (fetch refused such a URL with the password in its message; atk47 F6).
  [['run', '--url', 'http://u:sk-PW@localhost:1/?api_key=sk-Q', 'hi'], {}, "--url cannot hold a user name or password (the server takes an API key: --api-key), got 'http://***@localhost:1/?***'"],
  [['run', '--url', 'http://localhost:99999/?api_key=sk-Q#access_token=sk-F', 'hi'], {}, "--url needs an http:// URL, got 'http://localhost:99999/?***#***'"],
  [['run', '--url', 'ws://u:sk-PW@localhost:1/', 'hi'], {}, "--url needs an http:// URL, got 'ws://***@localhost:1/'"],
  [['serv\u001b[2Je'], {}, "unknown command 'serv\\u{1b}[2Je'"],
  [['run', '--model=', 'hi'], {}, "--model needs a value, got ''"],
  [['run', '--api-key=', 'hi'], {}, "--api-key needs a value, got ''"],
  [['run', '--idle-timeout-ms=-1', 'hi'], {}, "--idle-timeout-ms needs an integer >= 0 and <= 2147483647, got '-1'"],
  [['run', 'hi'], { LLR_IDLE_TIMEOUT_MS: '3e9' }, "--idle-timeout-ms needs an integer >= 0 and <= 2147483647, got '3e9' (from LLR_IDLE_TIMEOUT_MS)"],
  // A bad value from the environment names the variable (outside attack atk41 F4), for a limit flag and for the others.
  [['serve', '--port', '0'], { LLR_MAX_JSON_DEPTH: 'Infinity' }, "--max-json-depth needs an integer >= 1 and <= 1000, got 'Infinity' (from LLR_MAX_JSON_DEPTH)"],
  [['serve', '--store', 'memory'], { LLR_PORT: '70000' }, "--port needs an integer >= 0 and <= 65535, got '70000' (from LLR_PORT)"],
  [['bench', '--reps', '1.5'], {}, '--reps needs an integer >= 1'],
  // An empty value is refused as empty before it is read as a number (as serve's and run's flags).
  [['bench', '--hops='], {}, "--hops needs a value, got ''"],
  [['bench', '--run-timeout-ms', '3e9'], {}, '--run-timeout-ms needs a number >= 1 and <= 2147483647'],
  [['bench', '--designs', 'nope'], {}, "unknown design 'nope'"],
  [['bench', '--profile', 'nope'], {}, "unknown --profile 'nope'"],
  [['bench', '--nope'], {}, "Unknown option '--nope'"],
  [['workload', 'nope'], {}, "unknown workload command 'nope'; known: inspect, convert"],
  [['workload', 'inspect'], {}, 'llr workload inspect needs a FILE'],
  // A second file was ignored.
  [['workload', 'inspect', 'a.jsonl', 'b.jsonl'], {}, "llr workload inspect takes one FILE, got also 'b.jsonl'"],
  [['workload', 'convert', 'a.jsonl', 'b.json', 'c'], {}, "llr workload convert takes FILE [OUT], got also 'c'"],
];

describe('llr command lines', () => {
  it('a bad value or flag: its message naming the flag, exit status 2, no stack trace, nothing started', async () => {
    for (const [args, env, says] of BAD) {
      const r = await llr(args, env);
      const what = `llr ${args.join(' ')} ${JSON.stringify(env)}: ${r.stderr}`;
      expect(r.code, what).toBe(2);
      expect(r.stderr, what).toContain(says);
      expect(r.stderr, what).toMatch(/^llr: [^\n]*\n$/);
      expect(r.stderr, what).not.toMatch(/\n\s+at /);
      expect(r.stdout, what).toBe('');
    }
  }, 240_000);

  it('serve --help names --log-level (it was in neither the help nor the docs) and the exit status of a bad command line', async () => {
    const r = await llr(['serve', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('[--log-level trace|debug|info|warn|error|fatal|silent]');
    expect(r.stdout).toContain('A bad flag or value: one line on stderr, exit status 2');
  }, 30_000);

  it('serve takes API keys from LLR_API_KEY as well as LLR_API_KEYS (LLR_API_KEY was ignored: the server started with no key; atk64 F2)', async () => {
    for (const env of [{ LLR_API_KEY: 'sk-env-one' }, { LLR_API_KEYS: 'sk-env-one,sk-env-two' }] as Array<Record<string, string>>) {
      const child = await serveChild('memory', ['--no-demo'], undefined, env);
      try {
        expect((await fetch(`${child.url}/llr/stats`)).status, JSON.stringify(env)).toBe(401);
        const ok = await fetch(`${child.url}/llr/stats`, { headers: { Authorization: 'Bearer sk-env-one' } });
        expect(ok.status, JSON.stringify(env)).toBe(200);
      } finally {
        child.proc.kill('SIGKILL');
        await child.exited;
      }
    }
    const help = await llr(['serve', '--help']);
    expect(help.stdout).toContain('LLR_API_KEYS, LLR_ALLOW_ORIGINS, LLR_ALLOW_HOSTS, LLR_CHAOS');
  }, 30_000);

  it('a store that is not one of ours says which file, exit 1 (SQLite\'s message named none)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-store-'));
    const notes = join(dir, 'notes.txt');
    writeFileSync(notes, 'not a database, just some words that are long enough to be read as a header by SQLite\n'.repeat(10));
    const r = await llr(['serve', '--port', '0', '--store', notes]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`llr: cannot open the store '${notes}': file is not a database\n`);
    const r2 = await llr(['serve', '--port', '0', '--store', dir]);
    expect(r2.code, r2.stderr).toBe(1);
    expect(r2.stderr).toBe(`llr: cannot open the store '${dir}': unable to open database file\n`);
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  // Node 20's mkdirSync(path, {recursive: true}) never returns under /proc (it answers ENOENT and the call spins): the
  // server and the bench spun at full CPU, ignoring SIGTERM (the timeout's kill left code null). Linux has /proc.
  it('a store or bench output under a file system that makes no directory (/proc) is refused at once, exit 1', async () => {
    const r = await llr(['serve', '--port', '0', '--store', '/proc/nope/db.sqlite']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe("llr: cannot open the store '/proc/nope/db.sqlite': ENOENT: no such file or directory, mkdir '/proc/nope'\n");
    const b = await llr(['bench', '--quick', '--designs', 'http', '--out', '/proc/nope']);
    expect(b.code, b.stderr).toBe(1);
    expect(b.stderr).toContain("ENOENT: no such file or directory, mkdir '/proc/nope'");
  }, 40_000);

  // Bound, then the URL failed ('llr: Invalid URL') and the process stayed up serving (the timeout killed it: code null).
  const loopback6 = Object.values(networkInterfaces()).some((addrs) => addrs?.some((a) => a.address === '::1')) && networkInterfaces()['lo'] !== undefined;
  it.skipIf(!loopback6)('a host that binds but makes no URL (an IPv6 zone id) stops the server: exit 1, nothing left listening', async () => {
    const r = await llr([...SERVE, '--host', '::1%lo']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^llr: cannot serve on '::1%lo': http:\/\/\[::1%lo\]:\d+ is not a URL\n$/);
  }, 30_000);
});
