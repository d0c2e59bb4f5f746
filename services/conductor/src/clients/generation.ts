import { z } from 'zod';
import type { RenderedScene, SceneRenderer, SceneRequest } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { PlatformPeer } from './platform-client.ts';

/**
 * The parts of the scene the conductor reads that the generation service's document leaves open (its
 * `moment`, `scene`, `characters` and `dialog` are open objects, and `model_provider` is not listed), checked
 * here after the client has checked the rest.
 */
const SceneParts = z.object({
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
  private readonly peer: PlatformPeer;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.peer = new PlatformPeer(baseUrl, serviceKey, timeoutMs, 'the generation service');
  }

  async render(userId: string, request: SceneRequest, requestId: string, signal: AbortSignal): Promise<RenderedScene> {
    const scene = await this.peer.call({ userId, requestId, signal }, (init) =>
      this.peer.api.POST('/api/v1/timepoints/generate/sync', { body: request, ...init }),
    );
    const parts = SceneParts.safeParse(scene);
    if (!parts.success) {
      const issue = parts.error.issues[0]!;
      throw new ToolFailure(`the generation service answered outside its schema: ${issue.path.join('.') || 'the body'}: ${issue.message} (its 200 answer)`);
    }
    const { moment, characters, dialog, model_provider } = parts.data;
    return {
      id: scene.id,
      title: scene.title,
      year: scene.year,
      path: scene.path,
      url: `/api/v1/timepoints/${scene.id}`,
      image_url: scene.image_url ?? null,
      summary: moment.summary ?? parts.data.scene.description ?? '',
      characters: characters.map((character) => character.name).slice(0, 8),
      dialog: dialog.slice(0, 4).map((line) => `${line.speaker}: ${line.text}`),
      model_provider,
    };
  }
}
