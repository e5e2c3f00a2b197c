/**
 * @simplewebauthn/browser's ESM build, as the page loads it: the gateway serves the package's
 * `esm/` folder from node_modules at `<dashboard>/assets/js/vendor/simplewebauthn-browser/`
 * (src/dashboard/serve.ts, loadPublic), beside the compiled script, so a relative import reaches
 * it with no bundler and no import map (an inline map would need its hash in the CSP). These are
 * the package's own types; tsc emits the import as written.
 */
export * from '@simplewebauthn/browser';
