// Validates custom resources (KEDA, Prometheus Operator) against the schemas that ship in
// the @kubernetes-models packages (package.json pins them; nothing is downloaded here).
// Reads a JSON array of {file, doc} on stdin; prints one line per problem; exits 1 if any.
//
// The packaged validators check types, enums and required fields but, like the CRDs
// they come from, let unknown fields through, while `kubectl apply` (field validation
// "Strict") refuses them. So each document is also walked behind a Proxy that records
// which properties the validator looked up: a compiled validator reads every property
// its schema declares, so a present key it never read is unknown to the schema (a typo
// such as minReplicas for minReplicaCount). Objects whose schema declares no properties
// (free-form maps) are read whole and never flagged.
import * as keda from "@kubernetes-models/keda/keda.sh/v1alpha1";
import * as monitoring from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const MODELS = {
  "keda.sh/v1alpha1": keda,
  "monitoring.coreos.com/v1": monitoring,
};

function tracked(value, path, objects) {
  if (value === null || typeof value !== "object") return value;
  const read = new Set();
  let copy;
  if (Array.isArray(value)) {
    copy = value.map((v, i) => tracked(v, `${path}[${i}]`, objects));
  } else {
    copy = {};
    for (const [k, v] of Object.entries(value)) copy[k] = tracked(v, `${path}.${k}`, objects);
    objects.push({ path, keys: Object.keys(value), read });
  }
  const mark = (prop) => { if (typeof prop === "string") read.add(prop); };
  return new Proxy(copy, {
    get(target, prop, receiver) { mark(prop); return Reflect.get(target, prop, receiver); },
    has(target, prop) { mark(prop); return Reflect.has(target, prop); },
    getOwnPropertyDescriptor(target, prop) { mark(prop); return Reflect.getOwnPropertyDescriptor(target, prop); },
  });
}

function validate({ file, doc }) {
  const where = `${file}: ${doc?.kind}/${doc?.metadata?.name}`;
  const models = MODELS[doc?.apiVersion];
  const Model = models?.[doc?.kind];
  if (typeof Model !== "function" || typeof Model.prototype.validate !== "function") {
    return [`${where}: no schema for apiVersion ${doc?.apiVersion} kind ${doc?.kind}`];
  }
  const objects = [];
  const proxy = tracked(doc, "", objects);
  const problems = [];
  try {
    Model.prototype.validate.call(proxy);
  } catch (e) {
    // The compiled validators collect every error before throwing, so the walk below
    // still saw the whole document.
    problems.push(`${where}: ${e.message}`);
  }
  for (const { path, keys, read } of objects) {
    if (read.size === 0) continue; // a free-form object: its schema declares nothing
    for (const key of keys) {
      if (!read.has(key)) problems.push(`${where}: ${path || "."}: unknown field "${key}"`);
    }
  }
  return problems;
}

let input = "";
for await (const chunk of process.stdin) input += chunk;
const problems = JSON.parse(input).flatMap(validate);
for (const p of problems) console.log(p);
process.exit(problems.length ? 1 : 0);
