// Minimal types for js-yaml (a dependency of @pulumi/pulumi that ships no types): only what the
// stack tests use.
declare module "js-yaml" {
    export function load(text: string, options?: { filename?: string }): unknown;
}
