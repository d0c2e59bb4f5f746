import { randomFillSync } from 'node:crypto';

const pool = Buffer.alloc(4096);
let offset = pool.length;

/**
 * `bytes` random bytes as hex, drawn from a pooled buffer refilled 4 KiB at a time: one getrandom call
 * serves hundreds of trace and span ids instead of one each (node:crypto's randomUUID pools the same way).
 */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}
