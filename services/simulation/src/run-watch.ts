import type { EventEmitter } from 'node:events';

/** What a runner in this process announces of a run: a step saved, or its end (or deletion). */
export interface RunEvent {
  type: 'step' | 'end';
}

/**
 * Waits on one run's events in this process. It listens from the moment it is made, so an event that
 * comes while its holder reads the run is not missed. A run executing on another replica announces
 * nothing here: every wait is bounded, and the holder reads the run again after it.
 */
export class RunWatch {
  private readonly events: EventEmitter;
  private readonly name: string;
  private readonly only: RunEvent['type'] | undefined;
  private readonly signal: AbortSignal | undefined;
  /** Whether an event came since the last `reset`. */
  private seen = false;
  private wake: (() => void) | undefined;
  private readonly listener = (event: RunEvent) => {
    if (!this.only || event.type === this.only) this.notice();
  };
  private readonly aborted = () => this.notice();

  constructor(events: EventEmitter, runId: string, options: { only?: RunEvent['type']; signal?: AbortSignal }) {
    this.events = events;
    this.name = `run:${runId}`;
    this.only = options.only;
    this.signal = options.signal;
    events.on(this.name, this.listener);
    this.signal?.addEventListener('abort', this.aborted);
  }

  /** Forgets the events so far: the next wait is for a new one. */
  reset(): void {
    this.seen = false;
  }

  /** Resolves at once when an event came since the last reset, else at the next event, on abort, or after `ms`. */
  async next(ms: number): Promise<void> {
    if (this.seen) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.wake?.(), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  close(): void {
    this.events.off(this.name, this.listener);
    this.signal?.removeEventListener('abort', this.aborted);
    this.wake?.();
  }

  private notice(): void {
    this.seen = true;
    this.wake?.();
  }
}
