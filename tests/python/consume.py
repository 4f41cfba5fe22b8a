"""Receives and settles events of an eg queue-mode subscription with Azure's official
namespace consumer, exactly as a user of Event Grid namespaces would:
EventGridConsumerClient with namespace_topic, subscription and an AzureKeyCredential
(sent as `Authorization: SharedAccessKey`).

    python consume.py <endpoint> <key> <topic> <subscription> <count>

Receives until <count> events came (max_events=100, max_wait_time=10 per call; at most
six calls), renews every lock, releases the first event with release_delay=0 and
receives it again, rejects it, acknowledges the others, then acknowledges an
already-acknowledged token once more. Prints JSON:
{"received": [[id, deliveryCount], ...], "again": [id, deliveryCount], "renewed": n,
 "released": n, "rejected": n, "acknowledged": n, "stale": [code, message]}.
An SDK error propagates (exit status 1, the exception on stderr).
"""

import json
import sys

from azure.core.credentials import AzureKeyCredential
from azure.eventgrid import EventGridConsumerClient


def main(endpoint, key, topic, subscription, count):
    count = int(count)
    client = EventGridConsumerClient(
        endpoint, AzureKeyCredential(key), namespace_topic=topic, subscription=subscription
    )
    with client:
        details = []
        for _ in range(6):
            details += client.receive(max_events=100, max_wait_time=10)
            if len(details) >= count:
                break
        tokens = [d.broker_properties.lock_token for d in details]
        renewed = client.renew_locks(lock_tokens=tokens)
        first, rest = details[0], details[1:]
        released = client.release(lock_tokens=[first.broker_properties.lock_token])
        again = client.receive(max_events=1, max_wait_time=10)
        rejected = client.reject(lock_tokens=[d.broker_properties.lock_token for d in again])
        acked = client.acknowledge(lock_tokens=[d.broker_properties.lock_token for d in rest])
        stale = client.acknowledge(lock_tokens=[rest[0].broker_properties.lock_token])
    print(
        json.dumps(
            {
                "received": [[d.event.id, d.broker_properties.delivery_count] for d in details],
                "again": [[d.event.id, d.broker_properties.delivery_count] for d in again],
                "renewed": len(renewed.succeeded_lock_tokens),
                "released": len(released.succeeded_lock_tokens),
                "rejected": len(rejected.succeeded_lock_tokens),
                "acknowledged": len(acked.succeeded_lock_tokens),
                "stale": [
                    stale.failed_lock_tokens[0].error.code,
                    stale.failed_lock_tokens[0].error.message,
                ],
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
