import { defineConfig } from 'vitest/config';

// Integration tests bind real sockets and some spawn real clients (Codex CLI),
// so they get generous timeouts; none of them waits on a sleep.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
