import type { Knex, Migration } from '@tempora/kit/data';

export const migrations: Migration[] = [
  {
    name: '001_users_tokens_keys_credits',
    async up(knex: Knex) {
      // Long on purpose: the schema as one migration, one statement per table or index.
      await knex.schema.createTable('users', (table) => {
        table.uuid('id').primary();
        table.text('email');
        table.text('name');
        table.text('tier').notNullable().defaultTo('free');
        table.boolean('is_demo').notNullable().defaultTo(false);
        table.bigInteger('balance').notNullable().defaultTo(0);
        // Access tokens issued before this instant are refused (logout everywhere).
        table.timestamp('tokens_valid_after', { useTz: true });
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`alter table users add constraint users_tier_check check (tier in ('free', 'pro', 'enterprise'))`);
      await knex.raw('alter table users add constraint users_balance_non_negative check (balance >= 0)');

      await knex.schema.createTable('identities', (table) => {
        table.text('provider').notNullable();
        table.text('subject').notNullable();
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.text('email');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['provider', 'subject']);
        table.index(['user_id']);
      });

      await knex.schema.createTable('refresh_tokens', (table) => {
        table.uuid('id').primary();
        table.uuid('family_id').notNullable();
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.text('token_hash').notNullable().unique();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('expires_at', { useTz: true }).notNullable();
        table.timestamp('rotated_at', { useTz: true });
        table.timestamp('revoked_at', { useTz: true });
        table.text('revoked_reason');
        table.index(['family_id']);
        table.index(['user_id']);
      });

      await knex.schema.createTable('revoked_access_tokens', (table) => {
        table.text('jti').primary();
        table.timestamp('expires_at', { useTz: true }).notNullable();
      });

      await knex.schema.createTable('api_keys', (table) => {
        table.uuid('id').primary();
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.text('name').notNullable();
        table.text('prefix').notNullable();
        table.text('key_hash').notNullable().unique();
        table.specificType('scopes', 'text[]').notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('last_used_at', { useTz: true });
        table.timestamp('revoked_at', { useTz: true });
        table.index(['user_id']);
      });

      await knex.schema.createTable('credit_ledger', (table) => {
        table.bigIncrements('id');
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.bigInteger('amount').notNullable();
        table.bigInteger('balance_after').notNullable();
        table.text('kind').notNullable();
        table.text('operation');
        table.text('idempotency_key').notNullable();
        table.bigInteger('refund_of');
        table.jsonb('metadata').notNullable().defaultTo('{}');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.unique(['user_id', 'idempotency_key']);
        table.index(['user_id', 'id']);
      });
      await knex.raw(`alter table credit_ledger add constraint credit_ledger_kind_check check (kind in ('signup_grant', 'grant', 'charge', 'refund'))`);
      await knex.raw('alter table credit_ledger add constraint credit_ledger_balance_check check (balance_after >= 0)');
      await knex.raw('create unique index credit_ledger_one_refund on credit_ledger (refund_of) where refund_of is not null');
      // Append-only: rows are never updated, and deleted only with their account (the transaction opts in).
      await knex.raw(`
        create function credit_ledger_append_only() returns trigger language plpgsql as $$
        begin
          if tg_op = 'DELETE' and current_setting('tempora.deleting_account', true) = 'on' then
            return old;
          end if;
          raise exception 'credit_ledger is append-only (% refused)', tg_op;
        end $$`);
      await knex.raw(
        `create trigger credit_ledger_append_only before update or delete on credit_ledger for each row execute function credit_ledger_append_only()`,
      );
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('credit_ledger');
      await knex.raw('drop function if exists credit_ledger_append_only');
      for (const table of ['api_keys', 'revoked_access_tokens', 'refresh_tokens', 'identities', 'users']) await knex.schema.dropTableIfExists(table);
    },
  },
  {
    name: '002_charged_jobs',
    async up(knex: Knex) {
      // A charged call the upstream accepted for later (202 and a Location): followed until the job ends,
      // and refunded if it fails.
      await knex.schema.createTable('charged_jobs', (table) => {
        table.text('charge_key').primary();
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.text('upstream').notNullable();
        table.text('location').notNullable();
        table.integer('checks').notNullable().defaultTo(0);
        table.timestamp('check_after', { useTz: true }).notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.index(['check_after']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('charged_jobs');
    },
  },
  {
    name: '003_open_charges',
    async up(knex: Knex) {
      // A proxied call's charge until the call is settled: delivered (the row goes), refunded (the row
      // goes with the refund, in one transaction) or followed as a job (charged_jobs takes over). A row
      // past its settle_by belongs to a replica that stopped mid-call: any replica refunds it.
      await knex.schema.createTable('open_charges', (table) => {
        table.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
        table.text('charge_key').notNullable();
        table.timestamp('settle_by', { useTz: true }).notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['user_id', 'charge_key']);
        table.index(['settle_by']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('open_charges');
    },
  },
  {
    name: '004_account_deletions',
    async up(knex: Knex) {
      // An account deletion is recorded with the gateway's own rows' removal, in one transaction; each
      // other service's part is a step, retried until that service confirms it (docs/accounts.md). No
      // foreign key: the user row is gone. The record keeps only the user's id and the counts deleted.
      await knex.schema.createTable('account_deletions', (table) => {
        table.uuid('user_id').primary();
        table.jsonb('gateway').notNullable();
        table.timestamp('requested_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('completed_at', { useTz: true });
      });
      await knex.schema.createTable('account_deletion_steps', (table) => {
        table.uuid('user_id').notNullable().references('account_deletions.user_id').onDelete('CASCADE');
        table.text('service').notNullable();
        table.integer('attempts').notNullable().defaultTo(0);
        table.timestamp('try_after', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.text('last_error');
        // The service's answer (AccountDeletion) once it confirmed; null while pending.
        table.jsonb('result');
        table.timestamp('done_at', { useTz: true });
        table.primary(['user_id', 'service']);
      });
      await knex.raw('create index account_deletion_steps_pending_idx on account_deletion_steps (try_after) where done_at is null');
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('account_deletion_steps');
      await knex.schema.dropTableIfExists('account_deletions');
    },
  },
  {
    name: '005_charged_jobs_per_user',
    async up(knex: Knex) {
      // A charge key is unique per user only (the ledger's own rule): two users sending the same
      // Idempotency-Key had one job followed and the other's never refunded.
      await knex.raw('alter table charged_jobs drop constraint charged_jobs_pkey');
      await knex.raw('alter table charged_jobs add primary key (user_id, charge_key)');
    },
    async down(knex: Knex) {
      await knex.raw('alter table charged_jobs drop constraint charged_jobs_pkey');
      await knex.raw('alter table charged_jobs add primary key (charge_key)');
    },
  },
  {
    name: '006_export_staging',
    async up(knex: Knex) {
      // A service pages its part of an export in its own key order; the export puts each kind in
      // creation order (docs/accounts.md), staging it here instead of in memory. Unlogged: a staged
      // row lives for one export only. The user's foreign key deletes it with the account. Ids compare
      // byte by byte (collate "C"), as the export documents, not by the database's locale.
      await knex.raw(`
        create unlogged table export_staging (
          export_id uuid not null,
          seq integer not null,
          user_id uuid not null references users(id) on delete cascade,
          created timestamptz not null,
          item_id text collate "C" not null,
          item text not null,
          staged_at timestamptz not null default now(),
          primary key (export_id, seq)
        )`);
      await knex.raw('create index export_staging_order_idx on export_staging (export_id, created, item_id, seq)');
      await knex.raw('create index export_staging_staged_at_idx on export_staging (staged_at)');
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('export_staging');
    },
  },
  {
    name: '007_drop_export_staging',
    async up(knex: Knex) {
      // The services now page every kind in the export's order themselves (the account-data contract), so
      // nothing is staged. 006 and this one were made before any release: no released gateway uses the table.
      await knex.schema.dropTableIfExists('export_staging');
    },
    async down(knex: Knex) {
      await migrations.find((migration) => migration.name === '006_export_staging')!.up(knex);
    },
  },
];
