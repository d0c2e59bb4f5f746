import { type Logger, pino } from 'pino';

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { component: 'tempora-operator', ...base } });
}
