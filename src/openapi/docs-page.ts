/** The /docs page: Swagger UI (swagger-ui-dist, served from node_modules) over /openapi.json. */

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rock-ts API</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/docs.js"></script>
</body>
</html>
`;

/** A file of its own rather than an inline script, so the page's CSP can forbid inline scripts. */
export const DOCS_SCRIPT = `"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  // Swagger UI would otherwise send the whole description to validator.swagger.io.
  validatorUrl: null,
});
`;

/**
 * Everything the page loads comes from this server, and "try it out" calls only this server. Swagger
 * UI sets inline styles, hence 'unsafe-inline' for styles (never for scripts).
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");
