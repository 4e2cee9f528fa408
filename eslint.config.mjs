// ESLint flat config: typescript-eslint's recommended rules plus Pulumi's own
// rules (no Outputs inside template literals), on the TypeScript, and on the JavaScript that runs
// beside it: the toolchain Node.js loads before the program (toolchain/*.js, CommonJS), the
// bench (bench/*.mjs, bench/*.js) and the CI's pull-request comments (scripts/preview-comment.js,
// CommonJS). The JavaScript is type-checked by tsconfig.js.json.
import tseslint from "typescript-eslint";
import pulumi from "@pulumi/eslint-plugin";

export default tseslint.config(
    { ignores: ["node_modules/**", "build/**", ".tools/**", ".pulumi-state/**", "lab/.state/**", "test-artifacts/**", "bench/out/**"] },
    // On the JavaScript as on the TypeScript; undefined names and wrong types in the JavaScript are
    // the type check's (tsconfig.js.json, checkJs).
    ...tseslint.configs.recommended,
    {
        // CommonJS: `require` is how these load their modules.
        files: ["**/*.js"],
        languageOptions: { sourceType: "commonjs" },
        rules: { "@typescript-eslint/no-require-imports": "off" },
    },
    {
        files: ["**/*.js", "**/*.mjs"],
        rules: { "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", ignoreRestSiblings: true }] },
    },
    {
        files: ["**/*.ts"],
        languageOptions: {
            parserOptions: { project: "./tsconfig.json", tsconfigRootDir: import.meta.dirname },
        },
        plugins: { "@pulumi": pulumi },
        rules: {
            "@pulumi/no-output-in-template-literal": "error",
            "@pulumi/no-output-instance-in-template-literal": "error",
            "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", ignoreRestSiblings: true }],
        },
    },
);
