// How `pulumi` turns the program's TypeScript into JavaScript at every run (tsconfig.pulumi.json,
// "ts-node": {"transpiler"}): swc's native binary where this platform has one, else TypeScript's
// own transpileModule, which is what ts-node does when a transpiler's `create` returns nothing.
//
// Why: a no-op `pulumi up` is mostly the program starting, and transpiling its modules with
// TypeScript took about 0.75 s of it on the lab's 2 cores (1.25 s to load the program, 0.5 s with
// swc; README, "Speed"). Both only strip types: ts-node maps tsconfig.json's options (target,
// module, class fields, esModuleInterop) onto swc's, and type checking stays with `tsc -p
// tsconfig.json`. The fallback covers a platform whose @swc/core binary npm did not install (the
// lockfile lists the Linux ones); it is slower, not different.
"use strict";

const swc = require("ts-node/transpilers/swc");

exports.create = (createOptions) => {
    try {
        return swc.create(createOptions);
    } catch {
        return undefined;
    }
};
