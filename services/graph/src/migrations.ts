import type { Knex, Migration } from '@tempora/kit/data';

export const migrations: Migration[] = [
  {
    name: '001_moments_and_edges',
    async up(knex: Knex) {
      // Long on purpose: the schema as one migration, one statement per table or index.
      await knex.raw('create extension if not exists pg_trgm');
      await knex.schema.createTable('moments', (table) => {
        table.bigIncrements('id');
        table.text('path').notNullable().unique();
        table.text('event_name').notNullable();
        table.text('description').notNullable().defaultTo('');
        table.integer('year').notNullable();
        table.smallint('month_num').notNullable();
        table.smallint('day').notNullable();
        table.string('time', 4).notNullable();
        table.text('country').notNullable();
        table.text('region').notNullable();
        table.text('city').notNullable();
        table.text('slug').notNullable();
        table.text('era').notNullable();
        table.text('type').notNullable().defaultTo('event');
        table.smallint('layer').notNullable().defaultTo(0);
        table.text('status').notNullable().defaultTo('active');
        table.text('visibility').notNullable().defaultTo('public');
        table.specificType('figures', 'text[]').notNullable().defaultTo('{}');
        // The words of the figures' names: the GIN index behind the `entity` filter (see 004_figure_names).
        table.specificType('entity_keys', 'text[]').notNullable().defaultTo('{}');
        table.specificType('tags', 'text[]').notNullable().defaultTo('{}');
        table.double('latitude');
        table.double('longitude');
        table.double('confidence').notNullable().defaultTo(0.5);
        table.text('image_url');
        table.text('source_type').notNullable().defaultTo('manual');
        // Automatic links per type this moment already has: the bound of auto-linking, kept without counting.
        table.smallint('auto_contemporaneous').notNullable().defaultTo(0);
        table.smallint('auto_same_location').notNullable().defaultTo(0);
        table.smallint('auto_thematic').notNullable().defaultTo(0);
        table.specificType('search', 'tsvector').notNullable();
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`alter table moments add constraint moments_layer_check check (layer in (0, 1, 2))`);
      await knex.raw(`alter table moments add constraint moments_visibility_check check (visibility in ('public', 'private'))`);
      await knex.raw('create index moments_search_idx on moments using gin (search)');
      await knex.raw('create index moments_name_trgm_idx on moments using gin (event_name gin_trgm_ops)');
      await knex.raw('create index moments_entity_keys_idx on moments using gin (entity_keys)');
      await knex.raw('create index moments_tags_idx on moments using gin (tags)');
      await knex.raw('create index moments_year_idx on moments (year)');
      await knex.raw('create index moments_place_idx on moments (country, region, city)');
      await knex.raw('create index moments_calendar_idx on moments (month_num, day)');
      await knex.raw('create index moments_layer_idx on moments (layer)');

      await knex.schema.createTable('edges', (table) => {
        table.bigIncrements('id');
        table.bigInteger('source_id').notNullable().references('moments.id').onDelete('CASCADE');
        table.bigInteger('target_id').notNullable().references('moments.id').onDelete('CASCADE');
        table.text('type').notNullable();
        table.double('weight').notNullable();
        table.text('theme').notNullable().defaultTo('');
        table.text('description').notNullable().defaultTo('');
        // seed, auto (auto-linking), ingest or expander: auto edges are derived and recomputed.
        table.text('origin').notNullable().defaultTo('manual');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.unique(['source_id', 'target_id', 'type']);
      });
      await knex.raw('alter table edges add constraint edges_no_self check (source_id <> target_id)');
      await knex.raw('create index edges_target_idx on edges (target_id)');
      await knex.raw("create index edges_auto_idx on edges (type, source_id) where origin = 'auto'");
      await knex.raw("create index edges_auto_target_idx on edges (type, target_id) where origin = 'auto'");

      await knex.schema.createTable('render_jobs', (table) => {
        table.uuid('id').primary();
        table.bigInteger('moment_id').notNullable().references('moments.id').onDelete('CASCADE');
        table.text('status').notNullable().defaultTo('queued');
        table.text('requested_by').notNullable();
        table.jsonb('request').notNullable();
        table.integer('attempts').notNullable().defaultTo(0);
        table.text('error');
        table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`alter table render_jobs add constraint render_jobs_status_check check (status in ('queued', 'running', 'succeeded', 'failed'))`);
      await knex.raw('create index render_jobs_status_idx on render_jobs (status, created_at)');

      await knex.schema.createTable('graph_meta', (table) => {
        table.text('key').primary();
        table.text('value').notNullable();
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('graph_meta');
      await knex.schema.dropTable('render_jobs');
      await knex.schema.dropTable('edges');
      await knex.schema.dropTable('moments');
    },
  },
  {
    name: '002_background_workers',
    async up(knex: Knex) {
      await knex.schema.alterTable('render_jobs', (table) => {
        // A failed attempt is retried no earlier than this (exponential back-off); new jobs run at once.
        table.timestamp('run_after', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        table.text('claimed_by');
        // A job 'running' longer than the renderer's stale limit lost its worker and is reclaimed.
        table.timestamp('claimed_at', { useTz: true });
        table.text('scene_id');
      });
      await knex.raw(`create index render_jobs_claim_idx on render_jobs (run_after, created_at) where status = 'queued'`);
      await knex.raw(`create index render_jobs_running_idx on render_jobs (claimed_at) where status = 'running'`);
      await knex.schema.alterTable('moments', (table) => {
        // The generation service's scene behind a layer-2 moment.
        table.text('scene_id');
        // When the expander last asked the model about this moment, so each run looks at others.
        table.timestamp('expanded_at', { useTz: true });
      });
      await knex.raw(`create index moments_pending_idx on moments (updated_at, id) where status = 'pending'`);
      await knex.raw(`create index moments_unexpanded_idx on moments (id) where expanded_at is null and visibility = 'public'`);
      // What each worker role spent per UTC day, shared by its replicas: the daily budget.
      await knex.schema.createTable('worker_spend', (table) => {
        table.date('day').notNullable();
        table.text('role').notNullable();
        table.decimal('spent_usd', 14, 6).notNullable().defaultTo(0);
        table.primary(['day', 'role']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('worker_spend');
      await knex.raw('drop index moments_unexpanded_idx');
      await knex.raw('drop index moments_pending_idx');
      await knex.schema.alterTable('moments', (table) => {
        table.dropColumn('expanded_at');
        table.dropColumn('scene_id');
      });
      await knex.raw('drop index render_jobs_running_idx');
      await knex.raw('drop index render_jobs_claim_idx');
      await knex.schema.alterTable('render_jobs', (table) => {
        table.dropColumns('run_after', 'claimed_by', 'claimed_at', 'scene_id');
      });
    },
  },
  {
    name: '003_worker_claims',
    async up(knex: Knex) {
      // Which moment a replica of a worker role is working on, until when: replicas of the judge or the
      // expander never ask the model about one moment at once, and a crashed worker's claims lapse.
      await knex.schema.createTable('worker_claims', (table) => {
        table.text('role').notNullable();
        table.bigInteger('moment_id').notNullable().references('id').inTable('moments').onDelete('CASCADE');
        table.timestamp('until', { useTz: true }).notNullable();
        table.primary(['role', 'moment_id']);
      });
    },
    async down(knex: Knex) {
      await knex.schema.dropTable('worker_claims');
    },
  },
  {
    name: '004_figure_names',
    async up(knex: Knex) {
      // entity_keys now holds the words of each figure's names (domain/figure-names.ts), no longer whole
      // lower-cased names; entity_names holds each name, to check that a query's words share one figure.
      // The graph service re-derives both for the stored moments on its next start (graph_meta figure_keys).
      await knex.schema.alterTable('moments', (table) => {
        table.specificType('entity_names', 'text[]').notNullable().defaultTo('{}');
      });
    },
    async down(knex: Knex) {
      await knex.schema.alterTable('moments', (table) => {
        table.dropColumn('entity_names');
      });
    },
  },
  {
    name: '005_claimed_versions',
    async up(knex: Knex) {
      // The moment's updated_at when it was claimed: a claim holds that version only, so a moment written
      // again (a writer's new proposal) is a candidate at once, while a replica that read an older version
      // can no longer claim it.
      await knex.schema.alterTable('worker_claims', (table) => {
        table.timestamp('version', { useTz: true });
      });
    },
    async down(knex: Knex) {
      await knex.schema.alterTable('worker_claims', (table) => {
        table.dropColumn('version');
      });
    },
  },
  {
    name: '006_withdraw_offline_placeholders',
    async up(knex: Knex) {
      // Earlier versions published placeholders when no text model was configured (the npm start default):
      // the Daily job's "Chronicle entry" moments at unknown/unknown/unknown and the Expander's "Aftermath
      // of" proposals. Made private and archived (kept, not deleted, in case someone linked them); the
      // Expander's placeholder descriptions of real moments are emptied.
      await knex('moments')
        .where((q) => q.where({ source_type: 'daily', country: 'unknown' }).andWhereLike('event_name', 'Chronicle entry %'))
        .orWhere((q) => q.andWhereLike('description', 'Placeholder proposed offline:%'))
        .update({ status: 'archived', visibility: 'private', updated_at: knex.fn.now() });
      await knex('moments')
        .whereLike('description', 'Placeholder written offline (no text model is configured):%')
        .update({ description: '', updated_at: knex.fn.now() });
    },
    async down() {
      // Nothing to restore: the placeholders were never real.
    },
  },
];
