const LF = 0x0a;
const CR = 0x0d;
/** The start of a line that is kept: enough for `event: error` or `event: done`; longer names are neither. */
const KEPT = 16;

/**
 * Watches a Server-Sent Events stream as it passes through, for the event that ends it: a generation
 * stream ends with `done` (the scene: delivered) or `error`. Nothing of the stream is kept but the first
 * bytes of the current line and the current event's name, so a stream of any length costs a few dozen
 * bytes. Events are read as the HTML standard's parser reads them (lines end in CRLF, LF or CR; an event
 * is dispatched at a blank line, and only when it had a `data` field), so the outcome is what an
 * EventSource client saw.
 */
export class EventStreamWatch {
  /** The last of `done` and `error` dispatched; undefined while neither was. */
  outcome: 'done' | 'error' | undefined;
  private line = '';
  private lineLength = 0;
  private afterCR = false;
  private eventName = '';
  private hasData = false;

  feed(chunk: Buffer): void {
    let i = 0;
    // A CR that ended the last chunk and an LF that starts this one are one line break.
    if (this.afterCR && chunk[0] === LF) i = 1;
    this.afterCR = false;
    // The next LF and CR from the cursor, each searched for again only once the cursor has passed it.
    let lf = chunk.indexOf(LF, i);
    let cr = chunk.indexOf(CR, i);
    while (i < chunk.length) {
      if (lf >= 0 && lf < i) lf = chunk.indexOf(LF, i);
      if (cr >= 0 && cr < i) cr = chunk.indexOf(CR, i);
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      if (end < 0) {
        this.keep(chunk, i, chunk.length);
        return;
      }
      this.keep(chunk, i, end);
      this.endLine();
      i = end + 1;
      if (chunk[end] === CR) {
        if (i === chunk.length) this.afterCR = true;
        else if (chunk[i] === LF) i += 1;
      }
    }
  }

  private keep(chunk: Buffer, from: number, to: number): void {
    if (this.lineLength < KEPT) this.line += chunk.toString('latin1', from, Math.min(to, from + KEPT - this.lineLength));
    this.lineLength += to - from;
  }

  private endLine(): void {
    const { line, lineLength } = this;
    this.line = '';
    this.lineLength = 0;
    if (lineLength === 0) {
      if (this.hasData && (this.eventName === 'done' || this.eventName === 'error')) this.outcome = this.eventName;
      this.eventName = '';
      this.hasData = false;
    } else if (line === 'data' || line.startsWith('data:')) {
      this.hasData = true;
    } else if (line === 'event' || line.startsWith('event:')) {
      const value = line.slice(6);
      // A name longer than what is kept is neither `done` nor `error`.
      this.eventName = lineLength > KEPT ? '' : value.startsWith(' ') ? value.slice(1) : value;
    }
  }
}
