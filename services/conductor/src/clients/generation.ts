import { ServiceClient } from '@tempora/kit/http';
import type { RenderedScene, SceneRenderer, SceneRequest } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { problemDetail } from './problem-detail.ts';

/**
 * Scenes through the generation service: `POST /api/v1/timepoints/generate/sync` with the conductor's
 * X-Service-Key and the user's X-User-ID (the scene is the user's), as the gateway's proxy would send it.
 */
export class GenerationClient implements SceneRenderer {
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs);
  }

  async render(userId: string, request: SceneRequest, requestId: string, signal: AbortSignal): Promise<RenderedScene> {
    let reply;
    try {
      reply = await this.service.call('POST', '/api/v1/timepoints/generate/sync', { requestId, headers: { 'x-user-id': userId }, json: request, signal });
    } catch (error) {
      throw new ToolFailure(`the generation service could not be reached or did not answer in time: ${(error as Error).message}`);
    }
    if (reply.status !== 200) throw new ToolFailure(`the generation service answered ${reply.status}: ${problemDetail(reply.text)}`);
    let scene: Record<string, any>;
    try {
      scene = JSON.parse(reply.text) as Record<string, any>;
    } catch {
      throw new ToolFailure('the generation service answered with a body that is not JSON');
    }
    if (typeof scene.id !== 'string') throw new ToolFailure('the generation service answered without a scene id');
    return {
      id: scene.id,
      title: String(scene.title ?? scene.query ?? request.query),
      year: typeof scene.year === 'number' ? scene.year : null,
      path: typeof scene.path === 'string' ? scene.path : null,
      url: `/api/v1/timepoints/${scene.id}`,
      image_url: typeof scene.image_url === 'string' ? scene.image_url : null,
      summary: String(scene.moment?.summary ?? scene.scene?.description ?? ''),
      characters: Array.isArray(scene.characters) ? scene.characters.map((character: { name?: unknown }) => String(character.name)).slice(0, 8) : [],
      dialog: Array.isArray(scene.dialog)
        ? scene.dialog.slice(0, 4).map((line: { speaker?: unknown; text?: unknown }) => `${String(line.speaker)}: ${String(line.text)}`)
        : [],
      model_provider: String(scene.model_provider ?? 'unknown'),
    };
  }
}
