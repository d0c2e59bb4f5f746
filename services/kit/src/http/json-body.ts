import type { IncomingMessage } from 'node:http';
import type { Context, Middleware } from 'koa';
import { sizeInBytes } from '../runtime/config.ts';
import { Problem } from './errors.ts';
import { bodyDigest } from './priced-call.ts';

/** Objects and arrays nested deeper than this are refused: no route takes more, and each level costs whoever walks the value. */
export const JSON_MAX_DEPTH = 64;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const refused = (detail: string) => new Problem(400, detail);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** An object or array still open: an object's keys so far and its last one, or an array's current index. */
interface Frame {
  keys: Set<string> | undefined;
  key: string;
  index: number;
}

/** `$.a.b[1]`: the object that holds a duplicate, in the JSONPath notation a client can look up. */
function pathOf(frames: Frame[]): string {
  let path = '$';
  for (const frame of frames.slice(0, -1)) {
    if (!frame.keys) path += `[${frame.index}]`;
    else path += /^[A-Za-z_$][\w$]*$/.test(frame.key) ? `.${frame.key}` : `[${JSON.stringify(frame.key)}]`;
  }
  return path;
}

/**
 * One pass over the text for what JSON.parse does not refuse: nesting past JSON_MAX_DEPTH and duplicate
 * keys. It only follows strings and brackets, trusting JSON.parse (run after it) to refuse any text that
 * is not JSON, so on such text it may stop at either rule first, never wrongly on valid JSON. A loop with
 * its own stack, so no depth of input reaches the call stack. jsonc-parser's visitor was measured for this
 * and left: about three times as slow as JSON.parse itself on a typical 1 KB body, where this is on a par.
 */
function scan(text: string): void {
  const frames: Frame[] = [];
  let expectingKey = false;
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (code === QUOTE) {
      const start = at + 1;
      let escaped = false;
      for (at = start; at < text.length; at += 1) {
        const inner = text.charCodeAt(at);
        if (inner === QUOTE) break;
        if (inner === BACKSLASH) {
          escaped = true;
          at += 1;
        }
      }
      if (!expectingKey) continue;
      expectingKey = false;
      let key = text.slice(start, at);
      if (escaped) {
        try {
          key = JSON.parse(`"${key}"`) as string;
        } catch {
          return; // not a JSON string: JSON.parse refuses the text
        }
      }
      const frame = frames[frames.length - 1]!;
      if (frame.keys!.has(key)) throw refused(`duplicate key ${JSON.stringify(key)} in a JSON object at ${pathOf(frames)}`);
      frame.keys!.add(key);
      frame.key = key;
    } else if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      if (frames.length === JSON_MAX_DEPTH) throw refused(`JSON nesting deeper than ${JSON_MAX_DEPTH} levels`);
      const object = code === OPEN_OBJECT;
      frames.push({ keys: object ? new Set() : undefined, key: '', index: 0 });
      expectingKey = object;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      frames.pop();
      expectingKey = false;
    } else if (code === COMMA) {
      const frame = frames[frames.length - 1];
      if (frame && !frame.keys) frame.index += 1;
      expectingKey = frame?.keys !== undefined;
    }
  }
}

/**
 * Reads a JSON document the way every Tempora service and the gateway read it, so no two readers of one
 * request see different values. Beyond JSON.parse it refuses what parsers disagree on or what costs the
 * reader: duplicate keys in an object (JSON.parse keeps the last, other readers the first), nesting deeper
 * than JSON_MAX_DEPTH, and bytes that are not UTF-8. One leading UTF-8 byte order mark is skipped. The
 * values come from JSON.parse (V8's is iterative); every refusal is a 400 Problem naming its rule.
 */
export function readJson(bytes: Buffer | string): unknown {
  let text: string;
  if (typeof bytes === 'string') text = bytes;
  else {
    try {
      text = strictUtf8.decode(bytes);
    } catch {
      throw refused('request body is not valid UTF-8');
    }
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  scan(text);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw refused(`request body is not valid JSON: ${(error as Error).message}`);
  }
}

/** application/json and every `+json` type (application/merge-patch+json, application/problem+json, …). */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const essence = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return essence === 'application/json' || /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+\+json$/.test(essence);
}

/** Whether a request carries body bytes: chunked, or a Content-Length above 0. */
export const carriesBody = (req: IncomingMessage): boolean => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/** Only these methods' bodies are read, as @koa/bodyparser did before: a GET or DELETE body means nothing to any route. */
const READ_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * The body's bytes, at most `maxBytes`. Past the limit the stream is paused and left, as raw-body does,
 * rather than destroyed (which a `for await` that throws would do): the socket must stay up to carry the
 * 413.
 */
function bodyBytes(req: IncomingMessage, maxBytes: number, tooLarge: () => Problem): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? 0) > maxBytes) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (error?: Problem) => {
      req.off('data', onData).off('end', onEnd).off('error', onCut).off('close', onCut);
      if (!error) return resolve(Buffer.concat(chunks));
      req.pause();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) settle(tooLarge());
      else chunks.push(chunk);
    };
    const onEnd = () => settle();
    // The client went away mid-body: its request failed, not a dependency (ECONNRESET would read as one).
    const onCut = () => settle(refused('the request body ended before it was complete'));
    req.on('data', onData).on('end', onEnd).on('error', onCut).on('close', onCut);
  });
}

/**
 * Reads JSON request bodies into `ctx.request.body` with `readJson`, as the one reading behind every
 * route. Bodies of other media types are left unread (`ctx.request.body` is `{}`, as with
 * @koa/bodyparser) for the handlers that read them from the stream (form-encoded introspection); a
 * middleware that took the raw body already sets `ctx.disableBodyParser`. Content codings are refused:
 * the gateway forwards bodies decoded, so a compressed one here would be read differently from the bytes
 * the gateway priced.
 */
export function jsonBody(limit: string): Middleware {
  const maxBytes = sizeInBytes(limit);
  const tooLarge = () => new Problem(413, `request body exceeds the size limit of ${limit} (BODY_LIMIT)`);
  return async (ctx: Context, next) => {
    const request = ctx.request as { body?: unknown };
    if (!READ_METHODS.has(ctx.method) || request.body !== undefined || (ctx as { disableBodyParser?: boolean }).disableBodyParser) return next();
    const coding = ctx.get('Content-Encoding').trim().toLowerCase();
    if (coding && coding !== 'identity' && carriesBody(ctx.req)) {
      throw new Problem(415, `Content-Encoding ${coding} is not accepted: send the body uncompressed (services receive bodies decoded by the gateway)`, {
        headers: { 'Accept-Encoding': 'identity' },
      });
    }
    if (!isJsonContentType(ctx.get('Content-Type'))) {
      request.body = {};
      return next();
    }
    const bytes = await bodyBytes(ctx.req, maxBytes, tooLarge);
    // What a priced operation is bound to (priced-call.ts): the bytes as received.
    ctx.state.bodyDigest = bodyDigest(bytes);
    if (bytes.length === 0) request.body = {};
    else {
      const value = readJson(bytes);
      // Kept from the former parser's strict mode: no route takes a bare string, number or null.
      if (value === null || typeof value !== 'object') throw refused('request body must be a JSON object or array');
      request.body = value;
    }
    await next();
  };
}
