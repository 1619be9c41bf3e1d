#!/usr/bin/env python3
"""Read one Avro message with fastavro and print it as JSON.

    check.py SCHEMA.avsc MESSAGE [--rewrite OUT] [--reader READER.avsc]

MESSAGE is a bare Avro binary body (the plain wire format's value, or a
Confluent value after its 5-byte header). The output is one JSON object:

    record       the record as fastavro reads it: unions unwrapped,
                 timestamp-millis as milliseconds since the epoch,
                 bytes as lowercase hex
    canonical    the schema's Parsing Canonical Form
    fingerprint  its CRC-64-AVRO fingerprint as fastavro gives it (hex)

With --rewrite, the record is also written back to OUT with fastavro's
schemaless_writer, so the other side can read what Python wrote. With
--reader, the record is read as a reader on READER.avsc reads what a writer on
SCHEMA.avsc wrote (Avro schema resolution: fields the reader lacks are
skipped, fields the writer lacks take the reader's defaults).
"""

import argparse
import datetime
import io
import json
import sys

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def plain(value):
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schema")
    parser.add_argument("message")
    parser.add_argument("--rewrite", metavar="OUT")
    parser.add_argument("--reader", metavar="READER")
    args = parser.parse_args()

    with open(args.schema, encoding="utf-8") as f:
        raw = json.load(f)
    schema = fastavro.parse_schema(raw)
    with open(args.message, "rb") as f:
        data = f.read()

    buf = io.BytesIO(data)
    reader = None
    if args.reader:
        with open(args.reader, encoding="utf-8") as f:
            reader = fastavro.parse_schema(json.load(f))
    record = fastavro.schemaless_reader(buf, schema, reader)
    if buf.tell() != len(data):
        sys.exit(f"{len(data) - buf.tell()} bytes left after the record")

    if args.rewrite:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, record)
        with open(args.rewrite, "wb") as f:
            f.write(out.getvalue())

    canonical = to_parsing_canonical_form(raw)
    json.dump(
        {"record": record, "canonical": canonical, "fingerprint": fingerprint(canonical, "CRC-64-AVRO")},
        sys.stdout,
        default=plain,
        ensure_ascii=False,
    )


if __name__ == "__main__":
    main()
