// Package bench holds end-to-end benchmarks of the request pipeline against a real Kafka
// broker: the service's throughput next to a raw kafka-go pass-through of the same records,
// and how close bounded concurrency comes to its ideal when the model is slow.
//
//	RULEVALIDATOR_REQUIRE_INTEGRATION=1 go test -run '^$' -bench . -benchtime 1000x ./bench
//
// With RULEVALIDATOR_REQUIRE_INTEGRATION=1 they start the local broker through ops/kafka.sh;
// with RULEVALIDATOR_KAFKA=host:port they use that broker; otherwise they are skipped, saying
// why (BenchmarkHandleCPU needs no broker and always runs).
package bench
