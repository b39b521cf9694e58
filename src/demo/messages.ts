/**
 * What a demo race streams to the page, one SSE frame per message
 * (`event: <type>` + one-line JSON `data:`). The page draws only these: the
 * server's run records (as `response`) and what the lane's client saw on the
 * wire (as `wire`), plus the driver's own clock readings (send times, tool
 * time, step-gate waits). Types only.
 */
import type { RunRecord } from '../engine/records.js';

export type LaneState = 'idle' | 'running' | 'done' | 'failed';

export interface RaceMessage {
  type: 'race';
  race_id: string;
  designs: Array<{ id: string; label: string; model: string; continues_with: string; keeps: string }>;
  workload: { label: string; tools_note: string; model_calls: number | null };
  speed: string;
  tool_time: 'none' | 'recorded';
  step: boolean;
  order: 'together' | 'one-by-one';
  /** The stream carries a comment at least this often, ms: the page gives the race up after three with nothing at all. */
  alive_ms: number;
}

export interface LaneStateMessage {
  type: 'lane.state';
  design: string;
  state: LaneState;
  error?: string;
}

/** One wire event as the lane's client saw it; consecutive deltas are one entry with a count. */
export interface WireMessage {
  type: 'wire';
  design: string;
  /** ms since the race started, on the driver's clock. */
  t_ms: number;
  dir: 'in' | 'out';
  event: string;
  detail: string;
  count: number;
}

/** A response as the server recorded it, and when the client sent the request that created it. */
export interface ResponseMessage {
  type: 'response';
  design: string;
  sent_at_ms: number;
  final: boolean;
  record: RunRecord;
}

export interface ProgressMessage {
  type: 'progress';
  design: string;
  t_ms: number;
  bytes_sent: number;
  bytes_received: number;
  tool_calls_answered: number;
}

/** A stretch a lane spent waiting for the presenter's "next step" (cut from the timeline and its times). */
export interface GateMessage {
  type: 'gate';
  design: string;
  from_ms: number;
  to_ms: number;
}

export interface StepMessage {
  type: 'step';
  /** Model calls each lane may have started. */
  allowed: number;
  /** Lanes waiting for the next step. */
  waiting: string[];
}

export interface LaneDoneMessage {
  type: 'lane.done';
  design: string;
  /** First request sent → the run resolved, step-gate waits left out. */
  e2e_ms: number;
  gate_ms: number;
  /** The client's tool time (recorded durations when tool time is "as recorded"). */
  tool_ms: number;
  /** The server's prefill + decode spans. */
  model_ms: number;
  /** e2e − model − tools: the time the API and the wire added. */
  api_overhead_ms: number;
  /** The server's own stage totals (validate, render, safety, route, billing, persist, …), summed. */
  stage_ms: Record<string, number>;
  responses: number;
  bytes_sent: number;
  bytes_received: number;
}

export interface RaceDoneMessage {
  type: 'race.done';
  race_id: string;
  status: 'done' | 'failed' | 'stopped';
}

export type DemoMessage =
  | RaceMessage
  | LaneStateMessage
  | WireMessage
  | ResponseMessage
  | ProgressMessage
  | GateMessage
  | StepMessage
  | LaneDoneMessage
  | RaceDoneMessage;
