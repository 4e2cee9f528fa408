// ESLint flat config: typescript-eslint's recommended rules plus Pulumi's own
// rules (no Outputs inside template literals).
import tseslint from "typescript-eslint";
import pulumi from "@pulumi/eslint-plugin";

export default tseslint.config(
    { ignores: ["node_modules/**", "build/**", ".tools/**", ".pulumi-state/**", "lab/.state/**", "**/*.js", "**/*.mjs"] },
    ...tseslint.configs.recommended,
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
