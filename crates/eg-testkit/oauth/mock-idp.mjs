// An OAuth 2.0 / OpenID Connect provider for eg's tests (crates/eg-testkit/src/oauth_server.rs):
// oauth2-mock-server signing RS256 JWTs with a key set it publishes at /jwks, set up to
// behave like a real provider for the client-credentials grant:
// - only CLIENT_ID with CLIENT_SECRET (in the form or HTTP Basic) gets a token, else 401
//   invalid_client, as Entra ID answers;
// - when CLIENT_CERT_FILE names a certificate (PEM), CLIENT_ID may instead send a client
//   assertion (private_key_jwt, RFC 7523) as Entra ID takes it. oauth2-mock-server does
//   not check assertions, so this does, as Entra ID would: an RS256 JWT whose signature
//   verifies with that certificate's public key, whose x5t (or x5t#S256) is the
//   certificate's thumbprint, with iss = sub = CLIENT_ID, aud = this token endpoint, an
//   exp in the future (at most 10 minutes on), nbf not in the future, a jti not seen
//   before. Anything else is 401 invalid_client saying which check failed;
// - a token lives TOKEN_TTL_SECONDS (`exp` and `expires_in` agree);
// - its `aud` is the `audience` asked for, else the scope without `/.default` (Entra ID
//   gives a token for `api://orders/.default` the audience `api://orders`).
// Environment: MODULE (the package's dist/index.mjs), PORT, CLIENT_ID, CLIENT_SECRET,
// TOKEN_TTL_SECONDS, CLIENT_CERT_FILE (optional). Prints `ready <issuer url>` once it serves.
import { pathToFileURL } from 'node:url';
import { X509Certificate, createHash, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';

const { OAuth2Server, Events } = await import(pathToFileURL(process.env.MODULE).href);
const ttl = Number(process.env.TOKEN_TTL_SECONDS ?? '3600');
const clientId = process.env.CLIENT_ID;
const clientSecret = process.env.CLIENT_SECRET;

const certificate = process.env.CLIENT_CERT_FILE
  ? new X509Certificate(readFileSync(process.env.CLIENT_CERT_FILE))
  : undefined;
const tokenUrl = `http://127.0.0.1:${process.env.PORT}/token`;
const seenJti = new Set();
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

function base64url(buffer) {
  return buffer.toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
}

// Why the client assertion in `body` is refused, or undefined when it is good.
function assertionProblem(body) {
  if (!certificate) return 'no certificate is registered for this client';
  if (body.client_assertion_type !== JWT_BEARER) return 'client_assertion_type is not jwt-bearer';
  const parts = String(body.client_assertion ?? '').split('.');
  if (parts.length !== 3) return 'client_assertion is not a JWT';
  let header, claims;
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
  } catch {
    return 'client_assertion is not a JWT';
  }
  if (header.alg !== 'RS256') return `alg ${header.alg} is not RS256`;
  const signed = Buffer.from(`${parts[0]}.${parts[1]}`);
  if (!verify('RSA-SHA256', signed, certificate.publicKey, Buffer.from(parts[2], 'base64url'))) {
    return 'the signature does not verify with the registered certificate';
  }
  const x5t = base64url(createHash('sha1').update(certificate.raw).digest());
  const x5tS256 = base64url(createHash('sha256').update(certificate.raw).digest());
  if (header.x5t !== x5t && header['x5t#S256'] !== x5tS256) return 'x5t is not the registered certificate';
  const now = Math.floor(Date.now() / 1000);
  if (claims.iss !== clientId || claims.sub !== clientId) return 'iss and sub must be the client id';
  if (body.client_id !== undefined && body.client_id !== clientId) return 'client_id is not the assertion\'s';
  if (claims.aud !== tokenUrl) return `aud is not ${tokenUrl}`;
  if (!(claims.exp > now) || claims.exp > now + 600) return 'exp is not within the next 10 minutes';
  if (claims.nbf !== undefined && claims.nbf > now + 60) return 'nbf is in the future';
  if (!claims.jti || seenJti.has(claims.jti)) return 'jti is missing or was seen before';
  seenJti.add(claims.jti);
  return undefined;
}

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
  if (req.body?.client_assertion !== undefined || req.body?.client_assertion_type !== undefined) {
    const problem = assertionProblem(req.body);
    if (problem) {
      response.statusCode = 401;
      response.body = { error: 'invalid_client', error_description: `client assertion refused: ${problem}` };
    } else {
      response.body.expires_in = ttl;
    }
    return;
  }
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
