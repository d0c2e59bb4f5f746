import { ServiceClient } from '@tempora/kit/http';
import { z } from 'zod';
import type { RenderedScene, SceneRenderer, SceneRequest } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { readAnswer } from './answers.ts';

/** The fields of the generation service's scene record (its OpenAPI `Scene`) the conductor reads. */
const Scene = z.object({
  id: z.string().min(1),
  title: z.string(),
  year: z.number().int(),
  path: z.string(),
  image_url: z.string().nullable().optional(),
  moment: z.object({ summary: z.string().optional() }),
  scene: z.object({ description: z.string().optional() }),
  characters: z.array(z.object({ name: z.string() })),
  dialog: z.array(z.object({ speaker: z.string(), text: z.string() })),
  model_provider: z.string(),
});

/**
 * Scenes through the generation service: `POST /api/v1/timepoints/generate/sync` with the conductor's
 * X-Service-Key and the user's X-User-ID (the scene is the user's), as the gateway's proxy would send it.
 */
export class GenerationClient implements SceneRenderer {
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs, 'the generation service');
  }

  async render(userId: string, request: SceneRequest, requestId: string, signal: AbortSignal): Promise<RenderedScene> {
    let reply;
    try {
      reply = await this.service.call('POST', '/api/v1/timepoints/generate/sync', { requestId, headers: { 'x-user-id': userId }, json: request, signal });
    } catch (error) {
      throw new ToolFailure(`the generation service could not be reached or did not answer in time: ${(error as Error).message}`);
    }
    if (reply.status !== 200) throw new ToolFailure(`the generation service answered ${reply.status}: ${reply.detail()}`);
    const scene = readAnswer(reply, Scene, ToolFailure);
    return {
      id: scene.id,
      title: scene.title,
      year: scene.year,
      path: scene.path,
      url: `/api/v1/timepoints/${scene.id}`,
      image_url: scene.image_url ?? null,
      summary: scene.moment.summary ?? scene.scene.description ?? '',
      characters: scene.characters.map((character) => character.name).slice(0, 8),
      dialog: scene.dialog.slice(0, 4).map((line) => `${line.speaker}: ${line.text}`),
      model_provider: scene.model_provider,
    };
  }
}
