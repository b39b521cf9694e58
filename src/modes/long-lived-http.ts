/**
 * The fourth design, `long-lived-http`: the long-lived Response over plain
 * HTTP. Is the prototype's gain the live state or the socket? This design
 * keeps the state and drops the socket: `POST /v1/responses?protocol=long-lived`
 * (`stream:true`) opens one SSE stream for the whole run, each client tool
 * call pauses it with the same `response.done` as on the WebSocket, and
 * `POST /v1/responses/{id}/append` resumes the same stream.
 *
 * The planning is the WebSocket long-lived policy's (`longLivedPolicy`): the
 * same full checks once per run, the same incremental checks per append
 * (`ResponseRun.append`), post-inference work once at the end. What this file
 * adds is what a socket gave for free: finding the run again by id. `LiveRuns`
 * keeps the runs open over HTTP in a map, bounded by `maxLiveHttpRuns`
 * (429 `too_many_live_runs` past it), each entry removed when its run ends;
 * only the key that created a run may append to or cancel it (another key
 * gets the same 404 as a missing run). Each create is a one-shot session
 * (modes/host.ts) like an HTTP baseline request: closing the stream ends
 * the run as a disconnect does, and shutdown ends it `incomplete`, through
 * the session.
 */
import { WireError } from '../protocol/errors.js';
import type { InputItem, Response } from '../protocol/objects.js';
import type { ParseSpan, ResponseRun } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import type { ModePolicy, SessionInfo } from './session.js';
import { longLivedPolicy } from './long-lived.js';
import type { Hold, ServerBytes } from './server-bytes.js';

export function longLivedHttpPolicy(services: Services, info: SessionInfo, live: LiveRuns): ModePolicy {
  // No connection: the run outlives none (its record says `connection: null`, as HTTP's do).
  const ws = longLivedPolicy(services, { ...info, connection: null });
  // This create's place under the cap from its planning until its run starts (or it never does): `LiveRuns.reserve`.
  let slot: (() => void) | null = null;
  return {
    protocol: 'long-lived-http',
    appendable: true,
    async plan(params, metrics, lane, signal) {
      if (!params.stream) {
        throw new WireError(
          'invalid_value',
          "The long-lived protocol over HTTP streams the whole run on one SSE stream: set 'stream': true.",
          'stream',
        );
      }
      if (params.background) {
        throw new WireError(
          'invalid_value',
          "The long-lived protocol over HTTP does not run in the background: its run lives on its SSE stream and pauses for the client's tool outputs. Leave out 'background', or create a background response without ?protocol=long-lived.",
          'background',
        );
      }
      // The cap is checked before planning (a refused create costs no tokenizing) and covers creates being planned,
      // and planned but not yet started: one waiting for the send total to have room (modes/send-bytes.ts) held no
      // slot, and 11 runs were live under a cap of 3 (outside attack atk53 F1). The slot is the run's once it starts.
      slot = live.reserve();
      try {
        return { ...(await ws.plan(params, metrics, lane, signal)), protocol: 'long-lived-http', connection: null };
      } catch (err) {
        slot();
        slot = null;
        throw err;
      }
    },
    started(run) {
      live.add(run, info.owner);
      slot?.();
      slot = null;
    },
    settled() {
      slot?.();
      slot = null;
    },
  };
}

interface Live {
  run: ResponseRun;
  owner: string | null;
  /** The bodies of the appends the run took, charged to the server-wide budget until it ends (made at the first). */
  held: Hold | null;
  /** Appends for it being read, parsed or applied (`arriving`): any of them may resume it. */
  arriving: number;
  /** When its client's last append was refused `server_busy` while it was paused (`waitedForRoom`): the bytes it needed; else 0. */
  roomWanted: number;
}

/** The long-lived runs open over HTTP, by response id. */
export class LiveRuns {
  private readonly live = new Map<string, Live>();
  /** Creates admitted whose runs have not started (planning, or waiting to start): they count against the cap. */
  private inPlanning = 0;

  constructor(
    private readonly services: Services,
    private readonly bytes?: ServerBytes,
  ) {}

  get size(): number {
    return this.live.size;
  }

  /**
   * A place under the cap (`maxLiveHttpRuns`, counting the runs and the creates admitted whose runs have not started)
   * for a create about to be planned, or 429 `too_many_live_runs`; the function returned gives it back (once, then
   * nothing): when its run has been added (`add`), or when it never starts.
   */
  reserve(): () => void {
    const cap = this.services.limits.maxLiveHttpRuns;
    if (this.live.size + this.inPlanning >= cap) {
      throw new WireError('too_many_live_runs', `At most ${cap} long-lived runs may be open over HTTP at once; try again when one ends.`);
    }
    this.inPlanning++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.inPlanning--;
    };
  }

  /**
   * A run that started: found by id until it ends, which it does at the
   * latest after `--lifetime-ms`, the bound a WebSocket long-lived run has
   * through its connection (`incomplete`, `connection_limit_reached`). Nothing
   * else bounded its time: a client appending within every pause timeout kept
   * the run, its SSE connection and its slot for ever (outside attack). A
   * lifetime past what a Node timer holds (2^31-1 ms) is no limit, as there.
   */
  add(run: ResponseRun, owner: string | null): void {
    const entry: Live = { run, owner, held: null, arriving: 0, roomWanted: 0 };
    this.live.set(run.id, entry);
    const ms = this.services.limits.connectionLifetimeMs;
    const lifetime = ms > 2 ** 31 - 1 ? undefined : setTimeout(() => run.stop('incomplete', 'connection_limit_reached'), ms);
    void run.done.finally(() => {
      clearTimeout(lifetime);
      this.live.delete(run.id);
      entry.held?.releaseAll();
      entry.held = null;
    });
  }

  /** The live run `id` created by `owner`; another key's run is reported exactly like a missing one. */
  private entry(id: string, owner: string | null): Live {
    const entry = this.live.get(id);
    if (!entry || entry.owner !== owner) {
      throw new WireError('response_not_found', `No long-lived response '${id.slice(0, 100)}' is open over HTTP.`, 'response_id');
    }
    return entry;
  }

  private get(id: string, owner: string | null): ResponseRun {
    return this.entry(id, owner).run;
  }

  /**
   * Append tool outputs to a paused run: the WebSocket protocol's checks and errors. `body`: the request's share
   * of the byte budget, its body charged; once the run has taken the append that charge moves to the run until
   * it ends (`body` is then empty), as a WebSocket long-lived run holds its append frames while it lives. It was
   * released once the body was read, so the context an HTTP run grew by appends was never counted (outside
   * attack: 512 runs could hold 16 GiB past a 256 MiB budget). A run's appends are charged up to its own
   * budgets (`--max-context-bytes` + `--max-frame-bytes`), as a WebSocket connection's frames are.
   */
  async append(id: string, owner: string | null, input: InputItem[], parse: ParseSpan | null = null, body?: Hold): Promise<readonly string[] | null> {
    const entry = this.entry(id, owner);
    const run = entry.run;
    if (!run.paused) {
      // A retry of an append the run already took (its 202 lost) while the run streams on: a duplicate, not a mistake.
      const held = run.heldAlready(input);
      if (held !== null) return held;
      throw new WireError('no_paused_response', `Response '${run.id}' is not paused; there is nothing to append to.`);
    }
    const duplicate = await run.append(input, parse);
    entry.roomWanted = 0;
    if (duplicate !== null || !body || !this.bytes || body.bytes === 0) return duplicate;
    const { maxContextBytes, maxFrameBytes } = this.services.limits;
    // A run that has ended meanwhile keeps nothing (its entry's hold was released, or never made).
    if (this.live.get(id) !== entry) return null;
    const held = (entry.held ??= this.bytes.hold());
    const moved = Math.max(0, Math.min(body.bytes, maxContextBytes + maxFrameBytes - held.bytes));
    // The charge moves in one step: released from the request, admitted (unchecked: it was admitted then) here.
    body.releaseAll();
    held.admitted(moved);
    return null;
  }

  /**
   * What the paused runs' taken appends hold of the budget (`SessionHost.heldForPeers`: only their clients free it),
   * but for runs with an append arriving or being applied, which may resume them.
   */
  heldForPeers(): number {
    let n = 0;
    for (const entry of this.live.values()) if (entry.run.paused && entry.arriving === 0) n += entry.held?.bytes ?? 0;
    return n;
  }

  /**
   * An append for `owner`'s run `id` is being read, parsed or applied: counted (`appendsArriving`) until the function
   * returned is called (once, then nothing). Nothing is counted for an id that is not `owner`'s open run: another
   * key's request for it cannot append to it (counted, it kept its owner's stuck run from ending; outside attack
   * atk83 F2).
   */
  arriving(id: string, owner: string | null): () => void {
    const entry = this.live.get(id);
    if (!entry || entry.owner !== owner) return () => {};
    entry.arriving++;
    let counted = true;
    return () => {
      if (!counted) return;
      counted = false;
      entry.arriving--;
    };
  }

  /**
   * `owner`'s paused run `id` had its client's append of `bytes` (what it needed at least) refused `server_busy`, told to
   * try again: it waits for room, as a WebSocket run whose append arriving cannot be charged does
   * (`SessionHost.stuckMessagesHoldPausedRun`), until an append is taken; 0: refused for good, it waits for nothing.
   */
  waitedForRoom(id: string, owner: string | null, bytes: number): void {
    const entry = this.live.get(id);
    if (entry && entry.owner === owner && entry.run.paused) entry.roomWanted = bytes;
  }

  /** Whether an append for a run paused here is being read, parsed or applied (`arriving`). */
  appendArriving(): boolean {
    for (const entry of this.live.values()) if (entry.arriving > 0 && entry.run.paused && !entry.run.ended) return true;
    return false;
  }

  /** Whether a run paused here had its client's last append refused for room (`waitedForRoom`). */
  waitsForRoom(): boolean {
    return !this.roomWanted()[Symbol.iterator]().next().done;
  }

  /** The room each run paused here lacks whose client's last append was refused for room (`waitedForRoom`). */
  *roomWanted(): Iterable<number> {
    for (const entry of this.live.values()) if (entry.roomWanted > 0 && entry.run.paused && !entry.run.ended) yield entry.roomWanted;
  }

  /** How many appends for `owner`'s run `id` are being read, parsed or applied (`arriving`). */
  appendsArriving(id: string, owner: string | null): number {
    const entry = this.live.get(id);
    return entry && entry.owner === owner ? entry.arriving : 0;
  }

  /** Whether `owner`'s run `id` is open here and paused for its client. */
  paused(id: string, owner: string | null): boolean {
    const entry = this.live.get(id);
    return entry !== undefined && entry.owner === owner && entry.run.paused && !entry.run.ended;
  }

  /**
   * Ends `owner`'s paused run `id` `incomplete` for `err` (said in its stream first; `llr_incomplete_reason`
   * `reason`): its append could not fit the budget that paused runs hold (`SessionHost.endStuckLiveRun`). False
   * when there is no such paused run.
   */
  endPaused(id: string, owner: string | null, err: WireError, reason: string): boolean {
    const entry = this.live.get(id);
    if (!entry || entry.owner !== owner || !entry.run.paused || entry.run.ended) return false;
    entry.run.emitError(err);
    entry.run.stop('incomplete', reason);
    return true;
  }

  /** End a run `cancelled`; resolves with its final Response once its terminal event was sent. */
  cancel(id: string, owner: string | null): Promise<Response> {
    const run = this.get(id, owner);
    run.stop('cancelled', 'cancelled_by_client');
    return run.done;
  }
}
