/**
 * The server flags of the SGLang release the product renders for, as data:
 * `config/sglangFlags/<version>.json`, GENERATED from that release's wheel on PyPI by
 * `lab/sglang_standin/gen_flags.sh` (which reads SGLang's own argument definitions,
 * ServerArgs.add_cli_args in sglang/srt/server_args.py and the arg_groups/fields/*.py classes it
 * registers, with Python's `ast`). The lab's SGLang stand-in builds its parser from the same file.
 *
 * Exports: {@link SGLANG_VERSION}, {@link SGLANG_FLAG_TABLE}, {@link findSglangFlag},
 * {@link sglangChoices}, and the types {@link SglangArg}, {@link SglangFlagTable}.
 *
 * Pure: no Pulumi imports, no I/O (the table is imported as a JSON module).
 */
import v0_5_23 from "./sglangFlags/0.5.23.json";

/** One argument of SGLang's server parser, as gen_flags.py read it. */
export interface SglangArg {
    /** Every spelling the parser accepts (`--tp-size`, `--tensor-parallel-size`; `--no-x` for a BooleanOptionalAction). */
    readonly options: readonly string[];
    readonly negatives?: readonly string[];
    /** The ServerArgs field it sets. */
    readonly dest: string;
    /** `store`, `store_true`, `boolean_optional` or `custom:<ActionClass>`. */
    readonly action: string;
    /** Whether the flag reads a value. */
    readonly takes_value: boolean;
    readonly nargs?: string | number | null;
    /** int, float, str, json, human_int. */
    readonly type?: string;
    /** Values the parser enforces (absent where SGLang computes them at run time: any value passes here). */
    readonly choices?: readonly (string | number | boolean)[];
    readonly required?: boolean;
    readonly optional?: boolean;
    readonly default?: string | number | boolean | null;
    /** Where SGLang defines it: `sglang/srt/arg_groups/fields/parallel.py:45`. */
    readonly source: string;
}

/** SGLang's server arguments of one release. */
export interface SglangFlagTable {
    readonly version: string;
    readonly distribution: string;
    readonly wheel: string;
    readonly sha256: string;
    /** argparse's prog: `sglang serve` (prepare_server_args, server_args.py). */
    readonly prog: string;
    readonly generated_by: string;
    readonly unresolved: readonly string[];
    readonly args: readonly SglangArg[];
}

/** The table the product renders against (the pinned SGLang release). */
export const SGLANG_FLAG_TABLE: SglangFlagTable = v0_5_23;
/** The SGLang release whose flags the product renders: the current one on PyPI when it was pinned. */
export const SGLANG_VERSION = SGLANG_FLAG_TABLE.version;

/**
 * The argument a command-line flag sets, as SGLang's parser (plain argparse, abbreviations allowed)
 * reads it: an exact spelling, else the one flag it is a prefix of. Undefined for an unknown or
 * ambiguous flag (argparse exits 2 on both).
 */
export function findSglangFlag(flag: string, table: SglangFlagTable = SGLANG_FLAG_TABLE): SglangArg | undefined {
    const name = flag.split("=")[0];
    const exact = table.args.find((arg) => arg.options.includes(name));
    if (exact) return exact;
    const prefixed = table.args.filter((arg) => arg.options.some((o) => o.startsWith(name)));
    return name.startsWith("--") && prefixed.length === 1 ? prefixed[0] : undefined;
}

/** The values SGLang's parser accepts for `flag`, or undefined when it accepts any. */
export function sglangChoices(flag: string, table: SglangFlagTable = SGLANG_FLAG_TABLE): readonly (string | number | boolean)[] | undefined {
    return findSglangFlag(flag, table)?.choices;
}
