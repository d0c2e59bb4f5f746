import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** How long the condition has to come true (default 20 s). */
  timeoutMs?: number;
  /** The pause between two looks (default 50 ms). */
  intervalMs?: number;
  /** Whether an error a look threw means the condition can never come true (a process it needs exited): the wait ends with it at once. */
  fatal?: (error: unknown) => boolean;
}

/**
 * Looks at `condition` until it answers something other than undefined, null or false, and returns that.
 * A look that throws counts as "not yet" (a server still starting, a row not there), and the last error is
 * named when the wait runs out, beside `what` was waited for: tests wait on conditions, never on the clock.
 */
export async function waitFor<T>(
  what: string,
  condition: () => T | Promise<T>,
  { timeoutMs = 20_000, intervalMs = 50, fatal = () => false }: WaitOptions = {},
): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
      lastError = undefined;
    } catch (error) {
      if (fatal(error)) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last look threw: ${String(lastError)})` : ''}`);
    await sleep(intervalMs);
  }
}
