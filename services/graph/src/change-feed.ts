import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import type { Logger } from '@tempora/kit/observability';

/** Tells other replicas which moments' adjacency changed, so each keeps its in-memory index current. */
export interface ChangeFeed {
  publish(ids: readonly number[]): Promise<void>;
  /** `onResync` runs after a reconnect: changes sent while disconnected were missed. */
  subscribe(onChange: (ids: number[]) => void, onResync: () => void): Promise<void>;
  close(): Promise<void>;
}

/** The embedded database serves one process only: there is nobody to tell. */
export const localChangeFeed: ChangeFeed = {
  publish: async () => {},
  subscribe: async () => {},
  close: async () => {},
};

const CHANNEL = 'tempora_graph_changes';
/** NOTIFY payloads are capped at 8000 bytes; ids are sent in chunks well under it. */
const IDS_PER_NOTIFY = 500;

interface PgConnection {
  query(sql: string, params?: unknown[]): Promise<unknown>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): void;
  on(event: 'error' | 'end', listener: (error?: Error) => void): void;
  end(): Promise<void>;
}

/** LISTEN/NOTIFY on a dedicated connection, re-established with backoff when it drops. */
export class PostgresChangeFeed implements ChangeFeed {
  private readonly replica = randomUUID();
  private connection: PgConnection | undefined;
  private closed = false;
  private readonly knex: Knex;
  private readonly logger: Logger;

  constructor(knex: Knex, logger: Logger) {
    this.knex = knex;
    this.logger = logger;
  }

  async publish(ids: readonly number[]): Promise<void> {
    for (let start = 0; start < ids.length; start += IDS_PER_NOTIFY) {
      const payload = `${this.replica}|${ids.slice(start, start + IDS_PER_NOTIFY).join(',')}`;
      await this.knex.raw('select pg_notify(?, ?)', [CHANNEL, payload]);
    }
  }

  async subscribe(onChange: (ids: number[]) => void, onResync: () => void, attempt = 0): Promise<void> {
    if (this.closed) return;
    try {
      const connection = (await this.knex.client.acquireRawConnection()) as PgConnection;
      this.connection = connection;
      connection.on('notification', (message) => {
        const [sender, list] = (message.payload ?? '').split('|');
        if (message.channel !== CHANNEL || sender === this.replica || !list) return;
        onChange(list.split(',').map(Number).filter(Number.isFinite));
      });
      const reconnect = () => {
        if (this.closed || this.connection !== connection) return;
        this.connection = undefined;
        this.logger.warn('change feed connection lost; reconnecting');
        void this.subscribe(onChange, onResync, 1);
      };
      connection.on('error', reconnect);
      connection.on('end', reconnect);
      await connection.query(`LISTEN ${CHANNEL}`);
      if (attempt > 0) onResync();
    } catch (error) {
      const delay = Math.min(30_000, 500 * 2 ** attempt);
      this.logger.warn({ err: error, delay }, 'change feed subscribe failed; retrying');
      setTimeout(() => void this.subscribe(onChange, onResync, attempt + 1), delay).unref();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connection?.end().catch(() => {});
  }
}
