/**
 * Codex rollout shapes the main fixtures do not cover (test/fixtures/workloads/shapes/, see its README: built from
 * the record shapes of the public Codex source): each reads, converts to a neutral file that reads back the same,
 * and replays to the end through every design, the model making exactly the recorded calls.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { replayRun } from '../../src/bench/replay.js';
import { CLIENT_PROTOCOLS } from '../../src/client/index.js';
import { replayPolicy, visibleTokens } from '../../src/model/policies.js';
import { loadWorkloadFile, parseWorkload } from '../../src/workload/load.js';
import { flatModelTurns } from '../../src/workload/replayable.js';
import { testServer } from '../helpers/server.js';

const DIR = fileURLToPath(new URL('../fixtures/workloads/shapes/', import.meta.url));
const FILES = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();

describe('Codex rollout shapes beyond the main fixtures', () => {
  it('a view_image output (text and image parts) is its text and a marker, not the image as base64 text', () => {
    const w = loadWorkloadFile(DIR + 'rollout-exec-view-image.jsonl');
    expect(w.toolOutputs['call_vi_1']?.output).toBe('shot.png:[input_image: not replayed]');
    expect(w.skipped).toContainEqual({ line: 4, what: '1 part(s) of function_call_output call_vi_1', why: expect.stringMatching(/^not text \(an image or file\)/) });
    // The image counts as the server counts an image part (85 tokens), in the message and in the output alike:
    // read as its JSON, the 32 KB data URL was inferred as ~21,000 input tokens.
    const [first, second] = w.calls!;
    expect(second!.input_tokens - first!.input_tokens).toBeLessThan(200);
  });

  it('an event-only user message keeps its images (event_msg user_message `images`)', () => {
    const w = loadWorkloadFile(DIR + 'rollout-desktop-event-image.jsonl');
    const [msg] = w.userTurns[0]!.input as Array<{ content: Array<{ type: string; image_url?: string }> }>;
    expect(msg!.content.map((p) => p.type)).toEqual(['input_text', 'input_image']);
    expect(msg!.content[1]!.image_url).toMatch(/^data:image\/png;base64,CQkJ/);
  });

  it('a compaction inside a user turn is not noted as one the replay continues from', () => {
    // rollout-compacted.jsonl: the compacted record at line 20 comes between a tool output and the model's next call.
    const w = loadWorkloadFile(fileURLToPath(new URL('../fixtures/workloads/rollout-compacted.jsonl', import.meta.url)));
    const notes = (w.skipped ?? []).filter((s) => s.line === 20);
    expect(notes).toEqual([{ line: 20, what: 'a compacted record without replacement_history', why: expect.stringMatching(/inside a user turn: the replay keeps the full history/) }]);
  });

  it('a second session in the file starts a new conversation (it began from an empty context)', () => {
    const w = loadWorkloadFile(DIR + 'rollout-two-sessions.jsonl');
    expect(w.userTurns).toHaveLength(2);
    expect(w.userTurns[1]!.replace_history).toBe(true);
    // The replay anchor (the first session's final answer), then the second session's own message: nothing more.
    expect(w.userTurns[1]!.input.map((i) => (i as { role?: string }).role)).toEqual(['assistant', 'user']);
  });

  it("a compaction's replacement history keeps a user message's image", () => {
    const w = loadWorkloadFile(DIR + 'rollout-compacted-image.jsonl');
    expect(w.userTurns[1]!.replace_history).toBe(true);
    const parts = w.userTurns[1]!.input.flatMap((i) => ((i as { content?: unknown }).content instanceof Array ? ((i as { content: Array<{ type: string }> }).content) : []));
    // The kept message (text and screenshot), then the user's next message (its own text part).
    expect(parts.map((p) => p.type)).toEqual(['input_text', 'input_image', 'input_text']);
  });

  it("a generated image (image_generation_call result) is not inferred as its base64 text", () => {
    const w = loadWorkloadFile(DIR + 'rollout-exec-image-generation.jsonl');
    // 40,000 base64 characters: about 40,000 input tokens more at the second call before.
    const [first, second] = w.calls!;
    expect(second!.input_tokens - first!.input_tokens).toBeLessThan(200);
  });

  it("a compaction without replacement_history keeps the user's messages, not the context Codex injected as user messages", () => {
    const w = loadWorkloadFile(DIR + 'rollout-compacted-prefix.jsonl');
    const texts = w.userTurns[1]!.input.map((i) => JSON.stringify((i as { content?: unknown }).content));
    expect(texts.some((t) => t.includes('<environment_context>') || t.includes('<user_instructions>'))).toBe(false);
    expect(texts.some((t) => t.includes('Rename getUser to fetchUser.'))).toBe(true);
  });

  it("the API's built-in client tools (shell, apply_patch, computer use) are client calls, each its own model call (atk84 F6)", () => {
    // Read as hosted calls, the four recorded model calls replayed as one and their outputs were in no later context.
    const w = loadWorkloadFile(DIR + 'rollout-builtin-client-tools.jsonl');
    expect(w.calls).toHaveLength(4);
    expect(w.stats).toMatchObject({ function_calls: 3, hosted_calls: 0 });
    const calls = flatModelTurns(w).flatMap((t) => t.output.filter((o) => o.type === 'function_call'));
    expect(calls.map((c) => (c as { name: string }).name)).toEqual(['shell', 'apply_patch', 'computer']);
    expect(JSON.parse((calls[1] as { arguments: string }).arguments)).toMatchObject({ type: 'update_file', path: 'a.txt' });
    expect(JSON.parse(w.toolOutputs['call_sh1']!.output)).toEqual([expect.objectContaining({ stdout: 'a.txt\n' }), expect.objectContaining({ stdout: 'hello\n' })]);
    expect(w.toolOutputs['call_ap1']!.output).toBe('Updated a.txt');
    expect(w.toolOutputs['call_cu1']!.output).toBe('[computer_screenshot: not replayed]');
    expect(w.skipped).toEqual([{ line: 12, what: 'the computer_screenshot of computer_call_output call_cu1', why: expect.stringMatching(/^an image/) }]);
  });

  for (const file of FILES) {
    it(`${file} converts to a neutral file that reads back the same`, () => {
      const w = loadWorkloadFile(DIR + file);
      const again = parseWorkload(JSON.stringify({ llr_workload: 1, ...w }), file, w.source);
      expect(again.userTurns).toEqual(w.userTurns);
      expect(again.toolOutputs).toEqual(w.toolOutputs);
    });
    for (const design of CLIENT_PROTOCOLS) {
      it(`${file} replays over ${design}`, async () => {
        const w = loadWorkloadFile(DIR + file);
        const turns = flatModelTurns(w);
        const { url } = await testServer({ policy: replayPolicy(turns) });
        const begun: string[] = [];
        const onCall = (call: number, total: number) => begun.push(`${call}/${total}`);
        const sample = await replayRun({ design, url, workload: w, nonce: `[${file} ${design}]`, toolFactor: 0, timeoutMs: 20_000, onCall });
        expect(sample.turns).toHaveLength(turns.length);
        // The bench's progress within a step: each model call told once, in order (atk99 I1).
        expect(begun).toEqual(turns.map((_, i) => `${i + 1}/${turns.length}`));
        const expected = turns.reduce((n, t) => n + Math.max(t.output_tokens ?? 0, visibleTokens(t.output)), 0);
        expect(sample.counters['output_tokens']).toBe(expected);
      });
    }
  }
});
