package pipeline

import "rulevalidator/consumer"

// costPerRecordByte is what handling a request holds in memory per byte of
// its record while it waits for the model: the record itself (kept for a
// dead letter), the request decoded from it (Avro strings are copies) and
// the user prompt rendered from its inputs. BenchmarkInFlightMemory in bench/
// measures it: about 3.1 with a 1 MB document.
const costPerRecordByte = 3

// Cost is what handling m holds in memory, for consumer.Config.Cost: the
// bound on the bytes in flight then bounds the heap, not only the records.
func Cost(m *consumer.Message) int64 { return costPerRecordByte * consumer.Size(m) }
