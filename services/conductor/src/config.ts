import { gatewayCallerConfigFields, jwksUrlOf } from '@tempora/kit/http';
import { defaultMcpAllowedHosts, mcpAllowedHostsField } from '@tempora/kit/mcp';
import { providerConfigFields } from '@tempora/kit/providers';
import { baseConfigSchema, optionalString } from '@tempora/kit/runtime';
import { z } from 'zod';

const ms = (fallback: number) => z.coerce.number().int().min(1).default(fallback);
const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);

export const ConductorConfigSchema = baseConfigSchema('conductor')
  .extend({
    ...providerConfigFields,
    /**
     * The model that chooses tools, by the spec's precedence: an explicit model first (`gemini-…` on the
     * native provider, `org/model` on the aggregator, `offline`), then CONDUCTOR_MODEL_POLICY, then the
     * server default (the native provider's, else the aggregator's, else the offline planner).
     */
    CONDUCTOR_MODEL: optionalString,
    /** `permissive`: an open-weight model through the aggregator; the native provider is never called. */
    CONDUCTOR_MODEL_POLICY: z.enum(['permissive']).optional(),
    CONDUCTOR_PERMISSIVE_MODEL: z.string().min(1).default('meta-llama/llama-3.3-70b-instruct'),
    CONDUCTOR_NATIVE_MODEL: z.string().min(1).default('gemini-2.5-flash'),
    CONDUCTOR_AGGREGATOR_MODEL: z.string().min(1).default('google/gemini-2.5-flash'),
    /** Model turns one request may take (each may call several tools). */
    CONDUCTOR_STEP_CAP: count(8, 64),
    /** Model tokens (input and output, every turn) one request may use. */
    CONDUCTOR_TOKEN_CAP: count(60_000, 10_000_000),
    /** Tool calls one model turn may make; calls past it are answered with an error. */
    CONDUCTOR_CALLS_PER_TURN: count(8, 64),
    /** Requests per minute by tier (free, pro, enterprise), for requests made directly; the gateway applies its own. */
    CONDUCTOR_RATE_LIMIT_FREE: count(10, 100_000),
    CONDUCTOR_RATE_LIMIT_PRO: count(60, 100_000),
    CONDUCTOR_RATE_LIMIT_ENTERPRISE: count(300, 100_000),
    CONDUCTOR_RATE_LIMIT_ANONYMOUS: count(60, 100_000),

    /** The gateway's access tokens, introspection and GATEWAY_SERVICE_KEY (also presented to its ledger): the kit's. */
    ...gatewayCallerConfigFields,
    /** X-Service-Key presented to each other peer; unset: the first SERVICE_KEY. */
    GRAPH_SERVICE_KEY: optionalString,
    GENERATION_SERVICE_KEY: optionalString,
    SIMULATION_SERVICE_KEY: optionalString,
    /** One scene render; below the gateway's UPSTREAM_TIMEOUT_MS (120 s) so a proxied request gets the conductor's answer. */
    RENDER_TIMEOUT_MS: ms(110_000),
    /** Every other peer call (graph, simulation, ledger). */
    PEER_TIMEOUT_MS: ms(15_000),
    /** How long the gateway's published prices are reused (the gateway serves them with max-age=300). */
    PRICES_TTL_MS: ms(300_000),
    /** A message left running this long (its process died) no longer holds its conversation. */
    MESSAGE_STALE_MS: ms(900_000),
    /** Period of the retry of refunds the gateway could not book when a tool failed. */
    REFUND_RETRY_MS: ms(30_000),
    /** Host and Origin names the MCP server answers (docs/conductor.md, "MCP"); unset: the kit's default for CONDUCTOR_URL. */
    MCP_ALLOWED_HOSTS: mcpAllowedHostsField,
  })
  .transform((config) => ({
    ...config,
    JWKS_URL: jwksUrlOf(config),
    MCP_ALLOWED_HOSTS: config.MCP_ALLOWED_HOSTS ?? defaultMcpAllowedHosts(config.CONDUCTOR_URL, config.TEMPORA_DOMAIN),
  }));
export type ConductorConfig = z.output<typeof ConductorConfigSchema>;
