import type { Logger } from '@tempora/kit/observability';
import { BudgetExhausted } from './budget.ts';

/**
 * Runs `runOnce` again and again: at once while it finds work, after `pollMs` when it found none, and
 * not before the next UTC day once the budget is spent. Stopping lets the current run finish for up to a
 * grace period, then aborts its signal.
 */
export class PollingLoop {
  private readonly name: string;
  private readonly runOnce: (signal: AbortSignal) => Promise<number>;
  private readonly pollMs: number;
  private readonly logger: Logger;
  private readonly abort = new AbortController();
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(name: string, runOnce: (signal: AbortSignal) => Promise<number>, pollMs: number, logger: Logger) {
    this.name = name;
    this.runOnce = runOnce;
    this.pollMs = pollMs;
    this.logger = logger;
  }

  start(): void {
    this.loop ??= this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let wait = 0;
      try {
        if ((await this.runOnce(this.abort.signal)) === 0) wait = this.pollMs;
      } catch (error) {
        if (error instanceof BudgetExhausted) {
          wait = error.until.getTime() - Date.now();
          this.logger.warn({ until: error.until }, `${this.name}: daily budget spent; paused until the next UTC day`);
        } else if (!this.stopping) {
          wait = this.pollMs;
          this.logger.error({ err: error }, `${this.name} run failed`);
        }
      }
      if (wait > 0 && !this.stopping) await this.sleep(wait);
    }
  }

  /** Ends the current sleep: there may be work (a renderer slot freed). */
  wake(): void {
    this.wakeUp?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // setTimeout overflows past 2^31 ms; a long pause is taken in steps.
      const timer = setTimeout(resolve, Math.min(ms, 2 ** 31 - 1));
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    const timer = setTimeout(() => this.abort.abort(new Error(`${this.name} stopping`)), graceMs);
    await this.loop;
    clearTimeout(timer);
  }
}
