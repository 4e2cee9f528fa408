/**
 * What a user may write in a stack's config, and the one function that turns it into the
 * validated, resolved {@link Config} the components read.
 *
 * Everything lives under the `spark-cluster:` namespace of the stack config. {@link parseConfig}
 * is pure (no Pulumi imports): stackConfig.ts reads the raw values and the set of secret keys
 * from Pulumi and hands them over. Validation runs in phases:
 *
 * 1. per field: the zod schema (schema.ts: types, ranges, formats, unknown keys; messages from
 *    zodIssues.ts), plus the secret rules (secretRules.ts);
 * 2. facts (facts.ts): what is true of the config (GPUs, parallelism, a Thor, a local model),
 *    computed once;
 * 3. across fields: the rules of rules.ts and the fit check (fitRule.ts), run only when phase 1
 *    found nothing, because they assume well-typed input; they read the facts;
 * 4. resolution (resolve.ts): defaults and every derived decision, made once.
 *
 * Every problem of a phase is thrown at once in a {@link ConfigError}, one line per issue:
 * `spark-cluster:<path>: <what is wrong> (got <value>). Example: <right value>`. Secret values
 * never appear in an issue, and the parsed config carries them as {@link SecretString}.
 */
import { ConfigError } from "./issues";
import { resolveConfig, type Config } from "./resolve";
import { checkCrossFieldRules } from "./rules";
import { ClusterConfigSchema } from "./schema";
import { checkSecretsAreSecret, checkSshKeySource } from "./secretRules";
import { checkNoPrototypeKeys } from "./rawRules";
import { fromZodIssue, zodMessage } from "./zodIssues";
import { fitInputs, fitIssues, fitReport } from "./fitRule";
import { planFit } from "./fitPlanner";
import { gatherFacts } from "./facts";
import type { RawConfig } from "./raw";

export type { FitReport, FitInputs, ProbedMemory } from "./fitRule";
export { probedFit } from "./fitRule";
export { checkpointBytes } from "./fitPlanner";
export * from "./cablingRules";
export * from "./dockerOptions";
export * from "./facts";
export * from "./ipv4";
export * from "./issues";
export * from "./namespace";
export * from "./portRules";
export * from "./resolve";
export * from "./rules";
export * from "./schema";
export * from "./secret";
export * from "./secretRules";
export * from "./valueRules";
export { exampleFor } from "./zodIssues";
export type { RawConfig } from "./raw";
export { decodeConfigValue, setRawValue } from "./raw";

/**
 * Validates the stack config and resolves every default. Throws a {@link ConfigError} that lists
 * every problem of the first phase that found any (fields and secrets first, then cross-field
 * rules, which assume well-typed input).
 */
export function parseConfig(raw: RawConfig): Config {
    // Before the schema: zod would drop a `__proto__` key silently, so it is refused here.
    const rawIssues = checkNoPrototypeKeys(raw.values);
    if (rawIssues.length > 0) {
        throw new ConfigError(rawIssues);
    }
    const result = ClusterConfigSchema.safeParse(raw.values, { error: zodMessage });
    const fieldIssues = [
        ...(result.success ? [] : result.error.issues.flatMap((issue) => fromZodIssue(issue, raw))),
        ...checkSecretsAreSecret(raw.values, raw.secretKeys),
        ...checkSshKeySource(raw.values),
    ];
    if (!result.success || fieldIssues.length > 0) {
        throw new ConfigError(fieldIssues);
    }
    const facts = gatherFacts(result.data);
    const crossFieldIssues = checkCrossFieldRules(result.data, facts);
    if (crossFieldIssues.length > 0) {
        throw new ConfigError(crossFieldIssues);
    }
    const inputs = fitInputs(result.data, facts, raw.modelConfigJson);
    const fit = planFit(inputs.description, inputs.plan, inputs.nodes);
    const fitProblems = fitIssues(fit);
    if (fitProblems.length > 0) {
        throw new ConfigError(fitProblems);
    }
    return resolveConfig(result.data, fitReport(fit), facts, inputs);
}
