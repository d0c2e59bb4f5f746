/** One server-sent event as a test reads it: its id (when sent), name and JSON data. */
export interface SentEvent<T = any> {
  id: number | undefined;
  event: string;
  data: T;
}

/** The events of an event-stream body, in order; comments (heartbeats) and blocks without an event name left out. */
export function parseEvents<T = any>(text: string): SentEvent<T>[] {
  return text
    .split('\n\n')
    .filter((block) => block.includes('event: '))
    .map((block) => {
      const id = /^id: (.*)$/m.exec(block)?.[1];
      return {
        id: id === undefined ? undefined : Number(id),
        event: /^event: (.*)$/m.exec(block)![1]!,
        data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as T,
      };
    });
}
