// The package every component type token starts with: `spark-cluster:index:<Name>`.
export const PACKAGE = "spark-cluster";

export function typeToken(component: string): string {
    return `${PACKAGE}:index:${component}`;
}
