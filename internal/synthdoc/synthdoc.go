// Package synthdoc generates long contract-like documents for tests and
// benchmarks of long-document planning: each page is a section on one topic
// of a services agreement, written from that topic's vocabulary and generic
// contract language, so that lexical retrieval behaves as on real contracts
// (topic words cluster on few pages, filler words are everywhere).
package synthdoc

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Topic is a subject a section of the contract is about.
type Topic struct {
	Title string
	Words []string
}

// Topics of the generated contract, in page order (page n is about
// Topics[(n-1) % len(Topics)]).
var Topics = []Topic{
	{"Payment Terms", []string{"invoice", "payment", "net", "days", "remittance", "currency", "overdue", "interest"}},
	{"Termination", []string{"termination", "notice", "breach", "cure", "period", "terminate", "convenience", "insolvency"}},
	{"Confidentiality", []string{"confidential", "disclosure", "information", "recipient", "discloser", "secrecy", "safeguard"}},
	{"Indemnification", []string{"indemnify", "indemnification", "losses", "claims", "defend", "hold", "harmless", "third-party"}},
	{"Limitation of Liability", []string{"liability", "damages", "cap", "consequential", "indirect", "aggregate", "exclusion"}},
	{"Governing Law", []string{"governing", "law", "jurisdiction", "courts", "venue", "statute", "construed"}},
	{"Insurance", []string{"insurance", "coverage", "policy", "insurer", "premium", "certificate", "insured"}},
	{"Audit Rights", []string{"audit", "records", "inspection", "auditor", "books", "access", "examine"}},
	{"Data Protection", []string{"personal", "data", "processing", "controller", "processor", "subject", "gdpr"}},
	{"Force Majeure", []string{"force", "majeure", "flood", "epidemic", "strike", "beyond", "control"}},
	{"Warranties", []string{"warranty", "defects", "remedy", "workmanlike", "merchantability", "fitness", "repair"}},
	{"Intellectual Property", []string{"intellectual", "property", "license", "ownership", "patent", "copyright", "royalty"}},
	{"Assignment and Subcontracting", []string{"assignment", "subcontract", "subcontractor", "consent", "transfer", "delegate"}},
	{"Non-Solicitation", []string{"solicit", "employees", "hire", "recruit", "personnel", "poach"}},
	{"Dispute Resolution", []string{"dispute", "arbitration", "mediation", "arbitrator", "tribunal", "escalation"}},
	{"Service Levels", []string{"service", "levels", "uptime", "availability", "credits", "response", "resolution"}},
	{"Price Adjustment", []string{"price", "adjustment", "indexation", "inflation", "index", "increase", "annual"}},
	{"Delivery and Acceptance", []string{"delivery", "acceptance", "testing", "deliverables", "reject", "criteria"}},
	{"Taxes", []string{"taxes", "withholding", "vat", "gross", "deduction", "tax"}},
	{"Anti-Bribery", []string{"bribery", "corruption", "kickback", "official", "improper", "facilitation"}},
	{"Export Control", []string{"export", "sanctions", "embargo", "controlled", "licence", "re-export"}},
	{"Notices", []string{"notices", "address", "writing", "courier", "email", "registered"}},
	{"Term and Renewal", []string{"term", "renewal", "expiry", "extension", "renew", "initial"}},
	{"Security Incidents", []string{"security", "incident", "notification", "vulnerability", "encryption", "intrusion"}},
	{"Business Continuity", []string{"continuity", "disaster", "recovery", "backup", "failover", "resilience"}},
}

var filler = []string{
	"The parties acknowledge that",
	"Notwithstanding the foregoing,",
	"Except as otherwise provided in this Agreement,",
	"Subject to the terms and conditions set out herein,",
	"For the avoidance of doubt,",
	"Without prejudice to any other right or remedy,",
	"In accordance with the schedules attached to this Agreement,",
	"To the extent permitted by applicable regulations,",
}

var generic = []string{
	"agreement", "party", "parties", "supplier", "customer", "obligations", "reasonable", "efforts",
	"schedule", "clause", "provisions", "effect", "writing", "time", "applicable", "respect",
	"performance", "services", "representatives", "affiliates", "good", "faith", "commercially",
}

// Pages returns n pages of about pageBytes bytes each, reproducible from
// seed.
func Pages(n, pageBytes int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pages := make([]string, n)
	for i := range pages {
		pages[i] = page(rng, i+1, pageBytes)
	}
	return pages
}

// TopicOf is the topic page (1-based) is about.
func TopicOf(page int) Topic { return Topics[(page-1)%len(Topics)] }

func page(rng *rand.Rand, number, size int) string {
	t := TopicOf(number)
	var b strings.Builder
	fmt.Fprintf(&b, "Section %d. %s\n\n", number, t.Title)
	para := 0
	for b.Len() < size {
		b.WriteString(sentence(rng, t))
		para++
		if para%4 == 0 {
			b.WriteString("\n\n")
		} else {
			b.WriteString(" ")
		}
	}
	return strings.TrimRight(b.String(), " \n") + "\n"
}

func sentence(rng *rand.Rand, t Topic) string {
	var b strings.Builder
	b.WriteString(filler[rng.IntN(len(filler))])
	words := 8 + rng.IntN(10)
	for range words {
		b.WriteByte(' ')
		if rng.IntN(3) == 0 {
			b.WriteString(t.Words[rng.IntN(len(t.Words))])
		} else {
			b.WriteString(generic[rng.IntN(len(generic))])
		}
	}
	b.WriteByte('.')
	return b.String()
}

// RuleText is a rule about topic t, worded as compliance rules are.
func RuleText(t Topic) string {
	return fmt.Sprintf("The agreement must contain a %s clause that addresses %s.",
		strings.ToLower(t.Title), strings.Join(t.Words[:min(4, len(t.Words))], ", "))
}
