/**
 * The one reading of a charged call's body (docs/gateway.md, "One reading of every request"): the
 * gateway decodes it, prices the JSON it holds, and forwards exactly those decoded bytes, so the service
 * runs what was priced. Services take identity bodies only (the kit refuses any content coding with 415).
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, type ZlibOptions } from 'node:zlib';
import { Problem, readJson } from '@tempora/kit/http';
import { headerValue } from './header-contract.ts';

type Decoder = (input: Buffer, options: ZlibOptions) => Promise<Buffer>;
/** The content codings decoded here (RFC 9110 §8.4.1); x-gzip is gzip's old name. */
const DECODERS: Record<string, Decoder> = {
  gzip: promisify(gunzip) as Decoder,
  'x-gzip': promisify(gunzip) as Decoder,
  deflate: promisify(inflate) as Decoder,
  br: promisify(brotliDecompress) as Decoder,
};
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

export interface ReadBody {
  /** What is forwarded: the decoded bytes, less a leading byte order mark. */
  bytes: Buffer;
  /** Its JSON, as the service's kit reads it ({} for no body). */
  json: unknown;
}

const tooLarge = (limit: number) => new Problem(413, `the request body exceeds the size limit of ${limit} bytes (decoded)`);

async function readLimited(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The body after its content coding, bounded by `limit` once decoded (a small gzip may inflate to gigabytes). */
async function decoded(req: IncomingMessage, raw: Buffer, limit: number): Promise<Buffer> {
  const coding = headerValue(req.headers['content-encoding']).trim().toLowerCase();
  if (coding === '' || coding === 'identity') return raw;
  const decode = DECODERS[coding];
  if (!decode)
    throw new Problem(415, `Content-Encoding "${coding}" is not accepted: send the body as is, or with one of gzip, deflate, br`, {
      headers: { 'Accept-Encoding': 'gzip, deflate, br' },
    });
  try {
    return await decode(raw, { maxOutputLength: limit });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit);
    throw new Problem(400, `the request body is not valid ${coding} data`);
  }
}

/**
 * Reads, decodes and parses a charged call's body: 413 past `limit`, 415 for a coding not decoded here,
 * 400 for a body that is not one JSON value (or holds duplicate keys, or nests too deeply), before
 * anything is charged or forwarded.
 */
export async function readChargedBody(req: IncomingMessage, hasBody: boolean, limit: number): Promise<ReadBody> {
  if (!hasBody) return { bytes: Buffer.alloc(0), json: {} };
  let bytes = await decoded(req, await readLimited(req, limit), limit);
  if (bytes.subarray(0, 3).equals(BOM)) bytes = bytes.subarray(3);
  return { bytes, json: bytes.length === 0 ? {} : readJson(bytes) };
}
