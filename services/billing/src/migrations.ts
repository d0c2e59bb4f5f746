import type { Knex, Migration } from '@tempora/kit/data';

export const migrations: Migration[] = [
  {
    name: '001_billing',
    async up(knex: Knex) {
      // Every verified provider message, once: the primary key is what makes a redelivery change nothing.
      // Long on purpose: the schema as one migration, one statement per table or index.
      await knex.schema.createTable('billing_events', (table) => {
        table.text('provider').notNullable();
        table.text('event_id').notNullable();
        table.text('type').notNullable();
        table.text('outcome').notNullable().defaultTo('received');
        table.text('detail');
        table.uuid('user_id');
        table.timestamp('received_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['provider', 'event_id']);
      });

      // One row per payment (a Stripe PaymentIntent or invoice, an Apple transaction): granted at most once,
      // and the state its refunds and disputes are settled from.
      await knex.schema.createTable('billing_payments', (table) => {
        table.text('provider').notNullable();
        table.text('ref').notNullable();
        table.uuid('user_id');
        table.text('item_kind');
        table.text('item_id');
        table.text('subscription_ref');
        table.integer('credits').notNullable().defaultTo(0);
        table.bigInteger('amount');
        table.text('currency');
        table.text('payment_intent');
        table.timestamp('granted_at', { useTz: true });
        table.bigInteger('refunded_amount').notNullable().defaultTo(0);
        table.bigInteger('refunded_of');
        table.boolean('disputed').notNullable().defaultTo(false);
        table.boolean('revoked').notNullable().defaultTo(false);
        table.integer('credits_taken_back').notNullable().defaultTo(0);
        table.integer('adjustments').notNullable().defaultTo(0);
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['provider', 'ref']);
        table.index(['user_id']);
      });
      await knex.raw('create unique index billing_payments_intent on billing_payments (payment_intent) where payment_intent is not null');

      await knex.schema.createTable('billing_subscriptions', (table) => {
        table.text('provider').notNullable();
        table.text('ref').notNullable();
        table.uuid('user_id');
        table.text('plan_id');
        table.text('status').notNullable();
        // The provider's clock (ms) of the state held: an older message never overwrites a newer state.
        table.bigInteger('version').notNullable();
        table.timestamp('period_end', { useTz: true });
        table.boolean('cancel_at_period_end').notNullable().defaultTo(false);
        table.timestamp('past_due_since', { useTz: true });
        table.timestamp('grace_until', { useTz: true });
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.primary(['provider', 'ref']);
        table.index(['user_id']);
      });
      await knex.raw(`create index billing_subscriptions_past_due on billing_subscriptions (user_id) where status = 'past_due'`);

      await knex.schema.createTable('billing_accounts', (table) => {
        table.uuid('user_id').primary();
        table.text('tier').notNullable().defaultTo('free');
        // What the gateway was last told; null: never (a user billing never subscribed keeps whatever tier they have).
        table.text('pushed_tier');
        table.timestamp('push_lease_until', { useTz: true });
        table.integer('push_attempts').notNullable().defaultTo(0);
        table.timestamp('push_next_attempt_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.text('push_error');
        // Credits a refund could not take back (the balance was spent): taken from the next grants.
        table.bigInteger('debt').notNullable().defaultTo(0);
        // An operator's re-sync: the tier is sent again even when the gateway should have it.
        table.boolean('push_forced').notNullable().defaultTo(false);
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`alter table billing_accounts add constraint billing_accounts_tier_check check (tier in ('free', 'pro', 'enterprise'))`);
      await knex.raw('alter table billing_accounts add constraint billing_accounts_debt_check check (debt >= 0)');

      // Ledger effects waiting for (or delivered to) the gateway, written in the transaction that decided them.
      await knex.schema.createTable('billing_outbox', (table) => {
        table.bigIncrements('id');
        table.uuid('user_id').notNullable();
        table.text('kind').notNullable();
        table.integer('amount').notNullable();
        // A grant less the debt it paid off, fixed before the first attempt so every retry sends the same.
        table.integer('sent_amount');
        table.text('idempotency_key').notNullable().unique();
        table.text('operation').notNullable();
        table.text('provider').notNullable();
        table.text('payment_ref').notNullable();
        table.text('status').notNullable().defaultTo('pending');
        table.integer('attempts').notNullable().defaultTo(0);
        table.timestamp('next_attempt_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('lease_until', { useTz: true });
        table.text('last_error');
        table.integer('taken');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('delivered_at', { useTz: true });
        table.index(['user_id', 'id']);
      });
      await knex.raw(`alter table billing_outbox add constraint billing_outbox_kind_check check (kind in ('grant', 'debit'))`);
      await knex.raw(`alter table billing_outbox add constraint billing_outbox_status_check check (status in ('pending', 'delivered', 'failed'))`);
      await knex.raw(`create index billing_outbox_due on billing_outbox (next_attempt_at) where status = 'pending'`);

      await knex.schema.createTable('billing_history', (table) => {
        table.bigIncrements('id');
        table.uuid('user_id').notNullable();
        table.text('kind').notNullable();
        table.text('description').notNullable();
        table.integer('credits');
        table.text('provider');
        table.text('ref');
        table.bigInteger('amount');
        table.text('currency');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.index(['user_id', 'id']);
      });
    },
    async down(knex: Knex) {
      for (const table of ['billing_history', 'billing_outbox', 'billing_accounts', 'billing_subscriptions', 'billing_payments', 'billing_events'])
        await knex.schema.dropTableIfExists(table);
    },
  },
  {
    name: '002_erasures',
    async up(knex: Knex) {
      // Accounts deleted: a one-way digest of the user id (never the id), so a later provider message naming
      // the user is recognised and settled without linking anything to them again, and the notes the user was
      // given, answered again when the gateway repeats the deletion.
      await knex.schema.createTable('billing_erasures', (table) => {
        table.text('digest').primary();
        table.jsonb('notes').notNullable().defaultTo('[]');
        table.timestamp('erased_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTableIfExists('billing_erasures');
    },
  },
];
