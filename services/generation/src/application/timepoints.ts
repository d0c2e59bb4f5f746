import { forbidden, notFound, unauthorized } from '@tempora/kit/http';
import type { GenerationRepository, TimepointRow } from '../repository/index.ts';
import { type SceneRecord, sceneSummary, sceneTdf } from '../scene.ts';

/**
 * The stored scenes as their routes serve them, without Koa: a caller's list, one scene, its image, its
 * visibility and its deletion, each checked against the user the request is for (null when none).
 */
export class TimepointService {
  private readonly repository: GenerationRepository;
  private readonly version: string;

  constructor(repository: GenerationRepository, version: string) {
    this.repository = repository;
    this.version = version;
  }

  /** A page of the owner's scenes (public and private), newest first, as summaries. */
  async list(owner: string, limit: number, offset: number) {
    const page = await this.repository.timepoints.listByOwner(owner, limit, offset);
    return { items: page.items.map((row) => sceneSummary(row.record)), total: page.total };
  }

  /** One scene the user may see: its record, or with `tdf` its TDF envelope. */
  async scene(id: string, user: string | null, format: 'json' | 'tdf') {
    const row = await this.visible(id, user);
    return format === 'tdf' ? sceneTdf(row.record, this.version) : row.record;
  }

  /** A scene the user may see with its stored image; 404 when it has none. */
  async image(id: string, user: string | null): Promise<{ scene: TimepointRow; image: { mime_type: string; data: Buffer } }> {
    const scene = await this.visible(id, user);
    const image = await this.repository.timepoints.image(id);
    if (!image) throw notFound(`timepoint ${id} has no stored image`);
    return { scene, image };
  }

  /** Makes the user's scene public or private; its record as it now stands. */
  async setVisibility(id: string, user: string | null, visibility: 'public' | 'private'): Promise<SceneRecord> {
    await this.owned(id, user);
    const row = await this.repository.timepoints.setVisibility(id, visibility);
    if (!row) throw notFound(`no timepoint ${id}`);
    return row.record;
  }

  async delete(id: string, user: string | null): Promise<void> {
    await this.owned(id, user);
    await this.repository.timepoints.delete(id);
  }

  /** Private scenes exist only for their owner: anyone else gets 404, not 403, so nothing leaks. */
  private async visible(id: string, user: string | null): Promise<TimepointRow> {
    const row = await this.repository.timepoints.get(id);
    if (!row || (row.visibility === 'private' && row.owner !== user)) throw notFound(`no timepoint ${id}`);
    return row;
  }

  /** Changing or deleting a scene: its owner only. */
  private async owned(id: string, user: string | null): Promise<TimepointRow> {
    const found = await this.visible(id, user);
    if (!user) throw unauthorized('send X-User-ID (the gateway sets it)', 'ApiKey header="X-User-ID"');
    if (found.owner !== user) throw forbidden('only the owner of a scene may change it');
    return found;
  }
}
