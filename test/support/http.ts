/** Small fetch wrapper for tests: JSON in, status, headers and parsed body out. */
export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export async function request<T = any>(base: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown; raw?: string } = {}): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined = init.raw;
  if (init.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(init.body);
  }
  const response = await fetch(`${base}${path}`, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  return { status: response.status, headers: response.headers, body: (type.includes('json') && text ? JSON.parse(text) : text) as T };
}
