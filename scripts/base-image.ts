/**
 * The Node 22 base our Dockerfiles build on (`ARG BASE_IMAGE`), as BuildKit is told it: an image reference
 * (a registry's, e.g. a mirror of node:22-slim), or a local OCI image layout written
 * `oci-layout://<absolute dir>@sha256:<digest>`, which BuildKit reads as a named build context instead of
 * pulling. The tests build on such a layout (test/k8s/build-base-images.sh); `npm run release` and the test
 * node pass it the same way, so that a release reuses the node's build cache.
 */
const LAYOUT = /^oci-layout:\/\/(\/[^@]+)@(sha256:[a-f0-9]{64})$/;
/** The name FROM resolves to when the base is a layout: no registry would answer for it, so BuildKit never pulls. */
export const LAYOUT_NAME = 'local/base:base';

/** buildctl's arguments for the base. */
export function buildctlBaseArgs(base: string): string[] {
  const layout = LAYOUT.exec(base);
  if (!layout) return [`--opt=build-arg:BASE_IMAGE=${base}`];
  return [
    `--oci-layout=basestore=${layout[1]}`,
    // The key is the name as written in FROM; with a registry prefix BuildKit would ignore it and pull.
    `--opt=context:${LAYOUT_NAME}=oci-layout://basestore@${layout[2]}`,
    `--opt=build-arg:BASE_IMAGE=${LAYOUT_NAME}`,
  ];
}

/** docker buildx's arguments for the base. */
export function buildxBaseArgs(base: string): string[] {
  return LAYOUT.test(base) ? [`--build-context=${LAYOUT_NAME}=${base}`, `--build-arg=BASE_IMAGE=${LAYOUT_NAME}`] : [`--build-arg=BASE_IMAGE=${base}`];
}
