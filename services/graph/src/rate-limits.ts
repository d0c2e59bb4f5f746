import type { RateLimiter, RateState, RateWindow } from '@tempora/kit/http';
import type Koa from 'koa';
import type { GraphConfig } from './config.ts';

/**
 * Where the MCP server answers: the spec's `{graph_url}/mcp/` and its slashless form (routes are strict),
 * and under the graph's prefix, where the gateway forwards its public alias.
 */
export const MCP_PATHS = ['/mcp', '/mcp/', '/api/v1/graph/mcp'];

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const isMcp = (path: string) => MCP_PATHS.some((prefix) => path === prefix || path === `${prefix}/`);

type Limits = Pick<GraphConfig, 'RATE_LIMIT_PUBLIC_PER_MINUTE' | 'RATE_LIMIT_READ_PER_MINUTE' | 'RATE_LIMIT_WRITE_PER_MINUTE'>;

/**
 * The spec's second table: public 60/min per IP; authenticated reads 300/min and writes 30/min per
 * credential. A service calling on behalf of a user (the gateway, with X-User-ID) is counted per user, so
 * users do not share one budget.
 */
export class GraphRateLimits {
  private readonly limits: Limits;
  private readonly limiter: RateLimiter;

  constructor(limits: Limits, limiter: RateLimiter) {
    this.limits = limits;
    this.limiter = limiter;
  }

  private window(ctx: Koa.Context, kind: 'read' | 'write'): RateWindow {
    const principal = ctx.state.principal;
    if (!principal) return { name: 'public', points: this.limits.RATE_LIMIT_PUBLIC_PER_MINUTE, durationSeconds: 60, key: `ip:${ctx.ip}` };
    const user = principal.kind === 'service' ? ctx.get('X-User-ID') : '';
    const key = user ? `user:${user.slice(0, 128)}` : principal.id;
    return kind === 'read'
      ? { name: 'read', points: this.limits.RATE_LIMIT_READ_PER_MINUTE, durationSeconds: 60, key }
      : { name: 'write', points: this.limits.RATE_LIMIT_WRITE_PER_MINUTE, durationSeconds: 60, key };
  }

  /**
   * The window of each request, by method; an MCP request is a POST whatever it asks, so it counts as a
   * read, and gen_render, the one MCP write, takes a point of the write window as well (`chargeWrite`).
   */
  readonly windows = (ctx: Koa.Context): RateWindow[] => [this.window(ctx, READ_METHODS.has(ctx.method) || isMcp(ctx.path) ? 'read' : 'write')];

  /** Counts a write made inside a request already counted as a read (an MCP gen_render call). */
  chargeWrite(ctx: Koa.Context): Promise<RateState> {
    return this.limiter.consume([this.window(ctx, 'write')]);
  }
}
