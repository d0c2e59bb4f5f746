import type { Knex, Migration } from '@tempora/kit/data';

export const migrations: Migration[] = [
  {
    name: '001_timepoints_and_jobs',
    async up(knex: Knex) {
      await knex.schema.createTable('timepoints', (table) => {
        table.uuid('id').primary();
        table.text('slug').notNullable();
        table.text('query').notNullable();
        table.text('status').notNullable().defaultTo('completed');
        table.text('owner');
        table.text('visibility').notNullable().defaultTo('public');
        table.text('preset').notNullable();
        table.integer('year').notNullable();
        table.text('path').notNullable();
        // The whole scene record (docs/generation.md); the columns above are what lists filter and sort on.
        table.jsonb('record').notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`alter table timepoints add constraint timepoints_visibility_check check (visibility in ('public', 'private'))`);
      await knex.raw('create index timepoints_owner_idx on timepoints (owner, created_at desc)');

      await knex.schema.createTable('timepoint_images', (table) => {
        table.uuid('timepoint_id').primary().references('timepoints.id').onDelete('CASCADE');
        table.text('mime_type').notNullable();
        table.binary('data').notNullable();
      });

      await knex.schema.createTable('generation_jobs', (table) => {
        table.uuid('id').primary();
        table.text('status').notNullable().defaultTo('queued');
        table.text('owner');
        table.jsonb('request').notNullable();
        table.uuid('timepoint_id').references('timepoints.id').onDelete('SET NULL');
        table.jsonb('error');
        table.text('callback_url');
        table.text('callback_status').notNullable().defaultTo('none');
        table.integer('callback_attempts').notNullable().defaultTo(0);
        table.text('callback_error');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('finished_at', { useTz: true });
      });
      await knex.raw(`alter table generation_jobs add constraint generation_jobs_status_check check (status in ('queued', 'running', 'completed', 'failed'))`);
      await knex.raw(
        `alter table generation_jobs add constraint generation_jobs_callback_check check (callback_status in ('none', 'pending', 'delivered', 'failed'))`,
      );
      await knex.raw('create index generation_jobs_owner_idx on generation_jobs (owner)');
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('generation_jobs');
      await knex.schema.dropTable('timepoint_images');
      await knex.schema.dropTable('timepoints');
    },
  },
  {
    name: '002_idempotency_keys',
    async up(knex: Knex) {
      // Per owner ('' for a service caller without X-User-ID), the Idempotency-Key a job was submitted
      // with, kept as long as the job. The primary key is what lets only one of concurrent requests with
      // the same key submit a job.
      await knex.schema.createTable('generation_idempotency_keys', (table) => {
        table.text('owner').notNullable();
        table.text('key').notNullable();
        table.text('fingerprint').notNullable();
        // Deferred: the key is claimed before its job is inserted, in the same transaction (repository/jobs.ts, Jobs.insert).
        table.uuid('job_id').notNullable().unique().references('generation_jobs.id').onDelete('CASCADE').deferrable('deferred');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['owner', 'key']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('generation_idempotency_keys');
    },
  },
  {
    name: '003_account_data',
    async up(knex: Knex) {
      // The account export pages a user's scenes and jobs by id (repository/: Timepoints.exportOf, Jobs.exportOf).
      await knex.raw('create index timepoints_owner_id_idx on timepoints (owner, id)');
      await knex.raw('create index generation_jobs_owner_id_idx on generation_jobs (owner, id)');
      // Accounts deleted in the last minutes, by a SHA-256 of the user id: a generation that was running
      // when its owner's account was deleted (on any replica) must not store its scene afterwards.
      // Kept for as long as such a generation may still run (repository/erasures.ts), then purged.
      await knex.schema.createTable('generation_erasures', (table) => {
        table.text('owner_hash').primary();
        table.timestamp('until', { useTz: true }).notNullable();
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('generation_erasures');
      await knex.raw('drop index generation_jobs_owner_id_idx');
      await knex.raw('drop index timepoints_owner_id_idx');
    },
  },
  {
    name: '004_job_leases',
    async up(knex: Knex) {
      // Expand only: the previous release's pods keep inserting and finishing jobs on this schema (they
      // leave these columns at their defaults; Jobs.claimExpired (repository/jobs.ts) takes such rows over by age).
      // A job is leased by the process running it (owner_instance, until lease_until, renewed while it
      // runs or its callback is pending); lease_token fences every write, so a process whose job was
      // taken over can no longer record anything on it. attempts counts the pipeline's runs.
      await knex.schema.alterTable('generation_jobs', (table) => {
        table.text('owner_instance');
        table.uuid('lease_token');
        table.timestamp('lease_until', { useTz: true });
        table.integer('attempts').notNullable().defaultTo(0);
      });
      await knex.raw(
        `create index generation_jobs_unsettled_idx on generation_jobs (lease_until) where status in ('queued', 'running') or callback_status = 'pending'`,
      );
    },
    async down(knex: Knex) {
      await knex.raw('drop index generation_jobs_unsettled_idx');
      await knex.schema.alterTable('generation_jobs', (table) => {
        table.dropColumns('owner_instance', 'lease_token', 'lease_until', 'attempts');
      });
    },
  },
];
