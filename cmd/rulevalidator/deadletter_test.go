package main

import (
	"strings"
	"testing"
	"time"

	"rulevalidator/replay"
	"rulevalidator/schemas"
)

func TestDeadLetterCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		said string
	}{
		{[]string{"deadletter"}, exitInvalid, "usage: rulevalidator deadletter <list|replay>"},
		{[]string{"deadletter", "--help"}, exitOK, "send the selected dead letters' requests to the requests topic again"},
		{[]string{"deadletter", "drop"}, exitInvalid, `deadletter: unknown command "drop"`},
		{[]string{"deadletter", "replay", "--help"}, exitOK, "RULEVALIDATOR_TOPIC_REPLAYS"},
		{[]string{"deadletter", "replay", "--help"}, exitOK, "--dry-run"},
		{[]string{"deadletter", "list", "--help"}, exitOK, "Nothing is written."},
		{[]string{"deadletter", "list", "--dry-run"}, exitInvalid, "flag provided but not defined: -dry-run"},
		{[]string{"deadletter", "list", "--reason", "unknown_ruleset,nope"}, exitInvalid, `--reason: "nope" is not a dead-letter reason (known: undecodable,`},
		{[]string{"deadletter", "replay", "--ruleset", "@1.0.0"}, exitInvalid, `--ruleset: "@1.0.0" names no ruleset id`},
		{[]string{"deadletter", "replay", "--since", "yesterday"}, exitInvalid, `--since: "yesterday" is neither a time in RFC 3339`},
		{[]string{"deadletter", "replay", "--since", "1h", "--until", "2h"}, exitInvalid, "is not before --until"},
		{[]string{"deadletter", "replay", "--max-replays", "0"}, exitInvalid, "--max-replays: 0 must be at least 1"},
		{[]string{"deadletter", "replay", "--replays-topic="}, exitInvalid, "--replays-topic are required"},
		{[]string{"deadletter", "list", "--kafka-brokers", " , "}, exitInvalid, "--kafka-brokers: at least one broker is required"},
		{[]string{"deadletter", "list", "--kafka-brokers", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "127.0.0.1:1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := opRun(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.said) {
				t.Errorf("exit %d, want %d saying %q\nstdout: %s\nstderr: %s", code, tc.code, tc.said, stdout, stderr)
			}
		})
	}
}

func TestDeadLetterOutcomeLine(t *testing.T) {
	failed := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	version := "1.0.0"
	d := &replay.DeadLetter{
		At: replay.Position{Topic: "rulevalidator.deadletter", Partition: 0, Offset: 3},
		Letter: &schemas.DeadLetter{OriginalTopic: "rulevalidator.requests", OriginalPartition: 2, OriginalOffset: 43,
			OriginalKey: []byte("r-1"), Reason: schemas.ReasonUnknownRuleset, FailedAt: failed},
		Request: &schemas.Request{RequestID: "r-1", TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: "contract-review", Version: &version}},
		Replays: 1,
	}
	head := "request r-1  tenant acme  ruleset contract-review@1.0.0  reason unknown_ruleset  failed 2026-03-04T12:00:00Z  from rulevalidator.requests 2:43  replays 1  "
	tail := "  [rulevalidator.deadletter 0:3]"
	for _, tc := range []struct {
		out  replay.Outcome
		want string
	}{
		{replay.Outcome{DeadLetter: d, Status: replay.StatusReplayable}, "would send"},
		{replay.Outcome{DeadLetter: d, Status: replay.StatusSent, Marker: &replay.Marker{Replay: 2, SentTo: replay.Position{Topic: "rulevalidator.requests", Partition: 1, Offset: 90}}},
			"sent to rulevalidator.requests 1:90 as replay 2"},
		{replay.Outcome{DeadLetter: d, Status: replay.StatusReplayed, Why: "replayed at X"}, "skipped: replayed at X"},
		{replay.Outcome{DeadLetter: d, Status: replay.StatusRefused, Why: "too often"}, "refused: too often"},
		{replay.Outcome{DeadLetter: d, Status: replay.StatusNotReplayable, Why: "undecodable"}, "not replayable: undecodable"},
	} {
		if got := deadLetterOutcomeLine(tc.out); got != head+tc.want+tail {
			t.Errorf("%s:\n got %s\nwant %s", tc.out.Status, got, head+tc.want+tail)
		}
	}
	unreadable := replay.Outcome{DeadLetter: &replay.DeadLetter{At: d.At}, Status: replay.StatusNotReplayable, Why: "not a readable dead letter"}
	if got, want := deadLetterOutcomeLine(unreadable), "request -  tenant -  ruleset -  replays 0  not replayable: not a readable dead letter"+tail; got != want {
		t.Errorf("unreadable:\n got %s\nwant %s", got, want)
	}
}
