/**
 * `llr run`, the example agent, as a person runs it (the built CLI against a
 * test server): when the server refuses the run mid-way (a command printed
 * what looks like a credential, so the append or the next create is refused
 * with `content_flagged`), it prints the error and exits 1 on every design,
 * instead of hanging (long-lived: the client ignored the error and waited on
 * the paused run; ws: the open socket kept the process alive).
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, CLI } from '../helpers/build.js';
import { testServer } from '../helpers/server.js';
import { scriptPolicy } from '../../src/model/policies.js';

const run = promisify(execFile);

beforeAll(async () => {
  await buildDist();
}, 120_000);

describe('llr run', () => {
  // A hostile or broken server's text went to the terminal as sent: an escape sequence retitled the window, set the
  // clipboard (OSC 52) or cleared the screen, a carriage return or a bidi override made a line read as another.
  it("prints the server's text with control characters and bidi overrides escaped, its line breaks kept", async () => {
    const text = 'line one\nclear\u001b[2J title\u001b]0;pwned\u0007 clip\u001b]52;c;aGk=\u0007 back\rover \u202eevil\u202c end';
    const { url } = await testServer({ policy: scriptPolicy([{ text }]) });
    const { stdout } = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', 'long-lived', 'say it'], { timeout: 20_000 });
    expect(stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(stdout).toContain('line one\nclear\\u{1b}[2J title\\u{1b}]0;pwned\\u{7} clip\\u{1b}]52;c;aGk=\\u{7} back\\u{d}over \\u{202e}evil\\u{202c} end');
  }, 30_000);

  it("prints the run's usage and server time, every response's added up, so the designs compare (ws and http printed the last response's; atk63 F2)", async () => {
    for (const protocol of ['long-lived', 'ws', 'http']) {
      const { url } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'exec_command', arguments: { cmd: 'echo one' } }] }, { calls: [{ name: 'exec_command', arguments: { cmd: 'echo two' } }] }, { text: 'done' }]) });
      const { stdout } = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, 'go'], { timeout: 20_000 });
      const printed = JSON.parse(/usage, all of them (\{.*?\}) · server total/.exec(stdout)?.[1] ?? 'null') as Record<string, number>;
      const records = ((await (await fetch(`${url}/llr/runs?limit=100`)).json()) as { data: Array<{ usage: Record<string, number> }> }).data;
      expect(records.length, protocol).toBe(protocol === 'long-lived' ? 1 : 3);
      for (const key of ['input_tokens', 'output_tokens', 'total_tokens']) {
        expect(printed[key], `${protocol} ${key}`).toBe(records.reduce((n, r) => n + r.usage[key]!, 0));
      }
      expect(stdout, protocol).toContain(`${records.length} response(s)`);
    }
  }, 60_000);

  it('the same task costs the same tokens in every design and on every run (call ids drawn from the conversation; atk63 F4)', async () => {
    const { url } = await testServer();
    const usage: string[] = [];
    for (const protocol of ['long-lived', 'ws', 'http', 'long-lived-http', 'http-stored', 'ws']) {
      const { stdout } = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, 'check\n$ echo one\n$ echo two'], { timeout: 20_000 });
      const u = JSON.parse(/usage, all of them (\{.*?\}) · server total/.exec(stdout)?.[1] ?? 'null') as { input_tokens: number; output_tokens: number };
      expect(stdout, protocol).toContain('$ echo two');
      usage.push(`${u.input_tokens}/${u.output_tokens}`);
    }
    expect(new Set(usage)).toEqual(new Set([usage[0]]));
  }, 60_000);

  it('runs nothing for a call of a tool it did not offer, or of exec_command without a string cmd: each answered with the reason (it ran `bash -c undefined`; atk57 F4)', async () => {
    const server = () => testServer({
      policy: scriptPolicy([
        { calls: [{ name: 'shell', arguments: { command: ['bash', '-lc', 'echo old'] } }] },
        { calls: [{ name: 'exec_command', arguments: '"echo raw-not-json"' }] },
        { calls: [{ name: 'exec_command', arguments: 'not json' }] },
        { calls: [{ name: 'exec_command', arguments: { cmd: `echo ${'A'.repeat(200_000)} | wc -c` } }] },
        { calls: [{ name: 'exec_command', arguments: { cmd: 'echo ran-it' } }] },
        { text: 'done' },
      ]),
    });
    // A server each: the script is played once. Over http the model's calls go back as input, arguments that are not
    // JSON among them: taken, as the API takes them (they were refused, atk63 F1).
    for (const protocol of ['long-lived', 'ws', 'http']) {
      const { url } = await server();
      const { stdout } = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, 'go'], { timeout: 20_000 });
      expect(stdout).not.toContain('undefined');
      expect(stdout).toContain('[not run: unsupported call: shell (this client offers only exec_command)]');
      // Each right under its own call's header (a refusal came out before it, under the call before; atk60).
      expect(stdout).toMatch(/\[model calls shell [^\n]*\]\n\[not run: unsupported call: shell/);
      expect(stdout).toMatch(/\[model calls exec_command not json\]\n\[not run: exec_command: its arguments are not JSON/);
      expect(stdout).toMatch(/\[model calls exec_command \{"cmd":"echo ran-it"\}\]\n\$ echo ran-it\n/);
      expect(stdout).toContain('[not run: exec_command: its arguments have no string `cmd`');
      expect(stdout).toContain('[not run: exec_command: its arguments are not JSON');
      // A command line past the kernel's 128 KiB per argument starts no process: said (it printed nothing; atk59).
      expect(stdout).toContain('(could not start: spawn E2BIG)');
      // The one call it can run runs (its output printed once it is done, after the pause line).
      expect(stdout).toContain('\n$ echo ran-it\n');
      expect(stdout).toMatch(/\nran-it\n/);
      expect(stdout).toMatch(/\[completed · /);
    }
  }, 60_000);

  for (const protocol of ['long-lived', 'ws', 'http', 'long-lived-http']) {
    it(`${protocol}: a refused tool output ends the agent with the error, exit 1`, async () => {
      const { url } = await testServer();
      // The prompt itself holds no credential; the command's output does.
      const prompt = "Check\n$ echo AKIA''ABCDEFGHIJKLMNOP";
      const err = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, prompt], { timeout: 20_000 }).then(
        () => null,
        (e: unknown) => e as { code: number | null; killed: boolean; stderr: string },
      );
      expect(err).not.toBeNull();
      expect(err!.killed).toBe(false);
      expect(err!.code).toBe(1);
      expect(err!.stderr).toContain('content_flagged');
    }, 30_000);
  }

  for (const protocol of ['long-lived', 'long-lived-http']) {
    it(`${protocol}: a response that ends failed prints why and exits 1 (it exited 0)`, async () => {
      // Two parallel commands past a limit of one pending call: the run ends failed (too_many_pending_calls, said as the
      // API's closed error codes allow: server_error with the message).
      const { url } = await testServer({ limits: { maxPendingCalls: 1 } });
      const err = await run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, 'Please run these:\n$ echo a\n$ echo b'], { timeout: 20_000 }).then(
        () => null,
        (e: unknown) => e as { code: number | null; killed: boolean; stdout: string; stderr: string },
      );
      expect(err).not.toBeNull();
      expect(err!.killed).toBe(false);
      expect(err!.code).toBe(1);
      expect(err!.stdout).toContain('[failed ·');
      expect(err!.stderr).toContain('llr: the response ended failed (server_error: The model made more tool calls than one pause may wait for (limit 1).)');
    }, 30_000);
  }

  // A server that refused the connection said only 'fetch failed'; an HTML error page (a proxy's 502) said
  // JSON.parse's "Unexpected token '<'": now the cause, and the status with the page's start.
  for (const protocol of ['http', 'http-stored']) {
    it(`${protocol}: a refused connection or an HTML error page is said plainly, exit 1`, async () => {
      const page = createServer((_req, res) => {
        res.writeHead(502, { 'Content-Type': 'text/html' });
        res.end('<html>bad gateway</html>');
      });
      await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
      const pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
      // A port nobody listens on: one just closed.
      const gone = createServer();
      await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
      const goneUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
      await new Promise((resolve) => gone.close(resolve));
      try {
        const failed = (url: string) =>
          run(process.execPath, [CLI, 'run', '--url', url, '--protocol', protocol, 'hi'], { timeout: 20_000 }).then(
            () => null,
            (e: unknown) => e as { code: number | null; stderr: string },
          );
        const html = await failed(pageUrl);
        expect(html?.code).toBe(1);
        expect(html?.stderr).toBe('llr: http_502: <html>bad gateway</html>\n');
        const refused = await failed(goneUrl);
        expect(refused?.code).toBe(1);
        expect(refused?.stderr).toBe(`llr: fetch failed: connect ECONNREFUSED ${goneUrl.slice('http://'.length)}\n`);
      } finally {
        page.close();
      }
    }, 30_000);
  }
});
