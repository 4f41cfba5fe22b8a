// An OAuth 2.0 / OpenID Connect provider for eg's tests (crates/eg-testkit/src/oauth_server.rs):
// oauth2-mock-server signing RS256 JWTs with a key set it publishes at /jwks, set up to
// behave like a real provider for the client-credentials grant:
// - only CLIENT_ID with CLIENT_SECRET (in the form or HTTP Basic) gets a token, else 401
//   invalid_client, as Entra ID answers;
// - a token lives TOKEN_TTL_SECONDS (`exp` and `expires_in` agree);
// - its `aud` is the `audience` asked for, else the scope without `/.default` (Entra ID
//   gives a token for `api://orders/.default` the audience `api://orders`).
// Environment: MODULE (the package's dist/index.mjs), PORT, CLIENT_ID, CLIENT_SECRET,
// TOKEN_TTL_SECONDS. Prints `ready <issuer url>` once it serves.
import { pathToFileURL } from 'node:url';

const { OAuth2Server, Events } = await import(pathToFileURL(process.env.MODULE).href);
const ttl = Number(process.env.TOKEN_TTL_SECONDS ?? '3600');
const clientId = process.env.CLIENT_ID;
const clientSecret = process.env.CLIENT_SECRET;

function credentials(req) {
  const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
  if (basic) {
    const [id, secret] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
    return { id: decodeURIComponent(id), secret: decodeURIComponent(secret ?? '') };
  }
  return { id: req.body?.client_id, secret: req.body?.client_secret };
}

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
server.service.on(Events.BeforeTokenSigning, (token, req) => {
  const now = Math.floor(Date.now() / 1000);
  const scope = req.body?.scope;
  token.payload.aud = req.body?.audience ?? (scope ? scope.replace(/\/\.default$/, '') : undefined);
  token.payload.exp = now + ttl;
  token.payload.client_id = credentials(req).id;
  token.payload.jti = `${now}-${Math.random().toString(36).slice(2)}`;
});
server.service.on(Events.BeforeResponse, (response, req) => {
  const { id, secret } = credentials(req);
  if (id !== clientId || secret !== clientSecret) {
    response.statusCode = 401;
    response.body = { error: 'invalid_client', error_description: 'unknown client or wrong secret' };
    return;
  }
  response.body.expires_in = ttl;
});
await server.start(Number(process.env.PORT), '127.0.0.1');
console.log(`ready ${server.issuer.url}`);
