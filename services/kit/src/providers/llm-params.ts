import { z } from 'zod';

/**
 * platform-interface.md, "llm_params": the sampling controls a request may set for every model call it
 * causes, every range exactly as stated; unknown keys are refused. Shared by the services that take them
 * (generation for each agent, simulation for each step).
 */
export const LlmParamsSchema = z
  .strictObject({
    temperature: z.number().min(0).max(2).optional(),
    max_tokens: z.number().int().min(1).max(32768).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.number().int().min(1).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional().meta({ description: 'aggregator only' }),
    presence_penalty: z.number().min(-2).max(2).optional().meta({ description: 'aggregator only' }),
    repetition_penalty: z.number().min(0).max(2).optional().meta({ description: 'aggregator only; multiplicative' }),
    stop: z.array(z.string().min(1)).max(4).optional(),
    thinking_level: z.enum(['none', 'low', 'medium', 'high']).optional().meta({ description: 'native provider only' }),
    system_prompt_prefix: z.string().max(2000).optional().meta({ description: 'at most 2000 characters (UTF-16 code units)' }),
    system_prompt_suffix: z.string().max(2000).optional().meta({ description: 'at most 2000 characters (UTF-16 code units)' }),
  })
  .meta({ id: 'LlmParams' });
export type LlmParams = z.output<typeof LlmParamsSchema>;
