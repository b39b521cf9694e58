/** The retry advice each HTTP refusal carries (`retryHeaders`): the SDKs read `x-should-retry`, `retry-after-ms`, `retry-after`. */
import { describe, expect, it } from 'vitest';
import { WireError, retryHeaders, type WireErrorCode } from '../../src/protocol/errors.js';

describe('retryHeaders', () => {
  it('a refusal of load says come back in a second; nothing ran', () => {
    const load: WireErrorCode[] = ['queue_full', 'too_many_live_runs', 'too_many_background_runs', 'too_many_listings', 'server_busy', 'store_unavailable', 'too_many_connections'];
    for (const code of load) expect(retryHeaders(new WireError(code)), code).toEqual({ 'Retry-After': '1', 'Retry-After-Ms': '1000' });
  });

  it('a 409 response_running_elsewhere says do not retry; a client error carries no advice', () => {
    expect(retryHeaders(new WireError('response_running_elsewhere'))).toEqual({ 'x-should-retry': 'false' });
    for (const code of ['invalid_value', 'response_not_found', 'invalid_api_key', 'server_error'] as const) expect(retryHeaders(new WireError(code)), code).toEqual({});
  });
});
