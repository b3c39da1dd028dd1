export * from "./errors.js";
export * from "./client.js";
export * from "./governor.js";
