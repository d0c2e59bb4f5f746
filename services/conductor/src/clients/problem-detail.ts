/** What a peer's refusal says: its problem's `detail`, else the start of its body. */
export function problemDetail(text: string): string {
  try {
    return String((JSON.parse(text) as { detail?: unknown }).detail ?? text).slice(0, 300);
  } catch {
    return text.slice(0, 300);
  }
}
