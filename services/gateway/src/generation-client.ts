import { Problem, ServiceClient, type ServiceReply } from '@tempora/kit/http';

/** The gateway's service calls to the generation service (account deletion and export). */
export class GenerationClient {
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs);
  }

  /**
   * DELETE /api/v1/users/{id}/timepoints: every scene of the user. A 404 (route or user unknown there)
   * means there is nothing to delete; any other failure stops the account deletion so it can be retried.
   */
  async deleteScenesOf(userId: string, requestId: string): Promise<{ deleted: number | null }> {
    let reply: ServiceReply;
    try {
      reply = await this.service.call('DELETE', `/api/v1/users/${encodeURIComponent(userId)}/timepoints`, { requestId });
    } catch {
      throw new Problem(502, 'the generation service could not be reached to delete your scenes; nothing was deleted, try again');
    }
    if (reply.status === 404) return { deleted: 0 };
    if (reply.status < 200 || reply.status >= 300) throw new Problem(502, `the generation service refused to delete your scenes (${reply.status}); nothing was deleted, try again`);
    try {
      const body = JSON.parse(reply.text) as { deleted?: unknown };
      return { deleted: typeof body.deleted === 'number' ? body.deleted : null };
    } catch {
      return { deleted: null };
    }
  }

  /** The user's scenes for the export, or the reason they could not be included. */
  async scenesOf(userId: string, requestId: string): Promise<{ scenes: unknown; error?: string }> {
    try {
      const reply = await this.service.call('GET', '/api/v1/users/me/timepoints?limit=1000', { requestId, headers: { 'x-user-id': userId } });
      if (reply.status === 404) return { scenes: [] };
      if (reply.status !== 200) return { scenes: null, error: `the generation service answered ${reply.status}` };
      return { scenes: JSON.parse(reply.text) as unknown };
    } catch {
      return { scenes: null, error: 'the generation service could not be reached' };
    }
  }
}
