// Checks on the raw stack config that must run before the schema sees it.
import { ConfigIssue, formatPath } from "./issues";
import { exampleFor } from "./zodIssues";

/**
 * Object keys that JavaScript treats as the prototype link. zod 4's `z.record` (like any plain
 * object assignment) drops such a key without a word, so a value under it would be neither
 * rendered nor refused. No key of this config may have that name.
 */
const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(["__proto__"]);

/** Every own key named `__proto__`, at any depth of the raw values, as an issue naming where it is. */
export function checkNoPrototypeKeys(values: Readonly<Record<string, unknown>>): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const visit = (node: unknown, path: PropertyKey[], depth: number): void => {
        if (depth > 64 || node === null || typeof node !== "object") {
            return;
        }
        if (Array.isArray(node)) {
            node.forEach((item, index) => visit(item, [...path, index], depth + 1));
            return;
        }
        for (const key of Object.keys(node)) {
            const child = Object.getOwnPropertyDescriptor(node, key)?.value;
            if (PROTOTYPE_KEYS.has(key)) {
                issues.push({
                    path: formatPath([...path, key]),
                    message: `is a key name JavaScript reserves for the prototype, so it would be dropped without a word; use another name${path.length > 0 ? ` under ${formatPath(path)}` : ""}`,
                    got: JSON.stringify(key),
                    example: path.length > 0 ? `${formatPath(path)}: ${exampleFor(path, values)}` : "model: { source: Qwen/Qwen3-32B }",
                });
                continue;
            }
            visit(child, [...path, key], depth + 1);
        }
    };
    visit(values, [], 0);
    return issues;
}
