import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { BEARER, requireCaller, SERVICE } from '../auth.ts';
import { SettingsPatch, SettingsSchema } from '../domain/settings.ts';
import type { ConductorRouteDeps } from './context.ts';

export function settingsRoutes({ service }: ConductorRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/conductor/settings',
      operationId: 'getSettings',
      summary: "The account's four conductor options (defaults until set)",
      tags: ['settings'],
      security: [BEARER, SERVICE],
      responses: { 200: { description: 'The options', schema: SettingsSchema } },
      handler: (ctx) => service.settings(requireCaller(ctx).userId),
    }),
    defineRoute({
      method: 'patch',
      path: '/api/v1/conductor/settings',
      operationId: 'updateSettings',
      summary: "Set some of the account's conductor options; the others keep their values",
      tags: ['settings'],
      security: [BEARER, SERVICE],
      body: SettingsPatch,
      responses: { 200: { description: 'The options after the change', schema: SettingsSchema } },
      handler: (ctx, { body }) => service.patchSettings(requireCaller(ctx).userId, body),
    }),
  ];
}
