import type { Knex, Migration } from '@tempora/kit/data';

/** The conductor's tables are prefixed, so that services sharing one database in development do not collide. */
export const migrations: Migration[] = [
  {
    name: '001_conversations_messages_calls_settings',
    async up(knex: Knex) {
      await knex.schema.createTable('conductor_settings', (table) => {
        table.uuid('user_id').primary();
        table.text('autonomy').notNullable();
        table.text('verbosity').notNullable();
        table.integer('spend_ceiling').notNullable();
        table.text('default_render').notNullable();
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.schema.createTable('conductor_conversations', (table) => {
        table.uuid('id').primary();
        table.uuid('user_id').notNullable();
        table.text('title').notNullable();
        // The message being worked on: a conversation answers one message at a time.
        table.uuid('busy_message');
        table.timestamp('busy_since', { useTz: true });
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.index(['user_id', 'updated_at']);
      });
      await knex.schema.createTable('conductor_messages', (table) => {
        table.uuid('id').primary();
        table.uuid('conversation_id').notNullable().references('conductor_conversations.id').onDelete('CASCADE');
        table.uuid('user_id').notNullable();
        table.text('content').notNullable();
        // running, completed, paused, stopped, declined (a pause the user declined or walked away from), failed
        table.text('status').notNullable();
        table.text('reply');
        table.jsonb('response');
        // While paused: the run state (transcript, pending calls, counters) the follow-up resumes from.
        table.jsonb('state');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.index(['conversation_id', 'created_at']);
      });
      await knex.schema.createTable('conductor_tool_calls', (table) => {
        table.uuid('message_id').notNullable().references('conductor_messages.id').onDelete('CASCADE');
        table.integer('index').notNullable();
        table.uuid('user_id').notNullable();
        table.text('tool').notNullable();
        table.jsonb('arguments').notNullable();
        // charging (before the charge: the call may or may not be paid), ok, failed, invalid
        table.text('status').notNullable();
        table.integer('credits').notNullable().defaultTo(0);
        table.text('operation');
        table.text('idempotency_key');
        table.text('note').notNullable().defaultTo('');
        table.jsonb('output');
        table.boolean('refund_pending').notNullable().defaultTo(false);
        table.integer('duration_ms').notNullable().defaultTo(0);
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['message_id', 'index']);
      });
      await knex.raw("create index conductor_tool_calls_unsettled_idx on conductor_tool_calls (updated_at) where status = 'charging' or refund_pending");
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('conductor_tool_calls');
      await knex.schema.dropTable('conductor_messages');
      await knex.schema.dropTable('conductor_conversations');
      await knex.schema.dropTable('conductor_settings');
    },
  },
  {
    name: '002_pauses',
    async up(knex: Knex) {
      // One row per pause: the id a decision must name, so a decision answers the call its sender saw and
      // no other, and only once (claimed by moving `state` off pending).
      await knex.schema.createTable('conductor_pauses', (table) => {
        table.uuid('id').primary();
        table.uuid('message_id').notNullable().references('conductor_messages.id').onDelete('CASCADE');
        table.uuid('conversation_id').notNullable();
        // The call's index in its request: the first of the run state's pending calls.
        table.integer('index').notNullable();
        // pending, confirmed, declined, superseded (a new request came instead of a decision)
        table.text('state').notNullable().defaultTo('pending');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('decided_at', { useTz: true });
        table.index(['message_id']);
        table.index(['conversation_id']);
      });
      // Requests paused before pauses had ids get one, shown in their stored reply, so they can still be decided.
      await knex.raw(
        `insert into conductor_pauses (id, message_id, conversation_id, index)
         select gen_random_uuid(), id, conversation_id, (state->'pending'->0->>'index')::int from conductor_messages
         where status = 'paused' and state->'pending'->0 is not null`,
      );
      await knex.raw(
        `update conductor_messages m set response = jsonb_set(m.response, '{pending,id}', to_jsonb(p.id::text))
         from conductor_pauses p where p.message_id = m.id and m.response->'pending' is not null and jsonb_typeof(m.response->'pending') = 'object'`,
      );
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('conductor_pauses');
    },
  },
  {
    name: '003_followed_jobs',
    async up(knex: Knex) {
      // The work a paid call started that outlives it (a simulation run), which the gateway follows and
      // settles; job_state says how far its hand-over and settlement are (domain/conductor.ts, JobState).
      await knex.schema.alterTable('conductor_tool_calls', (table) => {
        table.jsonb('job');
        table.text('job_state');
      });
      await knex.raw("create index conductor_tool_calls_jobs_idx on conductor_tool_calls (updated_at) where job_state in ('to_follow', 'following')");
      // The account-data routes read and delete by user.
      await knex.raw('create index conductor_tool_calls_user_idx on conductor_tool_calls (user_id)');
      await knex.raw('create index conductor_messages_user_idx on conductor_messages (user_id, id)');
    },
    async down(knex: Knex) {
      await knex.raw('drop index if exists conductor_messages_user_idx');
      await knex.raw('drop index if exists conductor_tool_calls_user_idx');
      await knex.raw('drop index if exists conductor_tool_calls_jobs_idx');
      await knex.schema.alterTable('conductor_tool_calls', (table) => {
        table.dropColumn('job_state');
        table.dropColumn('job');
      });
    },
  },
];
