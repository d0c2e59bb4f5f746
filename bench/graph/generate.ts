import type { Knex } from '@tempora/kit/data';

/**
 * Fills an empty graph schema with `moments` synthetic moments and `perMoment` edges each, in SQL.
 * Targets are (s + offset_k) mod n with distinct pseudo-random offsets per k, so (source, target) pairs are
 * unique by construction and the graph is a random one with average degree 2 × perMoment.
 * Constraints and secondary indexes are dropped during the load and rebuilt after, as any bulk load does.
 */
export async function generateGraph(knex: Knex, moments: number, perMoment: number): Promise<void> {
  await knex.raw(
    `
    insert into moments (path, event_name, description, year, month_num, day, time, country, region, city, slug, era, type, layer, tags, confidence, source_type, search)
    select '/' || y || '/' || (array['january','february','march','april','may','june','july','august','september','october','november','december'])[mn] || '/' || d
             || '/1200/benchland/region-' || (i % 100) || '/city-' || (i % 5000) || '/moment-' || i,
           'Moment ' || i, '', y, mn, d, '1200', 'benchland', 'region-' || (i % 100), 'city-' || (i % 5000), 'moment-' || i,
           'modern', 'event', 1, array['tag-' || (i % 1000)], 0.8, 'bench', to_tsvector('english', 'Moment ' || i)
    from generate_series(1, ?::int) as i,
         lateral (select 1 + (i % 2024) as y, 1 + (i % 12) as mn, 1 + (i % 28) as d) as calendar`,
    [moments],
  );
  await knex.raw(
    'alter table edges drop constraint edges_source_id_foreign, drop constraint edges_target_id_foreign, drop constraint edges_source_id_target_id_type_unique',
  );
  await knex.raw('drop index edges_target_idx');
  await knex.raw(
    `
    insert into edges (source_id, target_id, type, weight, origin)
    select s, 1 + ((s - 1 + offs) % ?::bigint), (array['causes','caused_by','precedes','follows','influences','contemporaneous','same_location','thematic','same_era','same_conflict','same_figure','challenges'])[1 + ((s * 7 + k) % 12)],
           ((s * 31 + k * 17) % 100) / 100.0, 'bench'
    from generate_series(1, ?::bigint) as s,
         lateral (select k, 1 + ((k * 2654435761 + s * 40503) % (?::bigint - 1)) as offs from generate_series(1, ?::int) as k) as picks`,
    [moments, moments, moments, perMoment],
  );
  await knex.raw('alter table edges add constraint edges_source_id_target_id_type_unique unique (source_id, target_id, type)');
  await knex.raw('create index edges_target_idx on edges (target_id)');
  await knex.raw('alter table edges add constraint edges_source_id_foreign foreign key (source_id) references moments(id) on delete cascade');
  await knex.raw('alter table edges add constraint edges_target_id_foreign foreign key (target_id) references moments(id) on delete cascade');
  await knex.raw('analyze moments');
  await knex.raw('analyze edges');
}
