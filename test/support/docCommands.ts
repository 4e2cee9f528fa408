/**
 * The shell commands the docs print: every line of a ```sh or ```bash block of README.md and
 * docs/*.md (a line ending in `\` joined with the next), with the file and the section it is in.
 * test/unit/docCommands.test.ts checks each has a home (run as printed by a lab test, or why
 * not); test/integration/dgxOs.test.ts runs the README's two-Spark quickstart and
 * docs/operations.md's as printed against the lab's DGX-OS-like pair.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { findRepoRoot } from "./repoRoot";

export interface DocCommand {
    /** README.md or a file under docs/. */
    file: string;
    /** The `## ` heading the block is under. */
    section: string;
    /** The command line as printed (comment included). */
    line: string;
}

/** Every command line of the docs' shell blocks, in order. */
export function docCommands(root = findRepoRoot()): DocCommand[] {
    const files = [
        "README.md",
        ...fs
            .readdirSync(path.join(root, "docs"))
            .filter((f) => f.endsWith(".md"))
            .map((f) => `docs/${f}`),
    ];
    const out: DocCommand[] = [];
    for (const file of files) {
        let section = "";
        let inBlock = false;
        let pending = "";
        for (const raw of fs.readFileSync(path.join(root, file), "utf8").split("\n")) {
            if (!inBlock && raw.startsWith("## ")) section = raw.slice(3).trim();
            if (/^```(sh|bash)\s*$/.test(raw)) {
                inBlock = true;
                continue;
            }
            if (inBlock && raw.startsWith("```")) {
                inBlock = false;
                continue;
            }
            if (!inBlock) continue;
            const line = pending + raw;
            if (line.endsWith("\\")) {
                pending = `${line.slice(0, -1).trimEnd()} `;
                continue;
            }
            pending = "";
            if (line.trim() === "" || line.trim().startsWith("#")) continue;
            out.push({ file, section, line: line.trim() });
        }
    }
    return out;
}

/** The commands of the README's two-Spark quickstart and docs/operations.md that dgxOs.test.ts runs as printed, in order. */
export function quickstartCommands(all = docCommands()): DocCommand[] {
    return all.filter((c) => (c.file === "README.md" && c.section === "Quickstart: two DGX Sparks") || c.file === "docs/operations.md");
}

/**
 * Commands of the quickstart and docs/operations.md that need real hardware or a person, with
 * why: the lab test stands in for what each does (it writes the stack's file, the lab's key is
 * authorised already), or another test runs it.
 */
export const NOT_RUN_BY_THE_QUICKSTART_TEST: Readonly<Record<string, string>> = {
    'ssh-keygen -t ed25519 -N "" -f ~/.ssh/spark_cluster': "makes the reader's own key; the lab's key (lab/.state/id_ed25519) is authorised for nvidia already",
    "ssh-copy-id -i ~/.ssh/spark_cluster.pub nvidia@10.0.0.11    # each Spark's management address, as that user":
        "real Sparks' addresses; the lab's key is authorised already",
    "ssh-copy-id -i ~/.ssh/spark_cluster.pub nvidia@10.0.0.12": "real Sparks' addresses; the lab's key is authorised already",
    "cp stacks/Pulumi.spark-pair.yaml stacks/Pulumi.my-pair.yaml":
        "the test writes stacks/Pulumi.my-pair.yaml itself: spark-pair's file edited for the lab, as the quickstart's next step says",
    "./scripts/bench-serve.sh --stack dev    # random 1024 in / 128 out, 100 prompts, rate inf (the community guides' flags)":
        "a load benchmark of the lab's dev stack: run by test/integration/spark-pair.test.ts's serving benchmark",
};

/** The README's lab commands that test/integration/readmeLab.test.ts runs as printed, in this order. */
export const README_LAB_COMMANDS: readonly string[] = [
    "./scripts/demo.sh    # bring up the lab cluster (2 simulated Sparks) and answer a chat request through it",
    "lab/lab.sh up                                      # the two nodes (30-60 s when the cache is warm)",
    "./scripts/pulumi.sh --stack dev preview --diff     # what up would do",
    "./scripts/pulumi.sh --stack dev up",
    "./scripts/pulumi.sh --stack dev stack output tryIt # a curl line; paste it into bash",
    "./scripts/pulumi.sh --stack dev destroy            # the nodes as they were",
    "lab/lab.sh down",
];
