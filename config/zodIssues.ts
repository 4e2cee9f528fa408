// Translates zod's issues into ConfigIssues a person can act on: the key, what
// is wrong, the value (never a secret's), and an example read from the field's
// own `.meta({ example })` in the schema.
import { z } from "zod";
import { ConfigIssue, describeSecret, describeValue, formatPath } from "./issues";
import type { RawConfig } from "./raw";
import { ClusterConfigSchema, PRIVATE_KEY_TEXT } from "./schema";
import { SECRET_KEYS } from "./secret";
import { dockerOptionProblem } from "./dockerOptions";
import { extraArgProblem, modelEnvNameProblem, overrideKeyProblem } from "./valueRules";

const EXPECTED_TYPE_WORDS: Readonly<Record<string, string>> = {
    string: "must be a string",
    number: "must be a number",
    int: "must be a whole number",
    boolean: "must be true or false",
    object: "must be a mapping of keys to values",
    record: "must be a mapping of keys to values",
    array: "must be a list",
};

/** The per-parse zod error map: messages a person can act on, never containing the input. */
export const zodMessage: z.core.$ZodErrorMap = (issue) => {
    switch (issue.code) {
        case "invalid_type":
            if (issue.input === undefined) {
                return "is required";
            }
            return EXPECTED_TYPE_WORDS[issue.expected] ?? `must be of type ${issue.expected}`;
        case "too_small": {
            const min = Number(issue.minimum);
            if (issue.origin === "string") {
                return min <= 1 ? "must not be empty" : `must be at least ${min} characters long`;
            }
            if (issue.origin === "array") {
                return `must list at least ${min} item${min === 1 ? "" : "s"}`;
            }
            return issue.inclusive ? `must be at least ${min}` : `must be greater than ${min}`;
        }
        case "too_big": {
            const max = Number(issue.maximum);
            if (issue.origin === "string") {
                return `must be at most ${max} characters long`;
            }
            if (issue.origin === "array") {
                return `must list at most ${max} item${max === 1 ? "" : "s"}`;
            }
            return issue.inclusive ? `must be at most ${max}` : `must be less than ${max}`;
        }
        case "invalid_value":
            return issue.values.length === 1 ? `must be ${String(issue.values[0])}` : `must be one of ${issue.values.map(String).join(", ")}`;
        case "invalid_union":
            return "options" in issue && Array.isArray(issue.options)
                ? `must be one of ${issue.options.map(String).join(", ")}`
                : "matches none of the allowed forms";
        case "unrecognized_keys":
            return "is not a known key";
        default:
            return undefined;
    }
};

/** The known keys of the object at `path` (the runtime union picks its arm by the value's `kind`), for unknown-key messages. */
function knownKeys(raw: RawConfig, path: readonly PropertyKey[]): readonly string[] {
    const schema = schemaAt(path, raw.values);
    const object = schema && armOf(unwrap(schema).schema, valueAt(raw.values, [...path, "kind"]));
    return object && "shape" in object ? Object.keys(object.shape as object) : [];
}

/** The `kind`s of the other arms of the union at `path` that have the key `key` (a docker key on a venv runtime). */
function armsWithKey(raw: RawConfig, path: readonly PropertyKey[], key: string): string[] {
    const schema = schemaAt(path, raw.values);
    const def = schema && (unwrap(schema).schema._zod.def as { type: string; options?: z.ZodType[] });
    if (!def || def.type !== "union" || !def.options) {
        return [];
    }
    return def.options
        .map((option) => unwrap(option).schema as z.ZodObject)
        .filter((arm) => key in arm.shape)
        .map((arm) => [...((arm.shape["kind"] as z.ZodType | undefined)?._zod.values ?? [])].map(String)[0])
        .filter((kind): kind is string => kind !== undefined && kind !== valueAt(raw.values, [...path, "kind"]));
}

/** For a union of objects, the arm whose `kind` literal is `kind` (else the first); any other schema as it is. */
function armOf(schema: z.ZodType, kind: unknown): z.ZodType {
    const def = schema._zod.def as { type: string; options?: z.ZodType[] };
    if (def.type !== "union" || !def.options) {
        return schema;
    }
    const arms = def.options.map((option) => unwrap(option).schema as z.ZodObject);
    return arms.find((arm) => (arm.shape["kind"] as z.ZodType | undefined)?._zod.values?.has(kind as string)) ?? arms[0];
}

/** The innermost schema under optional/default/prefault wrappers, and every example met on the way. */
function unwrap(schema: z.ZodType): { schema: z.ZodType; examples: string[] } {
    const examples: string[] = [];
    let current: z.ZodType = schema;
    for (let depth = 0; depth < 10; depth++) {
        const example = current.meta()?.example;
        if (typeof example === "string") {
            examples.push(example);
        }
        const def = current._zod.def as { type: string; innerType?: z.ZodType };
        if (!["optional", "default", "prefault", "nullable", "readonly"].includes(def.type) || !def.innerType) {
            break;
        }
        current = def.innerType;
    }
    return { schema: current, examples };
}

/** The schema of the key at `path` in ClusterConfigSchema, or undefined where the path leaves it. */
function schemaAt(path: readonly PropertyKey[], root: unknown): z.ZodType | undefined {
    let schema: z.ZodType = ClusterConfigSchema;
    for (let i = 0; i < path.length; i++) {
        const segment = path[i];
        const inner = armOf(unwrap(schema).schema, valueAt(root, [...path.slice(0, i), "kind"]));
        const def = inner._zod.def as { type: string; element?: z.ZodType; valueType?: z.ZodType };
        let next: z.ZodType | undefined;
        if (def.type === "array" && typeof segment === "number") {
            next = def.element;
        } else if (def.type === "record") {
            next = def.valueType;
        } else if (def.type === "object") {
            next = (inner as z.ZodObject).shape[String(segment)] as z.ZodType | undefined;
        }
        if (next === undefined) {
            return undefined;
        }
        schema = next;
    }
    return schema;
}

/** The example of right values for the key at `path`, from the field's `.meta({ example })`. */
export function exampleFor(path: readonly PropertyKey[], root: unknown = {}): string {
    const schema = schemaAt(path, root);
    return (schema && unwrap(schema).examples[0]) ?? "see the doc comment of this key in config/schema.ts";
}

function isRecord(value: unknown): value is Record<string, unknown> {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The raw value at `path`, or undefined where the path leaves the value. */
export function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
    let current = root;
    for (const segment of path) {
        if (Array.isArray(current) && typeof segment === "number") {
            current = current[segment];
        } else if (isRecord(current) && typeof segment === "string" && Object.hasOwn(current, segment)) {
            current = current[segment];
        } else {
            return undefined;
        }
    }
    return current;
}

/** The edit distance between two short strings, a swap of neighbours counting as one edit (for "did you mean"). */
function editDistance(a: string, b: string): number {
    const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
    for (let i = 1; i <= a.length; i++) {
        for (let j = 1; j <= b.length; j++) {
            const cost = a[i - 1] === b[j - 1] ? 0 : 1;
            d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
                d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.length][b.length];
}

function closestKey(key: string, candidates: readonly string[]): string | undefined {
    let best: string | undefined;
    let bestDistance = Infinity;
    for (const candidate of candidates) {
        const distance = candidate.toLowerCase() === key.toLowerCase() ? 0 : editDistance(key, candidate);
        if (distance < bestDistance) {
            best = candidate;
            bestDistance = distance;
        }
    }
    return bestDistance <= Math.max(1, Math.floor(key.length / 3)) ? best : undefined;
}

const SECRET_LOOKING_KEY = /key|token|secret|passw|credential/i;

/** True when the value at this path must not be shown: a secret key, or a key that looks like one. */
function isSecretPath(path: readonly PropertyKey[], secretKeys: ReadonlySet<string>): boolean {
    const top = String(path[0] ?? "");
    if ((SECRET_KEYS as readonly string[]).includes(top) || secretKeys.has(top)) {
        return true;
    }
    const last = path[path.length - 1];
    return typeof last === "string" && SECRET_LOOKING_KEY.test(last) && !/path$/i.test(last);
}

function describeAt(raw: RawConfig, path: readonly PropertyKey[]): string {
    const value = valueAt(raw.values, path);
    const looksSecret = typeof value === "string" && PRIVATE_KEY_TEXT.test(value);
    return isSecretPath(path, raw.secretKeys) || looksSecret ? describeSecret(value) : describeValue(value);
}

/** Translates one zod issue into the issues a user sees (unknown keys get a "did you mean"). */
export function fromZodIssue(issue: z.core.$ZodIssue, raw: RawConfig): ConfigIssue[] {
    const path = issue.path;
    if (issue.code === "unrecognized_keys") {
        const known = knownKeys(raw, path);
        return issue.keys.map((key) => {
            const arms = armsWithKey(raw, path, key);
            if (arms.length > 0) {
                return {
                    path: formatPath([...path, key]),
                    message: `is a key of the ${arms.join(" or ")} ${String(path[path.length - 1])} only; this one is ${String(valueAt(raw.values, [...path, "kind"]))}`,
                    got: describeAt(raw, [...path, key]),
                    example: `remove it, or use kind: ${arms[0]}; the keys here are ${known.join(", ")}`,
                };
            }
            const suggestion = closestKey(key, known);
            return {
                path: formatPath([...path, key]),
                message: suggestion ? `is not a known key; did you mean "${suggestion}"?` : "is not a known key",
                got: describeAt(raw, [...path, key]),
                example: suggestion ? `${suggestion}: ${exampleFor([...path, suggestion], raw.values)}` : `remove it; the keys here are ${known.join(", ")}`,
            };
        });
    }
    if (issue.code === "invalid_key") {
        const key = String(path[path.length - 1]);
        const problem = path[0] === "model" && path[1] === "env" ? modelEnvNameProblem(key) : overrideKeyProblem(key);
        return [
            {
                path: formatPath(path),
                message: problem?.message ?? issue.issues.map((inner) => inner.message).join("; "),
                got: describeValue(key),
                example: problem?.example ?? exampleFor(path, raw.values),
            },
        ];
    }
    let example = exampleFor(path, raw.values);
    if (issue.code === "custom" && path[0] === "model" && path[1] === "extraArgs") {
        const value = valueAt(raw.values, path);
        example = (typeof value === "string" ? extraArgProblem(value)?.example : undefined) ?? example;
    }
    if (issue.code === "custom" && path[0] === "nodes" && path[2] === "runtime" && path[3] === "extraOptions") {
        const value = valueAt(raw.values, path);
        example = (typeof value === "string" ? dockerOptionProblem(value)?.example : undefined) ?? example;
    }
    return [{ path: formatPath(path), message: issue.message, got: describeAt(raw, path), example }];
}
