/**
 * The scaling sweep's pure parts: the turn list, and the report and charts
 * built from a results object.
 */
import { describe, expect, it } from 'vitest';
import { parseTurns, scalingCharts, scalingMarkdown, type ScalingResults } from '../../src/bench/scaling.js';

const results: ScalingResults = {
  schema: 'llr-bench-scaling/1',
  options: { turns: [10, 20], toolOutputBytes: 100, outputTokensPerTurn: 50 },
  rows: [
    { turns: 10, design: 'long-lived', runs: 3, e2e_ms_median: 20, api_overhead_ms_median: 10, api_overhead_per_call_ms: 1, server_cpu_ms_median: 5, client_bytes_sent_median: 900 },
    { turns: 20, design: 'long-lived', runs: 3, e2e_ms_median: 40, api_overhead_ms_median: 20, api_overhead_per_call_ms: 1, server_cpu_ms_median: 9, client_bytes_sent_median: 1800 },
    { turns: 10, design: 'http', runs: 3, e2e_ms_median: 50, api_overhead_ms_median: 40, api_overhead_per_call_ms: 4, server_cpu_ms_median: 30, client_bytes_sent_median: 9000 },
    { turns: 20, design: 'http', runs: 3, e2e_ms_median: 160, api_overhead_ms_median: 150, api_overhead_per_call_ms: 7.5, residual_ms_median: 8.25, server_cpu_ms_median: 99, client_bytes_sent_median: 36000 },
  ],
  failures: [{ turns: 30, error: 'server crashed' }],
};

describe('scaling sweep', () => {
  it('parses a turn list and refuses nonsense', () => {
    expect(parseTurns('10, 50,200')).toEqual([10, 50, 200]);
    expect(() => parseTurns('10,x')).toThrow(/turn counts/);
    expect(() => parseTurns('1')).toThrow(RangeError);
  });

  it('draws one line per design with a point per turn count', () => {
    const { perCall, total } = scalingCharts(results);
    for (const svg of [perCall, total]) {
      expect(svg.startsWith('<svg')).toBe(true);
      expect(svg.match(/<path /g)).toHaveLength(2);
      expect(svg).toContain('long-lived');
      expect(svg).toContain('http');
    }
  });

  it('tabulates every row and lists failures', () => {
    const md = scalingMarkdown(results);
    expect(md).toContain('| 20 | http | 3 | 160 | 150.0 | 7.50 | 8.3 | 99 | 36000 |');
    // A row from a file written before the residual existed says so instead of inventing one.
    expect(md).toContain('| 10 | http | 3 | 50 | 40.0 | 4.00 | – | 30 | 9000 |');
    expect(md).not.toMatch(/what is measured is the API alone/);
    expect(md).toContain('30 turns failed: server crashed');
  });
});
