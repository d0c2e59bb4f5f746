import { request } from 'undici';
import { Problem } from '@tempora/kit/errors';

/** The gateway's service calls to the generation service (account deletion and export). */
export class GenerationClient {
  private readonly baseUrl: string;
  private readonly serviceKey: string | undefined;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.serviceKey = serviceKey;
    this.timeoutMs = timeoutMs;
  }

  private headers(requestId: string, extra: Record<string, string> = {}): Record<string, string> {
    return { accept: 'application/json', 'x-request-id': requestId, ...(this.serviceKey ? { 'x-service-key': this.serviceKey } : {}), ...extra };
  }

  /**
   * DELETE /api/v1/users/{id}/timepoints: every scene of the user. A 404 (route or user unknown there)
   * means there is nothing to delete; any other failure stops the account deletion so it can be retried.
   */
  async deleteScenesOf(userId: string, requestId: string): Promise<{ deleted: number | null }> {
    let status: number;
    let text = '';
    try {
      const response = await request(`${this.baseUrl}/api/v1/users/${encodeURIComponent(userId)}/timepoints`, {
        method: 'DELETE',
        headers: this.headers(requestId),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch {
      throw new Problem(502, 'the generation service could not be reached to delete your scenes; nothing was deleted, try again');
    }
    if (status === 404) return { deleted: 0 };
    if (status < 200 || status >= 300) throw new Problem(502, `the generation service refused to delete your scenes (${status}); nothing was deleted, try again`);
    try {
      const body = JSON.parse(text) as { deleted?: unknown };
      return { deleted: typeof body.deleted === 'number' ? body.deleted : null };
    } catch {
      return { deleted: null };
    }
  }

  /** The user's scenes for the export, or the reason they could not be included. */
  async scenesOf(userId: string, requestId: string): Promise<{ scenes: unknown; error?: string }> {
    try {
      const response = await request(`${this.baseUrl}/api/v1/users/me/timepoints?limit=1000`, {
        method: 'GET',
        headers: this.headers(requestId, { 'x-user-id': userId }),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      const text = await response.body.text();
      if (response.statusCode === 404) return { scenes: [] };
      if (response.statusCode !== 200) return { scenes: null, error: `the generation service answered ${response.statusCode}` };
      return { scenes: JSON.parse(text) as unknown };
    } catch {
      return { scenes: null, error: 'the generation service could not be reached' };
    }
  }
}
