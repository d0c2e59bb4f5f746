import { ServiceClient, UnexpectedAnswer } from '@tempora/kit/http';
import { z } from 'zod';

/** The fields of the generation service's scene record (docs/generation.md) that a layer-2 moment takes. */
export const RenderedScene = z.object({
  id: z.string().min(1),
  image_url: z.string().nullable().optional(),
  location: z.object({ latitude: z.number().nullable().optional(), longitude: z.number().nullable().optional() }).loose(),
  scene: z.object({ description: z.string().optional() }).loose(),
  moment: z.object({ summary: z.string().optional() }).loose(),
  characters: z.array(z.object({ name: z.string(), is_historical: z.boolean().optional() }).loose()),
  confidence: z.object({ overall: z.number().min(0).max(1).optional() }).loose(),
});
export type RenderedScene = z.output<typeof RenderedScene>;

/** A render that did not produce a scene; `retryable` false when asking again cannot help (a 4xx). */
export class RenderError extends Error {
  override name = 'RenderError';
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean) {
    super(message);
    this.retryable = retryable;
  }
}

/** What the renderer sends: the job's request as POST /generate recorded it. */
export interface RenderRequest {
  query: string;
  preset?: string;
  generate_image?: boolean;
}

/**
 * The renderer's calls to the generation service: `POST {GENERATION_URL}/api/v1/timepoints/generate/sync`
 * with X-Service-Key, the reverse of the generation service's graph lookups.
 */
export class GenerationClient {
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs, 'the generation service');
  }

  /**
   * `privateTo`: the moment is private, so its scene must be too. The generation service keeps a private
   * scene (and its image) for its owner, named by X-User-ID beside the service key; without one a scene is
   * public and ownerless, its image cached by anyone for a year (docs/generation.md, "Images").
   */
  async render(body: RenderRequest, context: { jobId: string; path: string; privateTo?: string }, signal?: AbortSignal): Promise<RenderedScene> {
    let reply;
    try {
      reply = await this.service.call('POST', '/api/v1/timepoints/generate/sync', {
        requestId: `render-${context.jobId}`,
        json: { ...body, ...(context.privateTo ? { visibility: 'private' } : {}), request_context: { graph_render_job: context.jobId, path: context.path } },
        headers: context.privateTo ? { 'x-user-id': context.privateTo } : {},
        signal,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new RenderError(`the generation service could not be reached: ${(error as Error).message}`, true);
    }
    if (reply.status !== 200)
      throw new RenderError(
        `the generation service answered ${reply.status}: ${reply.detail(500)}`,
        reply.status >= 500 || reply.status === 408 || reply.status === 429,
      );
    try {
      return reply.json(RenderedScene);
    } catch (error) {
      // Asking again brings the same scene: another version of the service, not a passing failure.
      if (error instanceof UnexpectedAnswer) throw new RenderError(error.message, false);
      throw error;
    }
  }

  /** The scene's image as an absolute URL: the generation service may hand out a path of its own. */
  imageUrl(scene: RenderedScene): string | null {
    return scene.image_url ? new URL(scene.image_url, `${this.service.baseUrl}/`).toString() : null;
  }
}
