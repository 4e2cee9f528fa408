/** The stack config as Pulumi holds it, before any validation. */
export interface RawConfig {
    /** Every key under the spark-cluster: namespace, WITHOUT the prefix, values already JSON-parsed objects/strings as Pulumi gives them. */
    values: Record<string, unknown>;
    /** Keys (without prefix) that Pulumi holds as secrets (set with --secret). */
    secretKeys: ReadonlySet<string>;
    /** The stack's name (derived secrets differ per stack). Defaults to "dev". */
    stack?: string;
    /** The model directory's config.json, when model.source is a directory the caller could read. Defaults to none. */
    modelConfigJson?: unknown;
}

/** Structured config (objects, lists) arrives from Pulumi as JSON text; everything else stays a string. */
export function decodeConfigValue(text: string): unknown {
    if (/^\s*[[{]/.test(text)) {
        try {
            return JSON.parse(text);
        } catch {
            return text;
        }
    }
    return text;
}
