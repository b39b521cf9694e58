/**
 * The chaos scenarios' names, and which designs each applies to. Its own
 * module so the scenarios (which suite.ts imports) can ask without importing
 * the suite.
 */
import { DESIGNS, PROTOCOLS, type DesignTraits, type Protocol } from '../protocol/designs.js';

export const SCENARIOS = ['fuzz', 'disconnect', 'slow-reader', 'concurrency', 'signals'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/**
 * Which designs each scenario applies to, by their shape in the designs table (protocol/designs.ts `DESIGNS`), never
 * by name: each scenario runs `designsFor` itself, so a new design is covered by every scenario that applies to it
 * (before, the scenarios but fuzz named the designs they ran, and a new one was in none of them). The chaos test
 * checks that every design each applies to was sent inputs.
 */
const APPLIES: { readonly [S in ScenarioName]: (d: DesignTraits) => boolean } = {
  fuzz: () => true,
  // Every state a run can be left in: planning, streaming, queued (a WebSocket), paused and mid-append (a design that pauses).
  disconnect: () => true,
  // A reader that stops reading its stream: a WebSocket or an SSE response.
  'slow-reader': () => true,
  // Many runs in flight at once, each an agent loop paused and resumed at every tool call.
  concurrency: (d) => d.pauses,
  // SIGTERM with runs streaming or paused, SIGKILL with store:true runs completing.
  signals: () => true,
};

/** The designs a scenario exercises, in the table's order. */
export function designsFor(scenario: ScenarioName): Protocol[] {
  return PROTOCOLS.filter((p) => APPLIES[scenario](DESIGNS[p]));
}
