package pipeline

import (
	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/judging"
)

// Cost is what handling a message holds in memory when the engine gives
// evidence in mode, for consumer.Config.Cost: the bound on the bytes in
// flight then bounds the heap, not only the records. The record is counted as
// material (judging.MaterialCost); a document file reserves, once read, what
// its text costs beyond its size (a DOCX, a compressed PDF) and the file's size
// again, and a claim-checked one its own cost, through the consumer's
// reservation (consumer.Reserve, the use case's judging.Config.Reserve).
func Cost(mode engine.EvidenceMode) func(m *consumer.Message) int64 {
	return func(m *consumer.Message) int64 { return judging.MaterialCost(mode, consumer.Size(m)) }
}
