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

export class HistoryRepeats {
  /** Digest of each `response_item` read (not those skipped as a copy), in order, and its line. */
  private readonly digests: number[] = [];
  private readonly lines: number[] = [];
  /** Digest → where it was read (indices into `digests`), at most MAX_STARTS: the first half and the latest. */
  private readonly places = new Map<number, number[]>();
  /** The run held, its candidate starts (each `digests[start + k]` matched the k-th item held) and its items' digests. */
  private held: Array<LineRecord & { digest?: number }> = [];
  private starts: number[] = [];
  private items = 0;
  private proof = false;

  constructor(
    /** Read a record now (in file order). */
    private readonly read: (r: LineRecord) => void,
    /** A run was skipped as a copy. */
    private readonly skipped: (run: RepeatedRun) => void,
  ) {}

  /** One record of the file, `raw` its line's text. */
  push(line: number, rec: unknown, raw: string): void {
    const kind = kindOf(rec);
    if (this.held.length > 0) {
      if (kind === 'side') {
        this.held.push({ line, rec });
        return;
      }
      if (kind === 'item') {
        const digest = digestOf(raw, rec);
        const k = this.items;
        const next = this.starts.filter((s) => this.digests[s + k] === digest);
        if (next.length > 0) {
          this.starts = next;
          this.items++;
          this.proof ||= proves(rec);
          this.held.push({ line, rec, digest });
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
    this.starts = at.slice();
    this.items = 1;
    this.proof = proves(rec);
    this.held = [{ line, rec, digest }];
  }

  /** The end of the file: a run held to the end is settled. */
  finish(): void {
    if (this.held.length > 0) this.end();
  }

  /** Settle the run held: skipped as a copy with proof, else read in order. */
  private end(): void {
    const held = this.held;
    const first = this.starts[0]!;
    this.held = [];
    this.starts = [];
    if (this.proof) {
      // The copy ends at its last repeated item: the records held after it (a new turn's turn_context, its user's
      // message as an event) are the session's own, read as usual.
      let last = held.length - 1;
      while (held[last]!.digest === undefined) last--;
      this.skipped({
        from: held[0]!.line,
        to: held[last]!.line,
        items: this.items,
        records: last + 1,
        copyOf: { from: this.lines[first]!, to: this.lines[first + this.items - 1]! },
      });
      for (let i = last + 1; i < held.length; i++) this.read(held[i]!);
      return;
    }
    for (const h of held) {
      if (h.digest === undefined) this.read(h);
      else this.readItem(h, h.digest);
    }
  }

  private readItem(r: LineRecord, digest: number): void {
    const i = this.digests.length;
    this.digests.push(digest);
    this.lines.push(r.line);
    const at = this.places.get(digest);
    if (at === undefined) this.places.set(digest, [i]);
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
