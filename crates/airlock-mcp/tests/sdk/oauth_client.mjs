// The official TypeScript SDK's OAuth flow against airlock's MCP endpoint: the first connect
// meets the 401, the SDK follows `resource_metadata` to the protected resource metadata, the
// authorization server's metadata, registers a client, and starts an authorization with PKCE.
// The "browser step" is a plain fetch of the authorization URL (the test's authorization server
// approves at once and redirects with a code); `finishAuth` exchanges the code, and a second
// connect lists and calls tools with the access token.
// Usage: node oauth_client.mjs URL. Prints one JSON object on stdout; the Rust test asserts it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url] = process.argv.slice(2);
const redirectUrl = "http://127.0.0.1:9/callback";
const store = {};
let code;
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "airlock-oauth-test",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (info) => {
    store.client = info;
  },
  tokens: () => store.tokens,
  saveTokens: (tokens) => {
    store.tokens = tokens;
  },
  saveCodeVerifier: (verifier) => {
    store.verifier = verifier;
  },
  codeVerifier: () => store.verifier,
  // Instead of a browser: follow the authorization URL and take the code from the redirect.
  async redirectToAuthorization(authorizationUrl) {
    store.authorizationUrl = authorizationUrl.toString();
    const response = await fetch(authorizationUrl, { redirect: "manual" });
    code = new URL(response.headers.get("location")).searchParams.get("code");
  },
};

const out = {};
const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await new Client({ name: "airlock-oauth-test", version: "1.0.0" }).connect(first);
  out.firstConnect = "connected";
} catch (error) {
  out.firstConnect = error instanceof UnauthorizedError ? "unauthorized" : String(error);
}
await first.finishAuth(code);

const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
const client = new Client({ name: "airlock-oauth-test", version: "1.0.0" });
await client.connect(transport);
const authorization = new URL(store.authorizationUrl);
out.authorization = Object.fromEntries(authorization.searchParams);
out.clientId = store.client?.client_id ?? null;
out.tokenType = store.tokens?.token_type ?? null;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = await client.callTool({ name: "echo", arguments: { msg: "hi" } });
await client.close();
console.log(JSON.stringify(out));
