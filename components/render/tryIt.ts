// The `tryIt` stack output: a curl line a user pastes into bash. Every value in it is quoted for
// bash, so a served name holding `'` or `$(…)` is sent exactly as it is and runs nothing.
import { CONFIG_NAMESPACE } from "../../config/namespace";
import { shellJoin, shellQuote } from "./host/shell";

export interface TryItSpec {
    /** The OpenAI-compatible base URL (`http://host:port/v1`). */
    endpoint: string;
    servedModel: string;
    stack: string;
}

/**
 * `curl` of one chat completion. The API key is read when the line runs, from the stack's config
 * through scripts/pulumi.sh (which finds a stack kept under stacks/ by itself), never written into
 * the output.
 */
export function tryItCommand(spec: TryItSpec): string {
    const keyCommand = shellJoin(["./scripts/pulumi.sh", "--stack", spec.stack, "config", "get", `${CONFIG_NAMESPACE}:apiKey`]);
    const body = JSON.stringify({ model: spec.servedModel, messages: [{ role: "user", content: "Hello" }] });
    return [
        "curl -s",
        shellQuote(`${spec.endpoint}/chat/completions`),
        // Inside the double quotes only the command substitution is expanded; its words are quoted.
        `-H "Authorization: Bearer $(${keyCommand})"`,
        "-H",
        shellQuote("Content-Type: application/json"),
        "-d",
        shellQuote(body),
    ].join(" ");
}

/** The config file of `stack` when it lives under stacks/ (as the repository's own stack files do), else undefined. */
export function stackConfigFile(stack: string, exists: (path: string) => boolean): string | undefined {
    const file = `stacks/Pulumi.${stack}.yaml`;
    return !exists(`Pulumi.${stack}.yaml`) && exists(file) ? file : undefined;
}
