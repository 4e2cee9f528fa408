// A fact about a node: the read-only bash that reports it and the parser of what it printed, kept
// together (pyinfra's FactBase: `command` and `process` on one class). Several facts run as one
// script, one section each, so a node is asked once; `parseFacts` hands each parser its section.
// A fact that is a step of its own is a `Probe`: its script and its parser.
import { bashScript } from "./host/shell";

/** One fact: the lines that print it (as root, changing nothing) and how to read what they printed. */
export interface Fact<T> {
    /** A short name, unique among the facts of one script: `[a-z][a-z0-9-]*`. */
    name: string;
    /** Bash lines; they run in a subshell of their own, so `exit` ends the fact, not the script. */
    lines: readonly string[];
    /** Reads the section the lines printed (stdout and stderr together). */
    parse(section: string): T;
}

/**
 * A fact read by a step of its own (the hardware, engine, Ray and LLDP probes; the link checks):
 * the script the step runs, from what is known of the node before it runs, and the parser of what
 * it printed (its stdout). Its script is a step's input as it stands, so it is not one section of
 * {@link factsScript}: a deployed step keeps its script byte for byte.
 */
export interface Probe<S, T> {
    /** The step's script. */
    script(spec: S): string;
    /** Reads what the script printed. */
    parse(stdout: string): T;
}

/** The line that starts a fact's section in the output. */
export const FACT_SECTION_PREFIX = "--- spark-cluster fact ";

/** The facts' values, by name, as their parsers read them. */
export type FactValues<F extends Record<string, Fact<unknown>>> = { [K in keyof F]: F[K] extends Fact<infer T> ? T : never };

/**
 * The script that prints every fact, each in its own section (`--- spark-cluster fact NAME`):
 * a fact whose commands fail prints what they said and the script goes on (it always exits 0).
 */
export function factsScript(facts: Readonly<Record<string, Fact<unknown>>>): string {
    const lines: string[] = [];
    for (const fact of Object.values(facts)) {
        if (!/^[a-z][a-z0-9-]*$/.test(fact.name)) throw new Error(`fact name ${JSON.stringify(fact.name)}: use [a-z][a-z0-9-]*`);
        lines.push(`echo '${FACT_SECTION_PREFIX}${fact.name}'`, `( set +e`, ...fact.lines.map((l) => `  ${l}`), `) 2>&1 || true`);
    }
    return bashScript(lines);
}

/** Each fact's section of `output` (the text after its header line, up to the next header), by name. */
export function factSections(output: string): Map<string, string> {
    const sections = new Map<string, string>();
    let name: string | undefined;
    let body: string[] = [];
    const flush = () => {
        if (name !== undefined) sections.set(name, body.join("\n"));
    };
    for (const line of output.split("\n")) {
        if (line.startsWith(FACT_SECTION_PREFIX)) {
            flush();
            name = line.slice(FACT_SECTION_PREFIX.length).trim();
            body = [];
        } else if (name !== undefined) {
            body.push(line);
        }
    }
    flush();
    return sections;
}

/** Every fact of `facts` read from `output` (a fact with no section reads an empty one). */
export function parseFacts<F extends Record<string, Fact<unknown>>>(facts: F, output: string): FactValues<F> {
    const sections = factSections(output);
    return Object.fromEntries(Object.entries(facts).map(([key, fact]) => [key, fact.parse(sections.get(fact.name) ?? "")])) as FactValues<F>;
}
