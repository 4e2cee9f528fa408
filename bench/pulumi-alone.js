// The program of `npm run bench`'s "Pulumi alone" runs: Pulumi with nothing of ours in it but the
// toolchain (bench.mjs copies it into a project of its own, beside a node_modules link to ours and
// Pulumi.yaml's --require of toolchain/ts-register.js). It registers ALONE_RESOURCES components, no
// inputs, and each one's outputs a string, ALONE_BYTES in all: on a cold `up`, the engine writes the
// whole state as each one starts and ends and again for its outputs, 3 writes each, to a state of
// about ALONE_BYTES; no provider, no SSH, no script. So a cold `up` of it measures what Pulumi's
// engine and file backend cost for that many state writes of that size, and a no-op `up` what one
// registration of that many resources costs.
"use strict";
const pulumi = require("@pulumi/pulumi");

const count = Number(process.env.ALONE_RESOURCES ?? "0");
const bytes = Number(process.env.ALONE_BYTES ?? "0");
if (!Number.isInteger(count) || count < 0 || !Number.isInteger(bytes) || bytes < 0) {
    throw new Error(`ALONE_RESOURCES and ALONE_BYTES must be whole numbers >= 0, not ${JSON.stringify([count, bytes])}`);
}

class Filler extends pulumi.ComponentResource {
    /**
     * @param {string} name
     * @param {number} size
     */
    constructor(name, size) {
        super("pulumi-alone:index:Filler", name, {}, {});
        this.registerOutputs({ text: "x".repeat(size) });
    }
}

for (let i = 0; i < count; i++) new Filler(`filler-${i}`, Math.floor(bytes / count));
