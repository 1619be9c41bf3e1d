#!/usr/bin/env python3
"""Talk to rulevalidator through Kafka with clients nobody on the project wrote.

    pyclient.py produce --bootstrap HOST:PORT --topic TOPIC --schemas DIR --request REQUEST.json [--partitioner NAME]
    pyclient.py consume --bootstrap HOST:PORT --schemas DIR --expect TOPIC=N [--expect ...] [--timeout S]

produce: encodes the ValidationRequest record in REQUEST.json (Avro field names, submitted_at
in milliseconds, a document's data, its file, as hex) with fastavro's schemaless_writer and produces it with confluent-kafka
(librdkafka), keyed by request_id, acks=all, with the plain wire format's headers: rv-schema
and rv-schema-fingerprint, the CRC-64-AVRO fingerprint of the schema's canonical form as
fastavro computes it, plus a traceparent. --partitioner is librdkafka's partitioner setting
(its own default, consistent_random, unless given). Prints {"partition", "offset",
"fingerprint", "traceparent"} as JSON.

consume: reads each TOPIC from the beginning of every partition with confluent-kafka until N
records were read from it, and decodes each value with fastavro, picking the writer's schema
by its rv-schema-fingerprint header (and checking rv-schema names the same schema). Prints one
JSON object per record: topic, partition, offset, key, headers, schema and record (timestamps
as milliseconds since the epoch, bytes as hex).
"""

import argparse
import datetime
import glob
import io
import json
import os
import sys
import time

import fastavro
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from fastavro.schema import fingerprint, to_parsing_canonical_form

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def load_schemas(directory):
    """Every *.avsc in directory, by fingerprint: (full name, parsed schema)."""
    by_fingerprint = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.avsc"))):
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        name = raw["namespace"] + "." + raw["name"]
        by_fingerprint[fingerprint(to_parsing_canonical_form(raw), "CRC-64-AVRO")] = (name, fastavro.parse_schema(raw))
    if not by_fingerprint:
        sys.exit(f"no *.avsc files in {directory}")
    return by_fingerprint


def schema_named(schemas, name):
    for fp, (full, parsed) in schemas.items():
        if full == name:
            return fp, parsed
    sys.exit(f"no schema named {name}")


def produce(args):
    schemas = load_schemas(args.schemas)
    fp, schema = schema_named(schemas, "com.rulevalidator.v1.ValidationRequest")
    with open(args.request, encoding="utf-8") as f:
        record = json.load(f)
    for field in ("primary_docs", "auxiliary_docs"):
        for doc in record.get(field, []):
            if isinstance(doc.get("data"), str):
                doc["data"] = bytes.fromhex(doc["data"])
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)

    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    delivered = {}

    def on_delivery(err, msg):
        if err is not None:
            delivered["error"] = str(err)
        else:
            delivered["partition"], delivered["offset"] = msg.partition(), msg.offset()

    config = {"bootstrap.servers": args.bootstrap, "acks": "all"}
    if args.partitioner:
        config["partitioner"] = args.partitioner
    producer = Producer(config)
    producer.produce(
        args.topic,
        key=record["request_id"].encode(),
        value=buf.getvalue(),
        headers=[
            ("rv-schema", b"com.rulevalidator.v1.ValidationRequest"),
            ("rv-schema-fingerprint", fp.encode()),
            ("traceparent", traceparent.encode()),
        ],
        on_delivery=on_delivery,
    )
    if producer.flush(30) != 0 or "error" in delivered or "offset" not in delivered:
        sys.exit(f"producing to {args.topic} failed: {delivered.get('error', 'not delivered within 30s')}")
    json.dump({**delivered, "fingerprint": fp, "traceparent": traceparent}, sys.stdout)


def plain(value):
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def decode(schemas, msg):
    where = f"{msg.topic()}/{msg.partition()}/{msg.offset()}"
    headers = {k: v.decode() for k, v in (msg.headers() or [])}
    fp = headers.get("rv-schema-fingerprint")
    if fp not in schemas:
        sys.exit(f"{where}: rv-schema-fingerprint {fp!r} is none of the schemas' fingerprints {sorted(schemas)}")
    name, schema = schemas[fp]
    if headers.get("rv-schema") != name:
        sys.exit(f"{where}: rv-schema {headers.get('rv-schema')!r}, but the fingerprint is that of {name}")
    buf = io.BytesIO(msg.value())
    record = fastavro.schemaless_reader(buf, schema, None)
    if buf.tell() != len(msg.value()):
        sys.exit(f"{where}: {len(msg.value()) - buf.tell()} bytes left after the record")
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": msg.key().decode() if msg.key() is not None else None,
        "headers": headers,
        "schema": name,
        "record": record,
    }


def consume(args):
    schemas = load_schemas(args.schemas)
    want = {}
    for item in args.expect:
        topic, _, count = item.partition("=")
        want[topic] = int(count)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "pyclient-unused",  # partitions are assigned, never subscribed: no group joins
        "enable.auto.commit": False,
    })
    assignment = []
    for topic in want:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            sys.exit(f"topic {topic}: {meta.error}")
        assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
    consumer.assign(assignment)

    got = {topic: 0 for topic in want}
    deadline = time.monotonic() + args.timeout
    try:
        while any(got[t] < n for t, n in want.items()):
            if time.monotonic() > deadline:
                sys.exit(f"after {args.timeout}s read {got}, want {want}")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                raise KafkaException(msg.error())
            got[msg.topic()] += 1
            print(json.dumps(decode(schemas, msg), default=plain, ensure_ascii=False))
    finally:
        consumer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--schemas", required=True)
    p.add_argument("--request", required=True)
    p.add_argument("--partitioner", default="", help="librdkafka partitioner, e.g. murmur2_random")
    c = sub.add_parser("consume")
    c.add_argument("--bootstrap", required=True)
    c.add_argument("--schemas", required=True)
    c.add_argument("--expect", action="append", required=True, metavar="TOPIC=N")
    c.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    produce(args) if args.command == "produce" else consume(args)


if __name__ == "__main__":
    main()
