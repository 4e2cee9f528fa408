/**
 * Generates docs/configuration.md, the reference of every key under `spark-cluster:`, from the zod
 * schema itself: key paths, types, ranges, defaults, required keys and examples come from zod's
 * JSON Schema of `ClusterConfigSchema` (the `example` of each field's `.meta()` included), and
 * each key's description is the doc comment written above that field in the schema's source.
 *
 *   npm run docs:config            regenerate docs/configuration.md
 *
 * test/unit/docs.test.ts regenerates it in memory and fails when the committed file differs.
 */
import * as fs from "fs";
import * as path from "path";
import * as ts from "typescript";
import { z } from "zod";
import { ClusterConfigSchema } from "../config/schema";
import { CONFIG_NAMESPACE } from "../config/namespace";

/** The repository's root: this file runs from build/scripts/ after `tsc`. */
export const REPO_ROOT = path.resolve(__dirname, "..", "..");
/** Where the reference lives, relative to the repository root. */
export const REFERENCE_PATH = "docs/configuration.md";
/** The command that rewrites it. */
export const REGENERATE_COMMAND = "npm run docs:config";
/** The folder whose TypeScript files hold the schema's fields and their doc comments. */
export const SCHEMA_DIR = "config";

/** The TypeScript files of SCHEMA_DIR (not its subfolders), relative to the repository root. */
function schemaSources(root: string): string[] {
    return fs
        .readdirSync(path.join(root, SCHEMA_DIR))
        .filter((name) => name.endsWith(".ts"))
        .sort()
        .map((name) => `${SCHEMA_DIR}/${name}`);
}

/** A JSON Schema node as zod writes it (only what the reference reads). */
interface JsonSchema {
    type?: string;
    properties?: Record<string, JsonSchema>;
    required?: string[];
    items?: JsonSchema;
    oneOf?: JsonSchema[];
    anyOf?: JsonSchema[];
    enum?: unknown[];
    const?: unknown;
    default?: unknown;
    example?: string;
    minimum?: number;
    maximum?: number;
    exclusiveMinimum?: number;
    exclusiveMaximum?: number;
    minLength?: number;
    maxLength?: number;
    minItems?: number;
    maxItems?: number;
    additionalProperties?: JsonSchema | boolean;
    propertyNames?: JsonSchema;
}

/** Doc comments by key path (`nodes[].ssh.host`; a union's variants as `nodes[].runtime{1}.path`). */
export type DocMap = Map<string, string>;

/** The text of the doc comment (`/** … *\/`) attached to `node`, joined into one paragraph. */
function docComment(node: ts.Node, source: ts.SourceFile): string | undefined {
    const ranges = ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? [];
    const docs = ranges.map((r) => source.text.slice(r.pos, r.end)).filter((text) => text.startsWith("/**"));
    const last = docs[docs.length - 1];
    if (last === undefined) {
        return undefined;
    }
    return last
        .replace(/^\/\*\*/, "")
        .replace(/\*\/$/, "")
        .split("\n")
        .map((line) => line.replace(/^\s*\* ?/, "").trim())
        .filter((line) => line.length > 0)
        .join(" ")
        .replace(/\{@link ([^}]+)\}/g, "`$1`");
}

/** A top-level `const` of the schema's sources. */
interface Declaration {
    init: ts.Expression;
    doc?: string;
    source: ts.SourceFile;
}

/**
 * Every top-level `const NAME = …` of the schema's source files, with its initializer and doc
 * comment. `get(name, from)` prefers a declaration in the file `from` (a name declared in two
 * files resolves to the one beside its use), else the only one of that name.
 */
class Declarations {
    private readonly byName = new Map<string, Declaration[]>();

    add(name: string, declaration: Declaration): void {
        this.byName.set(name, [...(this.byName.get(name) ?? []), declaration]);
    }

    get(name: string, from?: ts.SourceFile): Declaration | undefined {
        const found = this.byName.get(name) ?? [];
        return found.find((d) => d.source === from) ?? (found.length === 1 ? found[0] : undefined);
    }
}

/** Reads every `const NAME = …` of the schema's source files: its initializer and its doc comment. */
function readDeclarations(root: string): Declarations {
    const declarations = new Declarations();
    for (const file of schemaSources(root)) {
        const source = ts.createSourceFile(file, fs.readFileSync(path.join(root, file), "utf8"), ts.ScriptTarget.ES2022, true);
        for (const statement of source.statements) {
            if (!ts.isVariableStatement(statement)) {
                continue;
            }
            for (const declaration of statement.declarationList.declarations) {
                if (ts.isIdentifier(declaration.name) && declaration.initializer) {
                    declarations.add(declaration.name.text, { init: declaration.initializer, doc: docComment(statement, source), source });
                }
            }
        }
    }
    return declarations;
}

/**
 * Collects the doc comment of every field, by key path, following the schema's source the way zod
 * nests it: `z.strictObject({...})` fields, `z.array(X)` as `[]`, `z.discriminatedUnion(_, [A, B])`
 * as variants `{0}`, `{1}`, a named schema through its `const`, and modifiers (`.optional()`,
 * `.default()`, `.meta()`, …) looked through.
 */
export function collectDocs(root: string = REPO_ROOT): DocMap {
    const declarations = readDeclarations(root);
    const docs: DocMap = new Map();
    const seen = new Set<string>();

    const walk = (expression: ts.Expression, at: string): void => {
        // Look through modifiers: X.optional(), X.meta({...}), X.default(...), ...
        let node: ts.Expression = expression;
        while (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && !isZodCall(node)) {
            node = node.expression.expression;
        }
        if (ts.isIdentifier(node)) {
            const declaration = declarations.get(node.text, node.getSourceFile());
            const key = `${node.text}@${at}`;
            if (declaration && !seen.has(key)) {
                seen.add(key);
                walk(declaration.init, at);
            }
            return;
        }
        if (!ts.isCallExpression(node) || !isZodCall(node)) {
            return;
        }
        const kind = (node.expression as ts.PropertyAccessExpression).name.text;
        const args = node.arguments;
        if ((kind === "strictObject" || kind === "object") && args[0] && ts.isObjectLiteralExpression(args[0])) {
            for (const property of args[0].properties) {
                if (!ts.isPropertyAssignment(property) || !(ts.isIdentifier(property.name) || ts.isStringLiteral(property.name))) {
                    continue;
                }
                const key = at === "" ? property.name.text : `${at}.${property.name.text}`;
                const own = docComment(property, property.getSourceFile());
                const named = namedSchemaDoc(property.initializer, declarations);
                const doc = own ?? named;
                if (doc !== undefined) {
                    docs.set(key, doc);
                }
                if (named !== undefined) {
                    docs.set(`${key}#`, named);
                }
                walk(property.initializer, key);
            }
        } else if (kind === "array" && args[0]) {
            const named = namedSchemaDoc(args[0], declarations);
            if (named !== undefined) {
                docs.set(`${at}[]#`, named);
            }
            walk(args[0], `${at}[]`);
        } else if ((kind === "discriminatedUnion" || kind === "union") && args.length > 0) {
            const options = args[args.length - 1];
            if (ts.isArrayLiteralExpression(options)) {
                options.elements.forEach((option, i) => {
                    const named = namedSchemaDoc(option, declarations);
                    if (named !== undefined) {
                        docs.set(`${at}{${i}}#`, named);
                    }
                    walk(option, `${at}{${i}}`);
                });
            }
        }
    };
    const top = declarations.get("ClusterConfigSchema", undefined);
    if (!top) {
        throw new Error(`gen-config-reference: no single ClusterConfigSchema in ${SCHEMA_DIR}/*.ts`);
    }
    walk(top.init, "");
    return docs;
}

/** `z.<kind>(...)`: a schema built by zod itself rather than a modifier of another schema. */
function isZodCall(node: ts.CallExpression): boolean {
    return ts.isPropertyAccessExpression(node.expression) && ts.isIdentifier(node.expression.expression) && node.expression.expression.text === "z";
}

/** The doc comment of the named schema a field's initializer starts from (`GpuMemoryGiBSchema`, …). */
function namedSchemaDoc(expression: ts.Expression, declarations: Declarations): string | undefined {
    let node: ts.Expression = expression;
    while (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
        node = node.expression.expression;
    }
    return ts.isIdentifier(node) ? declarations.get(node.text, node.getSourceFile())?.doc : undefined;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** A short type: `integer 1..65535`, `list of string (1-2)`, `"pair" \| "switch"`, `map of name → string`. */
function typeOf(schema: JsonSchema): string {
    if (schema.const !== undefined) {
        return `\`${JSON.stringify(schema.const)}\``;
    }
    if (schema.enum) {
        return schema.enum.map((value) => `\`${JSON.stringify(value)}\``).join(" or ");
    }
    const variants = schema.oneOf ?? schema.anyOf;
    if (variants) {
        return variants
            .map((variant) => {
                const discriminator = discriminatorOf(variant);
                return discriminator ? `object (${discriminator})` : typeOf(variant);
            })
            .join(" or ");
    }
    switch (schema.type) {
        case "integer":
        case "number": {
            const low = schema.minimum !== undefined ? `≥ ${schema.minimum}` : schema.exclusiveMinimum !== undefined ? `> ${schema.exclusiveMinimum}` : "";
            const high =
                schema.maximum !== undefined && schema.maximum < MAX_SAFE
                    ? `≤ ${schema.maximum}`
                    : schema.exclusiveMaximum !== undefined
                      ? `< ${schema.exclusiveMaximum}`
                      : "";
            if (schema.minimum !== undefined && schema.maximum !== undefined && schema.maximum < MAX_SAFE) {
                return `${schema.type} ${schema.minimum}..${schema.maximum}`;
            }
            return [schema.type, low, high].filter((part) => part !== "").join(" ");
        }
        case "string": {
            if (schema.minLength !== undefined && schema.maxLength !== undefined) {
                return `string (${schema.minLength}-${schema.maxLength} characters)`;
            }
            if (schema.maxLength !== undefined) {
                return `string (at most ${schema.maxLength} characters)`;
            }
            if (schema.minLength !== undefined && schema.minLength > 1) {
                return `string (at least ${schema.minLength} characters)`;
            }
            return "string";
        }
        case "array": {
            const items = schema.items ? typeOf(schema.items) : "any";
            const bounds =
                schema.minItems !== undefined && schema.maxItems !== undefined
                    ? ` (${schema.minItems}-${schema.maxItems})`
                    : schema.minItems !== undefined
                      ? ` (at least ${schema.minItems})`
                      : schema.maxItems !== undefined
                        ? ` (at most ${schema.maxItems})`
                        : "";
            return `list of ${items}${bounds}`;
        }
        case "object":
            if (schema.properties) {
                return "object";
            }
            if (typeof schema.additionalProperties === "object") {
                return `map of name → ${typeOf(schema.additionalProperties)}`;
            }
            return "object";
        default:
            return schema.type ?? "any";
    }
}

/** `kind: docker` for a union's variant told apart by a constant field, else undefined. */
function discriminatorOf(variant: JsonSchema): string | undefined {
    const found = Object.entries(variant.properties ?? {}).find(([, field]) => field.const !== undefined);
    return found ? `${found[0]}: ${String(found[1].const)}` : undefined;
}

function isEmptyObject(value: unknown): boolean {
    return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

/** Markdown table cell text: one line, pipes escaped. */
function cell(text: string): string {
    return text.replace(/\r?\n/g, " ").replace(/\|/g, "\\|");
}

/** Inline code that survives any backticks inside `text`. */
function code(text: string): string {
    const fence = text.includes("`") ? "``" : "`";
    const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
    return `${fence}${pad}${text}${pad}${fence}`;
}

/** GitHub's anchor of a Markdown heading: lowercase, punctuation dropped, spaces to `-`. */
export function headingAnchor(heading: string): string {
    return heading
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-");
}

/** A section: one object of the schema, its fields in one table. */
interface Section {
    path: string;
    /** What tells a union's variant apart, e.g. `kind: docker`. */
    variant?: string;
    intro?: string;
    rows: Array<{ key: string; type: string; fallback: string; description: string }>;
}

/** Renders the whole reference from the schema and the doc comments. */
export function renderReference(root: string = REPO_ROOT): string {
    const docs = collectDocs(root);
    const json = z.toJSONSchema(ClusterConfigSchema, { io: "input", unrepresentable: "any" }) as JsonSchema;
    const sections: Section[] = [];
    const undocumented: string[] = [];

    const objectSection = (schema: JsonSchema, at: string, docAt: string, variant?: string): void => {
        const section: Section = { path: at, variant, intro: at === "" ? undefined : (docs.get(`${docAt}#`) ?? docs.get(docAt)), rows: [] };
        sections.push(section);
        const required = new Set(schema.required ?? []);
        const nested: Array<() => void> = [];
        for (const [name, field] of Object.entries(schema.properties ?? {})) {
            const key = at === "" ? name : `${at}.${name}`;
            const docKey = docAt === "" ? name : `${docAt}.${name}`;
            const doc = docs.get(docKey);
            if (doc === undefined) {
                undocumented.push(key);
            }
            const fallback =
                field.default === undefined
                    ? required.has(name)
                        ? "**required**"
                        : "—"
                    : isEmptyObject(field.default)
                      ? "its keys' defaults"
                      : code(JSON.stringify(field.default));
            const example = field.example !== undefined ? ` Example: ${code(field.example)}.` : "";
            section.rows.push({ key, type: typeOf(field), fallback, description: (doc ?? "") + example });
            nested.push(() => descend(field, key, docKey));
        }
        nested.forEach((next) => next());
    };

    const descend = (schema: JsonSchema, at: string, docAt: string): void => {
        if (schema.properties) {
            objectSection(schema, at, docAt);
        } else if (schema.type === "array" && schema.items) {
            descend(schema.items, `${at}[]`, `${docAt}[]`);
        } else if (schema.oneOf ?? schema.anyOf) {
            (schema.oneOf ?? schema.anyOf ?? []).forEach((variant, i) => {
                if (variant.properties) {
                    objectSection(variant, at, `${docAt}{${i}}`, discriminatorOf(variant) ?? `variant ${i + 1}`);
                }
            });
        }
    };
    objectSection(json, "", "");
    if (undocumented.length > 0) {
        throw new Error(`gen-config-reference: these keys have no doc comment in the schema: ${undocumented.join(", ")}`);
    }

    const out: string[] = [
        "# Configuration reference",
        "",
        `<!-- Generated from the zod schema (config/schema.ts and the files it imports) by scripts/gen-config-reference.ts. Do not edit: run \`${REGENERATE_COMMAND}\`. -->`,
        "",
        `Every key lives under the \`${CONFIG_NAMESPACE}:\` namespace of a stack's config file, e.g.`,
        `\`${CONFIG_NAMESPACE}:model\` holds the \`model.*\` keys below. A bad value fails \`preview\` and \`up\``,
        "before any host is touched, with every problem listed and an example of a right value.",
        "Keys marked SECRET are set with `config set --secret` and never written in plaintext.",
        "`[]` in a key stands for every element of a list; a default of — means the description says",
        "what happens when the key is left out.",
        "",
    ];
    const titleOf = (section: Section) => (section.path === "" ? "Top-level keys" : code(section.path) + (section.variant ? ` (${section.variant})` : ""));
    // A key whose value has its own section links there from its type.
    const linkOf = (key: string): string | undefined => {
        const target = sections.find((section) => section.path === key || section.path === `${key}[]`);
        return target ? `#${headingAnchor(titleOf(target))}` : undefined;
    };
    for (const section of sections) {
        out.push(`## ${titleOf(section)}`, "");
        if (section.intro) {
            out.push(section.intro, "");
        }
        out.push("| key | type | default | description |", "| --- | --- | --- | --- |");
        for (const row of section.rows) {
            const link = linkOf(row.key);
            const type = link ? `[${cell(row.type)}](${link})` : cell(row.type);
            out.push(`| ${code(row.key)} | ${type} | ${cell(row.fallback)} | ${cell(row.description)} |`);
        }
        out.push("");
    }
    return out.join("\n");
}

if (require.main === module) {
    const target = path.join(REPO_ROOT, REFERENCE_PATH);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, renderReference());
    console.log(`wrote ${REFERENCE_PATH}`);
}
