// A client generated from eg's OpenAPI document (by @hey-api/openapi-ts, into ./client)
// creates a topic and a webhook subscription, publishes, and reads the event's history,
// the queues and the status back. The TypeScript compiler checks every call against the
// generated types; every answer is also validated against the document's own schema for
// that operation and status, so a typed answer that drifts from the code fails here.
//
// Run by tests/tests/system/openapi_client.rs:
//   node main.js <document.yaml> <ingress URL> <admin token> <receiver URL> <topic> <event id>
// It prints one line of JSON (what it saw) and exits 0, or prints why and exits 1.

import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { readFileSync } from "fs";
import { parse } from "yaml";
import { createClient } from "./client/client";
import {
  adminStatus,
  deliveryHealth,
  eventHistory,
  getSubscription,
  listKeys,
  publishEvents,
  putSubscription,
  putTopic,
  queues,
} from "./client/sdk.gen";

type Answer = { data?: unknown; error?: unknown; response: Response };

const [documentPath, ingress, adminToken, receiverUrl, topic, eventId] = process.argv.slice(2);
const document = parse(readFileSync(documentPath, "utf8"));

// The document's schemas, as JSON Schema 2020-12 (OpenAPI 3.1's dialect).
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ $id: "eg", components: document.components }, "eg");

/** The schema a path's operation declares for `status`, as a `$ref` into the document. */
function answerSchema(path: string, method: string, status: number): object | undefined {
  let answer = document.paths[path][method].responses[String(status)];
  if (answer?.$ref) {
    answer = answer.$ref.split("/").slice(1).reduce((node: any, part: string) => node[part], document);
  }
  return answer?.content?.["application/json"]?.schema;
}

/** Fails unless `answer` has the status wanted and a body valid against its schema. */
function check(what: string, path: string, method: string, answer: Answer, want: number[]): any {
  const status = answer.response.status;
  if (!want.includes(status)) {
    throw new Error(`${what}: HTTP ${status} (wanted ${want.join(" or ")}): ${JSON.stringify(answer.error)}`);
  }
  // The generated client hands back a refusal's body as `error`, an answer's as `data`.
  const body = status >= 400 ? answer.error : answer.data;
  const schema = answerSchema(path, method, status);
  if (schema !== undefined) {
    const resolved = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"eg#/components/'));
    if (!ajv.validate(resolved, body)) {
      throw new Error(`${what}: the answer does not match docs/openapi.yaml: ${ajv.errorsText()}\n${JSON.stringify(body)}`);
    }
  }
  return status >= 400 ? undefined : body;
}

async function main(): Promise<void> {
  let topicKey: string | undefined;
  // The admin token for the management API (bearer), the topic's key for publishing.
  const client = createClient({
    baseUrl: ingress,
    auth: (scheme) => (scheme.type === "http" ? adminToken : scheme.name === "aeg-sas-key" ? topicKey : undefined),
  });
  const at = { client, path: { topic } };
  const subscription = "generated";
  const subPath = { topic, subscription };

  const created = await putTopic({ ...at, body: { properties: { inputSchema: "EventGridSchema" } } });
  check("putTopic", "/admin/topics/{topic}", "put", created, [200, 201]);

  const sub = await putSubscription({
    client,
    path: subPath,
    body: {
      properties: {
        destination: { endpointType: "WebHook", properties: { endpointUrl: receiverUrl } },
        retryPolicy: { maxDeliveryAttempts: 3, eventTimeToLiveInMinutes: 5 },
        deliveryLimits: { requestsPerSecond: 100 },
      },
    },
  });
  check("putSubscription", "/admin/topics/{topic}/eventSubscriptions/{subscription}", "put", sub, [200, 201]);
  const shown = check("getSubscription", "/admin/topics/{topic}/eventSubscriptions/{subscription}", "get",
    await getSubscription({ client, path: subPath }), [200]);
  if (shown.properties?.provisioningState !== "Succeeded") {
    throw new Error(`the subscription is ${shown.properties?.provisioningState}, not Succeeded`);
  }

  const keys = check("listKeys", "/admin/topics/{topic}/listKeys", "post", await listKeys(at), [200]);
  topicKey = keys.key1;
  const published = await publishEvents({
    ...at,
    query: { "api-version": "2018-01-01" },
    body: [{
      id: eventId,
      eventType: "Order.Created",
      subject: "/orders/42",
      eventTime: new Date().toISOString(),
      data: { orderId: 42 },
      dataVersion: "1.0",
    }],
  });
  check("publishEvents", "/topics/{topic}/api/events", "post", published, [200]);

  // Delivered: the history says so (the Rust test also checks the receiver got it).
  let steps: any[] = [];
  for (let tries = 0; tries < 300 && !steps.some((s) => s.state === "Delivered"); tries++) {
    if (tries > 0) await new Promise((r) => setTimeout(r, 100));
    const history = check("eventHistory", "/admin/topics/{topic}/events/{eventId}/history", "get",
      await eventHistory({ client, path: { topic, eventId } }), [200, 404]);
    steps = history?.value ?? [];
  }
  if (!steps.some((s) => s.state === "Delivered")) {
    throw new Error(`the event was not delivered in 30 s: ${JSON.stringify(steps)}`);
  }

  const health = check("deliveryHealth", "/admin/topics/{topic}/eventSubscriptions/{subscription}/deliveryHealth",
    "get", await deliveryHealth({ client, path: subPath }), [200]);
  const depths = check("queues", "/admin/queues", "get", await queues({ client }), [200]);
  const status = check("adminStatus", "/admin/status", "get", await adminStatus({ client }), [200]);
  const listed = status.topics.find((t: any) => t.name === topic);
  if (!listed?.subscriptions.some((s: any) => s.name === subscription)) {
    throw new Error(`adminStatus does not list ${topic}/${subscription}`);
  }
  console.log(JSON.stringify({
    delivered: true,
    steps: steps.length,
    health: health.state,
    partitions: depths.partitions.length,
    topics: status.topics.length,
  }));
}

main().catch((error) => {
  console.error(String(error?.stack ?? error));
  process.exit(1);
});
