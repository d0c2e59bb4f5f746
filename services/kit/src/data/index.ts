/** Storage: PostgreSQL (or embedded PGlite) through knex with migrations, and Redis. */
export * from './database.ts';
export * from './idempotency-keys.ts';
export * from './redis.ts';
