import { Problem } from '@tempora/kit/http';
import type { Middleware } from 'koa';

/**
 * Keeps the body of requests under `prefix` as the exact bytes that arrived, and keeps the JSON body
 * parser off them: a provider's signature covers the raw body, which must be verified before it is parsed.
 */
export function rawBodyUnder(prefix: string, limitBytes: number): Middleware {
  return async (ctx, next) => {
    if (!ctx.path.startsWith(prefix)) return next();
    const declared = Number(ctx.get('Content-Length') || 0);
    if (declared > limitBytes) throw new Problem(413, 'request body exceeds the size limit');
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of ctx.req) {
      size += (chunk as Buffer).length;
      if (size > limitBytes) throw new Problem(413, 'request body exceeds the size limit');
      chunks.push(chunk as Buffer);
    }
    ctx.state.rawBody = Buffer.concat(chunks);
    (ctx as { disableBodyParser?: boolean }).disableBodyParser = true;
    await next();
  };
}
