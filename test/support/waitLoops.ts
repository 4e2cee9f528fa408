/**
 * Finds the loops in a rendered script and tells the waits among them: a loop that sleeps (bash
 * `sleep`, or Python's `time.sleep` in a program the script hands the runtime). Every wait in a
 * rendered script is to be `sc_wait` (components/render/host/lib.ts) or one of
 * {@link WAIT_EXCEPTIONS}: the unit tier checks every plan's scripts against that, the mocked tier
 * every command the program registers.
 */

/** One loop of a script. */
export interface ScriptLoop {
    /** `bash` or `python` (a program the script passes to the runtime's interpreter). */
    language: "bash" | "python";
    /** The loop's first line, from its keyword to `do` (bash) or to its `:` (Python), spaces trimmed. */
    header: string;
    /** The loop sleeps: it waits for something (or paces retries). */
    wait: boolean;
    /** It is `sc_wait`'s own loop (the helper every wait is to use). */
    helper: boolean;
}

/** A bash `do` or `done` token: a word of its own, not part of `done-x` or `$done_dir`. */
const BASH_TOKEN = /(?<=^|[\s;])(do|done)(?=$|[\s;)|&>"'])/gm;
/** A bash loop at a command's start, up to its `; do` on the same line. */
const BASH_LOOP = /(?<=^|[;&|({]|\bthen|\bdo|\belse)[ \t]*((?:while|until|for)\s[^\n]*?;\s*do)(?=$|[\s;])/gm;
/** A Python loop header: a line of its own ending in `:`. */
const PYTHON_LOOP = /^([ \t]*)((?:while|for)\s[^\n]*:)[ \t]*$/gm;

/** The loops of `script`, in order of their headers. */
export function loopsIn(script: string): ScriptLoop[] {
    const loops: (ScriptLoop & { at: number })[] = [];
    for (const match of script.matchAll(BASH_LOOP)) {
        const header = match[1];
        const start = (match.index ?? 0) + match[0].length;
        // The body: up to the `done` that closes this loop's `do`.
        let depth = 1;
        let end = script.length;
        BASH_TOKEN.lastIndex = start;
        for (let token = BASH_TOKEN.exec(script); token !== null; token = BASH_TOKEN.exec(script)) {
            depth += token[1] === "do" ? 1 : -1;
            if (depth === 0) {
                end = token.index;
                break;
            }
        }
        const body = script.slice(start, end);
        const before = script.slice(Math.max(0, (match.index ?? 0) - 200), match.index);
        loops.push({
            at: match.index ?? 0,
            language: "bash",
            header: header.trim(),
            wait: /(^|[\s;])sleep\s/.test(`${header} ${body}`),
            helper: header.trim() === 'until "$@"; do' && /sc_wait\(\) \{[^}]*$/.test(before),
        });
    }
    for (const match of script.matchAll(PYTHON_LOOP)) {
        const indent = match[1].length;
        const rest = script
            .slice((match.index ?? 0) + match[0].length)
            .split("\n")
            .slice(1);
        const bodyLines: string[] = [];
        for (const line of rest) {
            if (line.trim() !== "" && line.length - line.trimStart().length <= indent) break;
            bodyLines.push(line);
        }
        loops.push({
            at: match.index ?? 0,
            language: "python",
            header: match[2].trim(),
            wait: /\btime\.sleep\(/.test(bodyLines.join("\n")),
            helper: false,
        });
    }
    return loops.sort((a, b) => a.at - b.at).map(({ at: _at, ...loop }) => loop);
}

/** A wait that is not `sc_wait`, kept as it is: converting it would change a deployed step. */
export interface WaitException {
    /** The steps whose scripts hold it (their resource names end like this). */
    step: RegExp;
    /** The loop's header, as {@link loopsIn} reports it. */
    header: string;
    /** Which deployed step its conversion would update, and why it stays. */
    why: string;
}

/**
 * The waits that are not `sc_wait`. Each is in a script that a deployed stack holds as a step's
 * input (create): rewriting the loop changes those bytes, and every such stack would see an
 * update of that step (and, for a unit, a restart) with nothing to gain on the host. They move to
 * `sc_wait` when their step changes for a reason of its own.
 */
export const WAIT_EXCEPTIONS: readonly WaitException[] = [
    {
        step: /-model-download$/,
        header: 'while kill -0 "$pid" 2>/dev/null; do',
        why: "the model sync's download (<cluster>-model-download, create): watches the background `hf download` with its size every 10 s, bounded by MODEL_SYNC_LIMITS.download",
    },
    {
        step: /-model-serve$/,
        header: "while :; do",
        why: "the model sync's serve (<cluster>-model-serve, create): waits for every worker's done mark, failing on a dead daemon or a worker that never connects",
    },
    {
        step: /-model-pull-[^/]+$/,
        header: "for attempt in 1 2 3 4 5; do",
        why: "each worker's pull (<cluster>-model-pull-<node>, create): five rsync attempts, 5 s apart",
    },
    {
        step: /-model-pull-[^/]+$/,
        header: 'while kill -0 "$pid" 2>/dev/null; do',
        why: "each worker's pull (<cluster>-model-pull-<node>, create): watches rsync with its progress every 10 s, bounded by MODEL_SYNC_LIMITS.pull",
    },
    {
        step: /-model-pull-[^/]+$/,
        header: "while streams_alive; do",
        why: "each worker's pull (<cluster>-model-pull-<node>, create): watches its parallel rsync streams with the bytes pulled and the rate every 10 s (sc_wait prints neither), bounded by MODEL_SYNC_LIMITS.pull",
    },
    {
        step: /-firewall-apply$/,
        header: "for try in 1 2 3; do",
        why: "the firewall's apply (<node>-firewall-apply, create): three tries of the firewall unit, 1 s apart",
    },
    {
        step: /-vllm-follow$/,
        header: "while sleep 2; do",
        why: "a headless rank's follower unit (<node>-vllm-follow, create: the unit file's ExecStart): a supervision loop for the unit's life, not a bounded wait; a new unit restarts the follower",
    },
    {
        step: /-(vllm|ray-head|open-webui)-unit$/,
        header: 'while sleep \\"$$every\\"; do',
        why: "a server's watchdog unit (installed by its unit step, <node>-vllm-unit, <node>-ray-head-unit or <node>-open-webui-unit: the watchdog unit file's ExecStart): a supervision loop for the server's life, each probe bounded by curl --max-time",
    },
    {
        step: /-vllm-unit$/,
        header: 'while [ \\"$$avail\\" -lt \\"$$need\\" ] && [ \\"$$waited\\" -lt \\"$$memwait\\" ]; do',
        why: "the restart gate's memory wait (the engine unit's ExecCondition=, in <node>-vllm-unit): bounded by restarts.memoryWaitSeconds, 5 s a step",
    },
    {
        step: /-ray-head-ready$/,
        header: "while True:",
        why: "the Ray head's readiness (<node>-ray-head-ready, create): Python inside the runtime polling Ray's node table, bounded by its own limit",
    },
];

/** The exception for a wait loop of step `step`, if any. */
export function waitException(step: string, loop: ScriptLoop): WaitException | undefined {
    return WAIT_EXCEPTIONS.find((e) => e.step.test(step) && e.header === loop.header);
}
