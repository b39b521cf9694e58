/**
 * Runs the real Codex CLI against a test server: writes a throw-away
 * CODEX_HOME with the provider config for the chosen protocol, runs
 * `codex exec --json` with stdin closed, and returns its exit code and its
 * JSON event lines. The binaries are installed by `.ci/install-codex` (which
 * `.ci/run` calls) into `.cache/codex-<version>`; a missing one fails the
 * test with that instruction rather than skipping it.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));

export type CodexWire = 'http' | 'ws' | 'long-lived';

export function codexBinary(version: string): string {
  const bin = join(repo, '.cache', `codex-${version}`, 'node_modules', '.bin', 'codex');
  if (!existsSync(bin)) throw new Error(`Codex CLI ${version} is not installed: run .ci/install-codex ${version}`);
  return bin;
}

/**
 * How `codexExec` sets Codex up: `provider: 'openai'` uses Codex's built-in OpenAI provider pointed at the server
 * (`openai_base_url`, the key in `CODEX_API_KEY`), which turns on what Codex does only for OpenAI (remote
 * compaction, WebSocket mode by default; `wire` is then not read); `config` adds top-level lines.
 */
export interface CodexOptions {
  provider?: 'lab' | 'openai';
  config?: string;
  /**
   * The model slug (default `sim-model`). A slug Codex knows (0.107: `gpt-5-codex`; 0.169 and 0.171: `gpt-5.5`) makes
   * it declare `apply_patch` as a custom tool; for an unknown one it declares none.
   */
  model?: string;
  /** Called with Codex's working directory after the run, before it is removed. */
  workspace?: (dir: string) => void;
}

/** What both configurations say: no prompts, no sandbox, no update check, no unstable-feature warning. */
const UNATTENDED = `approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
suppress_unstable_features_warning = true`;

/** The features that reach for the network or the desktop, off (the table's header included). */
const FEATURES_OFF = `[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
in_app_updates = false`;

function openaiConfig(port: number, extra: string, model: string): string {
  return `model = "${model}"
openai_base_url = "http://127.0.0.1:${port}/v1"
${UNATTENDED}
allow_login_shell = false
${extra}

${FEATURES_OFF}

[analytics]
enabled = false
`;
}

function config(port: number, wire: CodexWire, extra: string, model: string): string {
  // Commands in a plain shell, as the openai provider's: a login shell reads the host's profile, and a stale pyenv
  // rehash lock there held every command 60 s, past the tests' timeouts.
  return `model = "${model}"
model_provider = "lab"
${UNATTENDED}
allow_login_shell = false
${extra}

${FEATURES_OFF}
${wire === 'long-lived' ? 'responses_websockets = true' : ''}

[model_providers.lab]
name = "lab"
base_url = "http://127.0.0.1:${port}/v1"
env_key = "LAB_API_KEY"
wire_api = "responses"
${wire === 'http' ? '' : 'supports_websockets = true'}
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 15000

[analytics]
enabled = false
`;
}

export interface CodexResult {
  code: number | null;
  events: Array<Record<string, unknown>>;
  stdout: string;
  stderr: string;
}

export async function codexExec(version: string, port: number, wire: CodexWire, prompt: string, opts: CodexOptions = {}): Promise<CodexResult> {
  const bin = codexBinary(version);
  const home = mkdtempSync(join(tmpdir(), 'llr-codex-home-'));
  const work = mkdtempSync(join(tmpdir(), 'llr-codex-work-'));
  const openai = opts.provider === 'openai';
  const model = opts.model ?? 'sim-model';
  writeFileSync(join(home, 'config.toml'), openai ? openaiConfig(port, opts.config ?? '', model) : config(port, wire, opts.config ?? '', model));
  const env: NodeJS.ProcessEnv = { ...process.env, CODEX_HOME: home, LAB_API_KEY: 'test-key' };
  if (openai) {
    // The built-in provider reads these too: only the config's base URL and this key may reach Codex.
    delete env['OPENAI_BASE_URL'];
    delete env['OPENAI_API_KEY'];
    env['CODEX_API_KEY'] = 'test-key';
  }
  try {
    const child = spawn(bin, ['exec', '--skip-git-repo-check', '--json', prompt], {
      cwd: work,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
    const events = stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    opts.workspace?.(work);
    return { code, events, stdout, stderr };
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** The `item` payloads of `item.completed` events of a type. */
export function completedItems(r: CodexResult, type: string): Array<Record<string, unknown>> {
  return r.events
    .filter((e) => e['type'] === 'item.completed')
    .map((e) => e['item'] as Record<string, unknown>)
    .filter((i) => i['type'] === type);
}
