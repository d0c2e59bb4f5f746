import { publicSurface } from '../../typescript/scripts/surface.ts';

type Schema = Record<string, unknown>;
interface Operation {
  operationId: string;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const pascal = (name: string) => name[0]!.toUpperCase() + name.slice(1);

/**
 * The public surface the TypeScript client is made from (clients/typescript/scripts/surface.ts), with each
 * answer and request body that the services document inline moved into components under its operation's
 * name (`ListMomentsAnswer200`, `SendMessageBody`): the model generator makes classes only of components, and
 * every answer then has a model of its own name to be validated against.
 */
function pythonDocument(): ReturnType<typeof publicSurface> {
  const surface = publicSurface();
  const schemas = surface.components.schemas as Record<string, Schema>;
  const hoisted = (schema: Schema | undefined, name: string) => {
    if (!schema || '$ref' in schema) return schema;
    if (schemas[name]) throw new Error(`${name} is already a component`);
    schemas[name] = schema;
    return { $ref: `#/components/schemas/${name}` };
  };
  for (const item of Object.values(surface.paths)) {
    for (const method of METHODS) {
      const operation = item[method] as unknown as Operation | undefined;
      if (!operation) continue;
      const name = pascal(operation.operationId);
      for (const content of Object.values(operation.requestBody?.content ?? {})) content.schema = hoisted(content.schema, `${name}Body`);
      for (const [status, answer] of Object.entries(operation.responses))
        for (const [media, content] of Object.entries(answer.content ?? {}))
          if (media === 'application/json') content.schema = hoisted(content.schema, `${name}Answer${status}`);
    }
  }
  return surface;
}

export const documentText = () => `${JSON.stringify(pythonDocument(), null, 2)}\n`;
