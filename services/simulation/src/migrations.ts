import type { Knex, Migration } from '@tempora/kit/data';

export const RUN_STATUSES = ['queued', 'running', 'completed', 'stopped', 'cancelled', 'failed'] as const;

export const migrations: Migration[] = [
  {
    name: '001_runs_steps_calls_budgets',
    async up(knex: Knex) {
      // Long on purpose: the schema as one migration, one statement per table or index.
      await knex.schema.createTable('simulation_runs', (table) => {
        table.uuid('id').primary();
        table.text('owner').notNullable();
        table.text('caller').notNullable();
        table.text('status').notNullable().defaultTo('queued');
        table.text('mode').notNullable();
        table.integer('fidelity').notNullable();
        table.text('template');
        table.text('prompt');
        table.jsonb('mechanisms').notNullable();
        // Everything decided before the run started (the estimate rests on it) and the engine's state after its last step.
        table.jsonb('plan').notNullable();
        table.jsonb('state');
        table.jsonb('result');
        table.integer('steps_done').notNullable().defaultTo(0);
        table.integer('steps_total').notNullable();
        // Money in micro-dollars: integers, so budgets add up exactly.
        table.bigInteger('estimate_micros').notNullable();
        table.bigInteger('cap_micros').notNullable();
        table.bigInteger('cost_micros').notNullable().defaultTo(0);
        table.bigInteger('input_tokens').notNullable().defaultTo(0);
        table.bigInteger('output_tokens').notNullable().defaultTo(0);
        table.bigInteger('thinking_tokens').notNullable().defaultTo(0);
        table.integer('calls').notNullable().defaultTo(0);
        table.jsonb('budgets').notNullable().defaultTo('[]');
        table.jsonb('partial');
        table.jsonb('error');
        table.boolean('cancel_requested').notNullable().defaultTo(false);
        table.text('lease_owner');
        table.timestamp('lease_until', { useTz: true });
        table.integer('attempts').notNullable().defaultTo(0);
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('started_at', { useTz: true });
        table.timestamp('finished_at', { useTz: true });
      });
      await knex.raw(
        `alter table simulation_runs add constraint simulation_runs_status_check check (status in (${RUN_STATUSES.map((status) => `'${status}'`).join(', ')}))`,
      );
      await knex.raw('create index simulation_runs_owner_idx on simulation_runs (owner, created_at desc)');
      await knex.raw(`create index simulation_runs_active_idx on simulation_runs (created_at) where status in ('queued', 'running')`);

      await knex.schema.createTable('simulation_steps', (table) => {
        table.uuid('run_id').notNullable().references('simulation_runs.id').onDelete('CASCADE');
        table.integer('seq').notNullable();
        table.text('kind').notNullable();
        table.text('label').notNullable();
        table.jsonb('detail').notNullable();
        table.bigInteger('cost_micros').notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['run_id', 'seq']);
      });

      await knex.schema.createTable('simulation_calls', (table) => {
        table.bigIncrements('id');
        table.uuid('run_id').notNullable().references('simulation_runs.id').onDelete('CASCADE');
        table.integer('step').notNullable();
        table.text('action').notNullable();
        table.text('provider').notNullable();
        table.text('model').notNullable();
        table.text('priced_as').notNullable();
        table.integer('input_tokens').notNullable();
        table.integer('output_tokens').notNullable();
        table.integer('thinking_tokens').notNullable();
        table.bigInteger('cost_micros').notNullable();
        table.integer('duration_ms').notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw('create index simulation_calls_run_idx on simulation_calls (run_id)');

      // Per budget and period: what settled runs spent and what runs in flight hold.
      await knex.schema.createTable('simulation_budget_ledger', (table) => {
        table.text('budget').notNullable();
        table.text('period').notNullable();
        table.bigInteger('spent_micros').notNullable().defaultTo(0);
        table.bigInteger('reserved_micros').notNullable().defaultTo(0);
        table.integer('runs').notNullable().defaultTo(0);
        table.primary(['budget', 'period']);
      });
      await knex.schema.createTable('simulation_budget_reservations', (table) => {
        table.uuid('run_id').notNullable().references('simulation_runs.id').onDelete('CASCADE');
        table.text('budget').notNullable();
        table.text('period').notNullable();
        table.bigInteger('amount_micros').notNullable();
        table.primary(['run_id', 'budget']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('simulation_budget_reservations');
      await knex.schema.dropTable('simulation_budget_ledger');
      await knex.schema.dropTable('simulation_calls');
      await knex.schema.dropTable('simulation_steps');
      await knex.schema.dropTable('simulation_runs');
    },
  },
  {
    name: '002_idempotency_keys',
    async up(knex: Knex) {
      // Per owner, the Idempotency-Key a run was created with, kept as long as the run. The primary key is
      // what lets only one of concurrent requests with the same key create a run.
      await knex.schema.createTable('simulation_idempotency_keys', (table) => {
        table.text('owner').notNullable();
        table.text('key').notNullable();
        table.text('fingerprint').notNullable();
        // Deferred: the key is claimed before its run is inserted, in the same transaction (repository.createRun).
        table.uuid('run_id').notNullable().unique().references('simulation_runs.id').onDelete('CASCADE').deferrable('deferred');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['owner', 'key']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('simulation_idempotency_keys');
    },
  },
  {
    name: '003_run_trace_context',
    async up(knex: Knex) {
      // The W3C trace context of the request that created the run: its execution, later and on any replica, continues that trace.
      await knex.schema.alterTable('simulation_runs', (table) => {
        table.jsonb('trace');
      });
    },
    async down(knex: Knex) {
      await knex.schema.alterTable('simulation_runs', (table) => {
        table.dropColumn('trace');
      });
    },
  },
  {
    name: '004_runs_by_owner_and_id',
    async up(knex: Knex) {
      // An account's export pages through its runs by id.
      await knex.raw('create index simulation_runs_owner_id_idx on simulation_runs (owner, id)');
    },
    async down(knex: Knex) {
      await knex.raw('drop index simulation_runs_owner_id_idx');
    },
  },
];
