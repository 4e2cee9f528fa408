/** The stack config as Pulumi holds it, before any validation. */
export interface RawConfig {
    /** Every key under the spark-cluster: namespace, WITHOUT the prefix, values already JSON-parsed objects/strings as Pulumi gives them. */
    values: Record<string, unknown>;
    /** Keys (without prefix) that Pulumi holds as secrets (set with --secret). */
    secretKeys: ReadonlySet<string>;
    /** The model directory's config.json, when model.source is a directory the caller could read. Defaults to none. */
    modelConfigJson?: unknown;
}

/**
 * Sets `values[key]` as an own property, whatever the key: a plain assignment to a key named
 * `__proto__` would set the object's prototype instead, past the raw check that refuses that name
 * (config/rawRules.ts) and past the schema's unknown-key check. Readers of the stack's keys use this.
 */
export function setRawValue(values: Record<string, unknown>, key: string, value: unknown): void {
    Object.defineProperty(values, key, { value, enumerable: true, writable: true, configurable: true });
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
