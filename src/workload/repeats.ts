/**
 * History a rollout wrote twice. A resumed Codex session can write the
 * history it resumed from into its rollout again, item for item, before its
 * new turns (openai/codex#29531: files of gigabytes made of repeated
 * history). Read as new records, the copy replayed the whole conversation a
 * second time, or the file was refused at its first repeated call
 * ("call_id … is used twice").
 *
 * Here a run of items (`response_item` and `compacted` records) that
 * repeats, record for record (the payload byte for byte; the timestamp and
 * an `ordinal` may differ), a run of earlier ones is held while it goes on.
 * The rules, each from a shape a copy has and a session of its own does not:
 * - A run starts only at an input message (user, developer or system), as
 *   a copy of a conversation's history does: a repeated call, output,
 *   answer or reasoning alone starts none (a hand-made file reusing a
 *   call_id is still refused for it; redacted reasoning is read).
 * - It is the copy once it holds proof: an item only one model call or
 *   tool writes, read once before: an item with a `call_id`, or two
 *   reasoning items with different `encrypted_content` of 64 characters or
 *   more (a placeholder every item repeats, as a redacted rollout has,
 *   proves nothing). Without proof the held records are read as usual (a
 *   user saying the same words again, answered the same).
 * - A proven copy is skipped as it comes, up to its last item that is not
 *   an input message: input messages at its end (and the `event_msg` /
 *   `turn_context` records among them) are the session's new turn, read as
 *   usual, though they repeat the history (a user asking again what they
 *   asked after the part copied).
 * - `event_msg` and `turn_context` records inside a run go with it; any
 *   other record ends it. A new session in the file (`reset`) starts an
 *   index of its own.
 *
 * Used by the rollout reader (codex.ts); the copy is noted there. Leaves
 * out a copy that is not byte for byte (another serialisation of the same
 * items, or items a compaction rewrote): such records are read as new, as
 * before. Bounded: at most `MAX_STARTS` earlier places are followed per run,
 * a run without proof is read as usual past `MAX_HELD_RECORDS` records or
 * `MAX_HELD_CHARS` characters of lines, and a digest (48 bits of SHA-1) is
 * kept per item, not the record.
 */
import { createHash } from 'node:crypto';

/** A record as read: its line and the parsed value. */
export interface LineRecord {
  line: number;
  rec: unknown;
}

/** A run skipped as a copy: its lines, its items, the records skipped, and the lines of the history it repeats. */
export interface RepeatedRun {
  from: number;
  to: number;
  items: number;
  records: number;
  copyOf: { from: number; to: number };
}

/** Earlier places a run may repeat, followed at once (the first ones and the latest kept). */
export const MAX_STARTS = 64;

/**
 * What a run may hold before it is read as usual (records, and characters of their lines): the file's text is in
 * memory already, but a parsed record takes several times its line. A proven copy holds only the input messages and
 * side records since its last other item, under the same bound.
 */
export const MAX_HELD_RECORDS = 100_000;
export const MAX_HELD_CHARS = 256 * 1024 * 1024;

/**
 * The shortest `encrypted_content` taken as proof: the API's sealed reasoning is hundreds of characters or more; a
 * short placeholder ("e", "…") proves nothing.
 */
const MIN_SEALED = 64;

/** A record's head as Codex writes it (serde's field order): `{"timestamp":"…",` and an `ordinal`, in either order. */
const HEAD = /^\{(?:"(?:timestamp":"[^"\\]*"|ordinal":\d+),)+/;

type Held = LineRecord & { digest?: number; chars: number };

interface Run {
  /** Each candidate start: `digests[start + k]` matched the run's k-th item. */
  starts: number[];
  items: number;
  proof: boolean;
  /** Records not yet decided: all of them before proof; after it, those since the last item skipped. */
  held: Held[];
  heldChars: number;
  from: number;
  /** The line of the last item skipped, and the items and records skipped so far. */
  to: number;
  skippedItems: number;
  skippedRecords: number;
  /** The first sealed reasoning the run matched (its digest): a second, another, proves the copy. */
  sealed?: number;
}

export class HistoryRepeats {
  /** Digest of each item read (not those skipped as a copy), in order, and its line. */
  private digests: number[] = [];
  private lines: number[] = [];
  /**
   * Digest → where it was read (an index into `digests`, or several: at most MAX_STARTS, the first half and the
   * latest): one number for a record read once, as nearly every record is.
   */
  private places = new Map<number, number | number[]>();
  private run: Run | null = null;

  constructor(
    /** Read a record now (in file order). */
    private readonly read: (r: LineRecord) => void,
    /** A run was skipped as a copy. */
    private readonly skipped: (run: RepeatedRun) => void,
  ) {}

  /** A new session in the file: its copies repeat its own records only. Call between records (from `read`). */
  reset(): void {
    this.digests = [];
    this.lines = [];
    this.places = new Map();
  }

  /** One record of the file, `raw` its line's text. */
  push(line: number, rec: unknown, raw: string): void {
    const kind = kindOf(rec);
    const run = this.run;
    if (run !== null) {
      if (kind === 'side') {
        this.hold(run, { line, rec, chars: raw.length });
        return;
      }
      if (kind === 'item') {
        const digest = digestOf(raw, rec);
        const k = run.items;
        const next = run.starts.filter((s) => this.digests[s + k] === digest);
        if (next.length > 0) {
          run.starts = next;
          run.items++;
          if (!run.proof && this.proves(run, rec, digest)) run.proof = true;
          const held: Held = { line, rec, digest, chars: raw.length };
          if (run.proof && !isInput(rec)) {
            // Everything held so far is the copy, and this item with it.
            run.skippedItems += run.held.filter((h) => h.digest !== undefined).length + 1;
            run.skippedRecords += run.held.length + 1;
            run.to = line;
            run.held = [];
            run.heldChars = 0;
            return;
          }
          this.hold(run, held);
          return;
        }
        this.end();
        this.push(line, rec, raw);
        return;
      }
      this.end();
    }
    if (kind !== 'item') {
      this.read({ line, rec });
      return;
    }
    const digest = digestOf(raw, rec);
    const at = this.places.get(digest);
    // A copy of a conversation's history starts at an input message.
    if (at === undefined || !isInput(rec)) {
      this.readItem({ line, rec }, digest);
      return;
    }
    this.run = {
      starts: typeof at === 'number' ? [at] : at.slice(),
      items: 1,
      proof: false,
      held: [{ line, rec, digest, chars: raw.length }],
      heldChars: raw.length,
      from: line,
      to: line,
      skippedItems: 0,
      skippedRecords: 0,
    };
  }

  /** The end of the file: a run under way is settled. */
  finish(): void {
    if (this.run !== null) this.end();
  }

  private hold(run: Run, h: Held): void {
    run.held.push(h);
    run.heldChars += h.chars;
    if (run.held.length > MAX_HELD_RECORDS || run.heldChars > MAX_HELD_CHARS) this.end();
  }

  /** Settle the run: a copy is noted; what is held (all of a run without proof; a copy's trailing input) is read. */
  private end(): void {
    const run = this.run!;
    this.run = null;
    if (run.skippedItems > 0) {
      const first = run.starts[0]!;
      this.skipped({
        from: run.from,
        to: run.to,
        items: run.skippedItems,
        records: run.skippedRecords,
        copyOf: { from: this.lines[first]!, to: this.lines[first + run.skippedItems - 1]! },
      });
    }
    for (const h of run.held) {
      if (h.digest !== undefined) this.readItem(h, h.digest);
      else this.read(h);
    }
  }

  /**
   * An item only one model call or tool writes, read once before: its repeat is a copy. A call or an output (its
   * call_id) proves it at once; sealed reasoning only a second time, with another value (a redacted rollout repeats
   * one placeholder in every item, and a user's repeated question may meet it once).
   */
  private proves(run: Run, rec: unknown, digest: number): boolean {
    if (typeof this.places.get(digest) !== 'number') return false;
    const p = (rec as { payload: Record<string, unknown> }).payload;
    if (typeof p['call_id'] === 'string' && p['call_id'] !== '') return true;
    if (p['type'] !== 'reasoning' || typeof p['encrypted_content'] !== 'string' || p['encrypted_content'].length < MIN_SEALED) return false;
    if (run.sealed === undefined || run.sealed === digest) {
      run.sealed = digest;
      return false;
    }
    return true;
  }

  private readItem(r: LineRecord, digest: number): void {
    const i = this.digests.length;
    this.digests.push(digest);
    this.lines.push(r.line);
    const at = this.places.get(digest);
    if (at === undefined) this.places.set(digest, i);
    else if (typeof at === 'number') this.places.set(digest, [at, i]);
    else if (at.length < MAX_STARTS) at.push(i);
    else at[MAX_STARTS / 2 + (i % (MAX_STARTS / 2))] = i; // the first half kept, the rest the latest (in no order)
    this.read(r);
  }
}

function kindOf(rec: unknown): 'item' | 'side' | 'other' {
  if (typeof rec !== 'object' || rec === null) return 'other';
  const { type, payload } = rec as { type?: unknown; payload?: unknown };
  if (typeof payload !== 'object' || payload === null) return 'other';
  if (type === 'response_item' || type === 'compacted') return 'item';
  return type === 'event_msg' || type === 'turn_context' ? 'side' : 'other';
}

/** A user, developer or system message: the input a turn starts with. */
function isInput(rec: unknown): boolean {
  const { type, payload } = rec as { type: unknown; payload: Record<string, unknown> };
  return type === 'response_item' && payload['type'] === 'message' && (payload['role'] === 'user' || payload['role'] === 'developer' || payload['role'] === 'system');
}

/** 48 bits of the SHA-1 of the record without its head (Codex's `timestamp` and `ordinal`), else of type and payload as JSON. */
function digestOf(raw: string, rec: unknown): number {
  const head = HEAD.exec(raw);
  const { type, payload } = rec as { type: unknown; payload: unknown };
  const body = head !== null && raw.startsWith('"type":', head[0].length) ? raw.slice(head[0].length) : JSON.stringify([type, payload]);
  return createHash('sha1').update(body).digest().readUIntBE(0, 6);
}
