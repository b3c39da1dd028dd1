export * from "./json.js";
export * from "./keys.js";
export * from "./merkle.js";
export * from "./verify.js";
