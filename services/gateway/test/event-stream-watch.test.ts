import assert from 'node:assert/strict';
import { EventStreamWatch } from '../src/proxy/event-stream-watch.ts';

/** The watch's outcome for a stream fed in the given pieces. */
function outcomeOf(pieces: Array<string | Buffer>): EventStreamWatch['outcome'] {
  const watch = new EventStreamWatch();
  for (const piece of pieces) watch.feed(Buffer.isBuffer(piece) ? piece : Buffer.from(piece));
  return watch.outcome;
}

/** Every way of cutting `text`'s bytes in two, and byte by byte. */
function splits(text: string): Buffer[][] {
  const bytes = Buffer.from(text);
  const ways = [[bytes], [...bytes].map((byte) => Buffer.from([byte]))];
  for (let at = 1; at < bytes.length; at += 1) ways.push([bytes.subarray(0, at), bytes.subarray(at)]);
  return ways;
}

describe('gateway: watching an event stream for its end', () => {
  const generation = (end: string, newline = '\n') =>
    [
      ': heartbeat',
      'id: 1',
      'event: start',
      'data: {"query":"x"}',
      '',
      'id: 2',
      'event: agent',
      `data: {"agent":"Judge","text":"${'é'.repeat(300)}"}`,
      '',
      ...end.split('\n'),
      '',
    ].join(newline);

  for (const [name, newline] of [
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ] as const) {
    it(`reads done and error events however the stream is cut (${name} line ends)`, () => {
      const done = generation('id: 3\nevent: done\ndata: {"id":"s"}\n', newline);
      const error = generation('id: 3\nevent: error\ndata: {"status":422}\n', newline);
      for (const pieces of splits(done)) assert.equal(outcomeOf(pieces), 'done', JSON.stringify(pieces.map((p) => p.length)));
      for (const pieces of splits(error)) assert.equal(outcomeOf(pieces), 'error');
    });
  }

  it('counts only dispatched events: no terminal event, one not ended by a blank line, or one without data is no outcome', () => {
    assert.equal(outcomeOf([generation('id: 3\nevent: agent\ndata: {}\n')]), undefined);
    assert.equal(outcomeOf(['event: done\ndata: {}\n']), undefined, 'cut off before its blank line');
    assert.equal(outcomeOf(['event: done\n\n']), undefined, 'without data an EventSource dispatches nothing');
    assert.equal(outcomeOf(['event: done\ndata\n\n']), 'done', 'an empty data field is data');
  });

  it('reads the event name as the standard does', () => {
    assert.equal(outcomeOf(['event:done\ndata: {}\n\n']), 'done', 'the space after the colon is optional');
    assert.equal(outcomeOf(['event:  done\ndata: {}\n\n']), undefined, 'only one space is removed');
    assert.equal(outcomeOf(['event: done-ish\ndata: {}\n\n']), undefined);
    assert.equal(outcomeOf([`event: done${'x'.repeat(100)}\ndata: {}\n\n`]), undefined, 'a long name is not done');
    assert.equal(outcomeOf([': event: done\ndata: {}\n\n']), undefined, 'a comment is not a field');
    assert.equal(outcomeOf(['event: done\ndata: {}\n\nevent: error\ndata: {}\n\n']), 'error', 'the last terminal event decides');
  });

  it('passes data lines of any length without keeping them', () => {
    const watch = new EventStreamWatch();
    watch.feed(Buffer.from('event: done\ndata: '));
    const chunk = Buffer.alloc(1024 * 1024, 'a');
    for (let i = 0; i < 8; i += 1) watch.feed(chunk);
    watch.feed(Buffer.from('\n\n'));
    assert.equal(watch.outcome, 'done');
  });
});
