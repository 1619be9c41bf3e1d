package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/s3test"
	"rulevalidator/jobs"
	"rulevalidator/replay"
	"rulevalidator/schemas"
)

// TestDeadLetterReplayOnTheRealStack: on the real broker and object storage, with serve
// judging through a scripted model, requests of tenant contoso name a ruleset nobody has
// published and are dead-lettered as unknown_ruleset, beside another tenant's, a request of
// contoso dead-lettered for another reason, an undecodable record, and one of contoso's
// already replayed three times. `deadletter replay --reason unknown_ruleset --tenant contoso
// --dry-run` names the three, refuses the fourth, and sends nothing; once the ruleset is
// published, the replay without --dry-run completes exactly those three (one verdict event per
// rule each, their job status completed), the others untouched; run again, it sends nothing.
func TestDeadLetterReplayOnTheRealStack(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 2)
	rulesets := kafkatest.UniqueTopic(t, "rulesets")
	replays := kafkatest.UniqueTopic(t, "replays")
	kafkatest.CreateTopicWith(t, e.bootstrap, rulesets, 1, map[string]string{"cleanup.policy": "compact"})
	kafkatest.CreateTopicWith(t, e.bootstrap, replays, 1, map[string]string{"cleanup.policy": "compact"})
	endpoint, accessKey, secretKey := s3test.Endpoint(t)
	store := s3test.Store(t)
	jobStore, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)
	deadLog := e.watch(t, e.deadLetters, 1)

	ids, reqs := exampleRequests(t, "replay", 3) // contoso, unknown ruleset: the ones to replay
	other := exampleRequest(t, "other-tenant")
	other.TenantID = "fabrikam"
	broken := exampleRequest(t, "broken-ruleset") // contoso, another reason
	broken.RulesetRef, broken.InlineRuleset = nil, ptr(`{"id": "broken", "rules": []}`)
	tooOften := exampleRequest(t, "too-often")
	msgs := []kafka.Message{}
	for _, r := range append(reqs, other, broken) {
		msgs = append(msgs, e.requestMessage(t, r))
	}
	worn := e.requestMessage(t, tooOften)
	worn.Headers = append(worn.Headers, kafka.Header{Key: schemas.HeaderReplayCount, Value: []byte("3")})
	msgs = append(msgs, worn, kafka.Message{Key: []byte("junk"), Value: []byte("not avro")})
	e.produce(t, msgs...)
	e.startInProcess(t, "--rulesets-topic", rulesets, "--rulesets-dir=",
		"--s3-endpoint", endpoint, "--s3-access-key", accessKey, "--s3-secret-key", secretKey, "--s3-bucket", store.Bucket())
	waitUntil(t, waitLimit, "every dead letter", func() bool { return deadLog.len() >= len(msgs) })
	e.waitCommittedToEnd(t)

	reasons := map[string]schemas.Reason{}
	for _, m := range deadLog.snapshot() {
		reasons[string(m.Key)] = e.deadLetter(t, m).Reason
	}
	for _, id := range append(slices.Clone(ids), "other-tenant", "too-often") {
		if reasons[id] != schemas.ReasonUnknownRuleset {
			t.Fatalf("%s dead-lettered as %q, want unknown_ruleset (all: %v)", id, reasons[id], reasons)
		}
	}
	if reasons["broken-ruleset"] != schemas.ReasonInvalidRuleset || reasons["junk"] != schemas.ReasonUndecodable {
		t.Fatalf("dead letters %v, want broken-ruleset invalid_ruleset and junk undecodable", reasons)
	}

	conn := []string{"--kafka-brokers", e.bootstrap, "--requests-topic", e.requests, "--deadletter-topic", e.deadLetters, "--replays-topic", replays}
	replayArgs := append([]string{"deadletter", "replay", "--reason", "unknown_ruleset", "--tenant", tenant}, conn...)
	requestsEnd := opEndOffsets(t, e.bootstrap, e.requests, e.partitions)

	code, stdout, stderr := opRun(t, append(replayArgs, "--dry-run")...)
	t.Logf("dry run:\n%s", stdout)
	if code != exitOK {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, id := range ids {
		if !strings.Contains(stdout, "request "+id+"  tenant "+tenant+"  ruleset "+exampleRulesetID+"  reason unknown_ruleset") || !lineWith(stdout, id, "would send") {
			t.Errorf("the dry run does not name %s as to be sent:\n%s", id, stdout)
		}
	}
	if !lineWith(stdout, "too-often", "refused: its original was replayed 3 times already, the most allowed is 3") {
		t.Errorf("the dry run does not refuse too-often:\n%s", stdout)
	}
	for _, id := range []string{"other-tenant", "broken-ruleset", "junk"} {
		if strings.Contains(stdout, "request "+id+" ") {
			t.Errorf("the dry run names %s, which the selection leaves out:\n%s", id, stdout)
		}
	}
	if !strings.Contains(stdout, "4 of 7 dead letters selected (--reason unknown_ruleset --tenant contoso)") ||
		!strings.Contains(stdout, "by reason: unknown_ruleset 4") || !strings.Contains(stdout, "3 would be sent, 1 refused (replayed too often); nothing sent") {
		t.Errorf("the dry run's counts:\n%s", stdout)
	}
	if end := opEndOffsets(t, e.bootstrap, e.requests, e.partitions); !slices.Equal(end, requestsEnd) {
		t.Fatalf("the dry run wrote to the requests topic: end offsets %v, were %v", end, requestsEnd)
	}
	if end := opEndOffsets(t, e.bootstrap, replays, 1); end[0] != 0 {
		t.Fatalf("the dry run recorded %d replays", end[0])
	}
	code, stdout, _ = opRun(t, append(replayArgs, "--dry-run", "--max-replays", "4")...)
	if code != exitOK || !lineWith(stdout, "too-often", "would send") {
		t.Errorf("with --max-replays 4, too-often should be sent:\n%s", stdout)
	}

	code, stdout, stderr = opRun(t, "rulesets", "publish", "--file", exampleRuleset, "--kafka-brokers", e.bootstrap, "--rulesets-topic", rulesets)
	if code != exitOK {
		t.Fatalf("rulesets publish: exit %d\n%s\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = opRun(t, append(replayArgs, "--json")...)
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s\n%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	sent := map[string]replay.Position{}
	for _, line := range lines[:len(lines)-1] {
		var d struct {
			RequestID string         `json:"request_id"`
			Status    replay.Status  `json:"status"`
			Replay    *replay.Marker `json:"replay"`
		}
		decode(t, []byte(line), &d)
		if d.Status == replay.StatusSent {
			sent[d.RequestID] = d.Replay.SentTo
		}
	}
	if len(sent) != len(ids) || !hasAllKeys(sent, ids) {
		t.Fatalf("sent %v, want %v:\n%s", sent, ids, stdout)
	}
	var counts deadLetterCountsJSON
	decode(t, []byte(lines[len(lines)-1]), &counts)
	if c := counts.Counts; c.Selected != 4 || c.ByStatus[replay.StatusSent] != 3 || c.ByStatus[replay.StatusRefused] != 1 || c.ByReason[schemas.ReasonUnknownRuleset] != 4 || c.DryRun {
		t.Errorf("counts %+v", c)
	}
	for id, at := range sent {
		rec := opReadAt(t, e.bootstrap, e.requests, at.Partition, at.Offset)
		if count, ok := header(rec, schemas.HeaderReplayCount); !ok || count != "1" || string(rec.Key) != id {
			t.Errorf("the replay of %s at %v: key %q, %s %q", id, at, rec.Key, schemas.HeaderReplayCount, count)
		}
		if tp, _ := header(rec, "traceparent"); tp != traceparentFor(id) {
			t.Errorf("the replay of %s carries traceparent %q, want the original's", id, tp)
		}
	}

	// Exactly the three are judged, each once: one verdict event per rule, completed.
	waitUntil(t, waitLimit, "the replayed requests' summaries", func() bool {
		n := 0
		for _, m := range summaryLog.snapshot() {
			if s := e.summary(t, m); slices.Contains(ids, s.RequestID) && s.Status == schemas.StatusCompleted {
				n++
			}
		}
		return n >= len(ids)
	})
	waitUntil(t, waitLimit, "their verdicts", func() bool { return verdictLog.len() >= len(ids)*len(exampleRuleIDs) })
	e.waitCommittedToEnd(t)
	verdicts := map[string]int{}
	for _, m := range verdictLog.snapshot() {
		verdicts[e.verdict(t, m).EventID]++
	}
	for _, id := range ids {
		for _, rule := range exampleRuleIDs {
			if n := verdicts[schemas.VerdictEventID(tenant, id, rule)]; n != 1 {
				t.Errorf("%d verdict events for %s rule %s, want 1", n, id, rule)
			}
		}
	}
	if len(verdicts) != len(ids)*len(exampleRuleIDs) {
		t.Errorf("%d verdict events, want %d: only the replayed requests are judged", len(verdicts), len(ids)*len(exampleRuleIDs))
	}
	summaries := map[string]int{}
	for _, m := range summaryLog.snapshot() {
		summaries[e.summary(t, m).RequestID]++
	}
	for _, id := range []string{"other-tenant", "broken-ruleset", "too-often"} {
		if summaries[id] != 1 {
			t.Errorf("%d summaries for %s, want its one failed summary", summaries[id], id)
		}
	}
	if seen := ticketsSeen(e.llm); len(seen) != len(ids) || !hasAllKeys(seen, ids) {
		t.Errorf("the model was asked about %v, want the replayed requests only", seen)
	}
	status := func(tenantID, id string) jobs.Status {
		j, found, err := jobStore.Get(t.Context(), tenantID, id)
		if err != nil || !found {
			t.Fatalf("job %s/%s: found %v, %v", tenantID, id, found, err)
		}
		return j.Status
	}
	for _, id := range ids {
		if s := status(tenant, id); s != jobs.Completed {
			t.Errorf("job %s is %s, want completed", id, s)
		}
	}
	for _, j := range [][2]string{{"fabrikam", "other-tenant"}, {tenant, "broken-ruleset"}, {tenant, "too-often"}} {
		if s := status(j[0], j[1]); s != jobs.Failed {
			t.Errorf("job %s of %s is %s, want failed, untouched", j[1], j[0], s)
		}
	}

	// Run again: nothing is sent.
	requestsEnd = opEndOffsets(t, e.bootstrap, e.requests, e.partitions)
	code, stdout, stderr = opRun(t, replayArgs...)
	if code != exitOK {
		t.Fatalf("replay again: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, id := range ids {
		if !lineWith(stdout, id, "skipped: replayed at") {
			t.Errorf("the repeated replay does not skip %s:\n%s", id, stdout)
		}
	}
	if strings.Contains(stdout, "sent to") {
		t.Errorf("the repeated replay sent something:\n%s", stdout)
	}
	if end := opEndOffsets(t, e.bootstrap, e.requests, e.partitions); !slices.Equal(end, requestsEnd) {
		t.Errorf("the repeated replay wrote to the requests topic: end offsets %v, were %v", end, requestsEnd)
	}
}

// lineWith says whether a line of out names request id and says what.
func lineWith(out, id, what string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "request "+id+" ") && strings.Contains(line, what) {
			return true
		}
	}
	return false
}

func hasAllKeys[V any](m map[string]V, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}
