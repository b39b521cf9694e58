/**
 * History a rollout wrote twice. A resumed Codex session can write the
 * history it resumed from into its rollout again, item for item, before its
 * new turns (openai/codex#29531: files of gigabytes made of repeated
 * history). Read as new records, the copy replayed the whole conversation a
 * second time, or the file was refused at its first repeated call
 * ("call_id … is used twice").
 *
 * Here a run of `response_item` records that repeats, record for record (the
 * payload byte for byte; the timestamp may differ), a run of earlier ones is
 * held until it ends. It is the copy, skipped with one note, when it holds
 * proof: a record only a model call or a tool writes once (an item with a
 * `call_id`, or reasoning with an `encrypted_content` of 64 characters or
 * more, unique to the model call that made it). Otherwise the held records are read as usual, in order: a
 * user who sends the same words again is not a copy. `event_msg` and
 * `turn_context` records inside a run go with it (a copy of every record
 * kind repeats them too); any other record ends the run.
 *
 * Used by the rollout reader (codex.ts). Leaves out a copy that is not byte
 * for byte (another serialisation of the same items, or items a compaction
 * rewrote): such records are read as new, as before. Bounded: at most
 * `MAX_STARTS` earlier places are followed per run, and a digest (48 bits of
 * SHA-1) is kept per `response_item`, not the record.
 */
import { createHash } from 'node:crypto';

/** A record as read: its line and the parsed value. */
export interface LineRecord {
  line: number;
  rec: unknown;
}

/** A run skipped as a copy: its lines, its response items, and the lines of the history it repeats. */
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
 * The shortest `encrypted_content` taken as proof: the API's sealed reasoning is hundreds of characters or more; a
 * placeholder a hand-made or converted file repeats in every item ("e", "…") proves nothing.
 */
const MIN_SEALED = 64;

/** `{"timestamp":"…",` as Codex writes a record's head (serde's field order): the rest of the line is the record. */
const HEAD = /^\{"timestamp":"[^"\\]*",/;

/**
 * What a run without proof may hold before it is read as usual (records, and characters of their lines): the file's
 * text is in memory already, but a parsed record takes several times its line, so a million identical records held
 * at once would take gigabytes. A copy with proof holds only the `event_msg` / `turn_context` records since its last
 * repeated item, under the same bound.
 */
export const MAX_HELD_RECORDS = 10_000;
export const MAX_HELD_CHARS = 32 * 1024 * 1024;

interface Run {
  /** Each candidate start: `digests[start + k]` matched the run's k-th item. */
  starts: number[];
  items: number;
  /** Proven a copy: its items are skipped as they come, and `held` keeps only the records since the last one. */
  proof: boolean;
  held: Array<LineRecord & { digest?: number }>;
  heldChars: number;
  from: number;
  /** The line of the last repeated item, and the records skipped up to it. */
  to: number;
  skipped: number;
}

export class HistoryRepeats {
  /** Digest of each `response_item` read (not those skipped as a copy), in order, and its line. */
  private readonly digests: number[] = [];
  private readonly lines: number[] = [];
  /**
   * Digest → where it was read (an index into `digests`, or several: at most MAX_STARTS, the first half and the
   * latest): one number for a record read once, as nearly every record is.
   */
  private readonly places = new Map<number, number | number[]>();
  private run: Run | null = null;

  constructor(
    /** Read a record now (in file order). */
    private readonly read: (r: LineRecord) => void,
    /** A run was skipped as a copy. */
    private readonly skipped: (run: RepeatedRun) => void,
  ) {}

  /** One record of the file, `raw` its line's text. */
  push(line: number, rec: unknown, raw: string): void {
    const kind = kindOf(rec);
    const run = this.run;
    if (run !== null) {
      if (kind === 'side') {
        this.hold(run, { line, rec }, raw.length);
        return;
      }
      if (kind === 'item') {
        const digest = digestOf(raw, rec);
        const k = run.items;
        const next = run.starts.filter((s) => this.digests[s + k] === digest);
        if (next.length > 0) {
          run.starts = next;
          run.items++;
          this.hold(run, { line, rec, digest }, raw.length);
          if (!run.proof && proves(rec)) run.proof = true;
          if (run.proof) {
            // Proven: everything held so far is the copy.
            run.skipped += run.held.length;
            run.to = line;
            run.held = [];
            run.heldChars = 0;
          }
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
    if (at === undefined) {
      this.readItem({ line, rec }, digest);
      return;
    }
    const proof = proves(rec);
    this.run = {
      starts: typeof at === 'number' ? [at] : at.slice(),
      items: 1,
      proof,
      held: proof ? [] : [{ line, rec, digest }],
      heldChars: proof ? 0 : raw.length,
      from: line,
      to: line,
      skipped: proof ? 1 : 0,
    };
  }

  /** The end of the file: a run under way is settled. */
  finish(): void {
    if (this.run !== null) this.end();
  }

  private hold(run: Run, r: LineRecord & { digest?: number }, chars: number): void {
    run.held.push(r);
    run.heldChars += chars;
    if (run.held.length > MAX_HELD_RECORDS || run.heldChars > MAX_HELD_CHARS) this.end();
  }

  /** Settle the run: a copy is noted and what it held since its last item read; a run without proof is read whole. */
  private end(): void {
    const run = this.run!;
    this.run = null;
    if (run.proof) {
      const first = run.starts[0]!;
      // The copy ends at its last repeated item: the records after it (a new turn's turn_context, its user's message
      // as an event) are the session's own.
      // (A proven run holds no item: each is skipped as it comes.)
      this.skipped({ from: run.from, to: run.to, items: run.items, records: run.skipped, copyOf: { from: this.lines[first]!, to: this.lines[first + run.items - 1]! } });
    }
    for (const h of run.held) {
      if (h.digest !== undefined) this.readItem(h, h.digest);
      else this.read(h);
    }
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
  if (type === 'response_item') return 'item';
  return type === 'event_msg' || type === 'turn_context' ? 'side' : 'other';
}

/** A record written once per model call or tool: a repeat of it is a copy. */
function proves(rec: unknown): boolean {
  const p = (rec as { payload: Record<string, unknown> }).payload;
  if (typeof p['call_id'] === 'string' && p['call_id'] !== '') return true;
  return p['type'] === 'reasoning' && typeof p['encrypted_content'] === 'string' && p['encrypted_content'].length >= MIN_SEALED;
}

/** 48 bits of the SHA-1 of the record without its timestamp (the line after Codex's head, else type and payload as JSON). */
function digestOf(raw: string, rec: unknown): number {
  const head = HEAD.exec(raw);
  const { type, payload } = rec as { type: unknown; payload: unknown };
  const body = head !== null ? raw.slice(head[0].length) : JSON.stringify([type, payload]);
  return createHash('sha1').update(body).digest().readUIntBE(0, 6);
}
