"""Publishes CloudEvents to an eg topic with Azure's official namespace publisher,
exactly as a user of Event Grid namespaces would: EventGridPublisherClient with
namespace_topic and an AzureKeyCredential (sent as `Authorization: SharedAccessKey`).

    python publish.py <endpoint> <key> <topic> <events>

<events> is JSON: one object sends one CloudEvent (`send(event)`), an array sends a
list (`send([...])`). Each object gives id, source, type and optionally subject and
data. Prints {"sent": <count>} on success; an SDK error propagates (exit status 1, the
exception on stderr), so a test can check which error the SDK raised.
"""

import json
import sys

from azure.core.credentials import AzureKeyCredential
from azure.core.messaging import CloudEvent
from azure.eventgrid import EventGridPublisherClient


def cloud_event(spec):
    return CloudEvent(
        source=spec["source"],
        type=spec["type"],
        id=spec["id"],
        subject=spec.get("subject"),
        data=spec.get("data"),
    )


def main(endpoint, key, topic, events):
    specs = json.loads(events)
    client = EventGridPublisherClient(endpoint, AzureKeyCredential(key), namespace_topic=topic)
    with client:
        if isinstance(specs, list):
            client.send([cloud_event(s) for s in specs])
            sent = len(specs)
        else:
            client.send(cloud_event(specs))
            sent = 1
    print(json.dumps({"sent": sent}))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
