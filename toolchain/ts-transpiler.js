// How `pulumi` turns the program's TypeScript into JavaScript at every run: ts-node's transpiler
// (tsconfig.pulumi.json, "ts-node": {"transpiler"}), with Sucrase instead of TypeScript's own
// transpileModule.
//
// Why: a no-op `pulumi up` is mostly the program starting, and transpiling its modules with
// TypeScript took 0.4-0.6 s of it on the lab's 2 cores, idle (1.2-1.4 s to load the program,
// 0.7-1.0 s with Sucrase; README, "Speed"), more while the lab's nodes run. Sucrase is plain
// JavaScript (swc and esbuild would be faster still, but ship a native binary per platform as
// optional packages, which the registry this project is built from does not serve, so npm ci
// refuses the lockfile). It only strips types, as ts-node did here already (transpile-only);
// type checking stays with `tsc -p tsconfig.json`. Its output matches tsconfig.json's: CommonJS
// with esModuleInterop's default-import helper, and ES2022 left as it is (class fields included,
// disableESTransforms) for Node.js >= 20.
"use strict";

const { transform } = require("sucrase");

exports.create = () => ({
    /**
     * @param {string} input
     * @param {{ fileName: string }} options
     */
    transpile(input, { fileName }) {
        const { code, sourceMap } = transform(input, {
            transforms: ["typescript", "imports"],
            disableESTransforms: true,
            filePath: fileName,
            sourceMapOptions: { compiledFilename: fileName },
        });
        return { outputText: code, sourceMapText: JSON.stringify(sourceMap) };
    },
});
