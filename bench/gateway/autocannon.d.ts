/** The part of autocannon's API the gateway benchmark uses (the package ships no types). */
declare module 'autocannon' {
  interface Histogram {
    average: number;
    p50: number;
    p99: number;
  }
  interface Result {
    requests: Histogram;
    latency: Histogram;
    errors: number;
    non2xx: number;
  }
  export default function autocannon(options: { url: string; headers?: Record<string, string>; connections?: number; duration?: number; pipelining?: number }): Promise<Result>;
}
