import type { Knex } from '@tempora/kit/data';

/** Small facts about the stored graph (`graph_meta`): which seed is loaded, which days daily has done. */
export class GraphMeta {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async get(key: string): Promise<string | undefined> {
    const row = (await this.knex('graph_meta').where({ key }).first('value')) as { value: string } | undefined;
    return row?.value;
  }

  async set(key: string, value: string): Promise<void> {
    await this.knex('graph_meta').insert({ key, value }).onConflict('key').merge();
  }
}
