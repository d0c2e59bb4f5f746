import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The generation service's sync endpoint, answering with its scene record's shape (docs/generation.md). */
export class FakeGeneration {
  readonly calls: Array<{ body: Record<string, unknown>; serviceKey: string | undefined; userId: string | undefined }> = [];
  /** Status to answer with; 200 renders a scene. */
  status = 200;
  delayMs = 0;
  /** The scene's coordinates; the generation service reports a place it does not know as (0, 0). */
  coordinates: [number, number] = [48.7, 2.46];
  /** Changes the scene before it is answered (an answer outside the service's schema). */
  reshape: ((scene: Record<string, unknown>) => unknown) | undefined;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer(async (request: IncomingMessage, response) => {
      let text = '';
      for await (const chunk of request) text += chunk;
      if (request.method !== 'POST' || request.url !== '/api/v1/timepoints/generate/sync') {
        response.writeHead(404).end();
        return;
      }
      const body = JSON.parse(text) as Record<string, unknown>;
      this.calls.push({ body, serviceKey: request.headers['x-service-key'] as string | undefined, userId: request.headers['x-user-id'] as string | undefined });
      if (this.delayMs) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
      if (this.status !== 200) {
        response.writeHead(this.status, { 'content-type': 'application/problem+json' });
        response.end(JSON.stringify({ type: 'about:blank', title: 'failed', status: this.status, detail: `agent Timeline failed (${this.status})` }));
        return;
      }
      const id = randomUUID();
      response.writeHead(200, { 'content-type': 'application/json' });
      const scene: Record<string, unknown> = {
        id,
        query: body.query,
        slug: 'first-tour-de-france',
        status: 'completed',
        title: 'The first Tour de France',
        year: 1903,
        month: 7,
        month_name: 'july',
        day: 1,
        time: '1516',
        era: 'modern',
        path: '1903/july/1/1516/france/ile-de-france/montgeron/first-tour-de-france',
        location: {
          name: 'Café Au Réveil Matin',
          city: 'Montgeron',
          region: 'Île-de-France',
          country: 'France',
          latitude: this.coordinates[0],
          longitude: this.coordinates[1],
        },
        scene: { title: 'Montgeron', description: 'Sixty riders at a roadside café.', atmosphere: 'dusty' },
        characters: [
          { name: 'Henri Desgrange', role: 'organiser', is_historical: true },
          { name: 'A café waiter', role: 'witness', is_historical: false },
        ],
        relationships: [],
        moment: { summary: 'Sixty cyclists set off on a 2,428 km race around France.' },
        camera: {},
        dialog: [{ speaker: 'Henri Desgrange', text: 'Allez!', tone: 'proud' }],
        critique: null,
        image_prompt: 'riders at dawn',
        image_url: body.generate_image ? `/api/v1/timepoints/${id}/image` : null,
        confidence: { overall: 0.82, temporal: 0.95 },
        sources: [],
        model_provider: 'offline',
        models: {},
        visibility: body.visibility ?? 'public',
        request_context: body.request_context,
      };
      response.end(JSON.stringify(this.reshape ? this.reshape(scene) : scene));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
