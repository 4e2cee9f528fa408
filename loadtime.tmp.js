const t0 = process.hrtime.bigint();
const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
require("ts-node").register({ transpileOnly: true, project: "tsconfig.pulumi.json", compilerOptions: {} });
require("./index.ts");
