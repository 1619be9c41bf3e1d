package anchor_test

import (
	"fmt"

	"rulevalidator/engine/anchor"
)

func ExampleMatcher_Find() {
	docs := []anchor.Document{{Name: "contract.pdf", Pages: []string{
		"MASTER SUPPLY AGREEMENT",
		"The Seller shall deliver the Goods to the Buyer’s warehouse\nwithin thirty (30) days.",
	}}}
	m, err := anchor.New(docs, anchor.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range []anchor.Quote{
		{Text: "deliver the Goods", Origin: "contract.pdf", Page: 2},
		{Text: `"the buyer's warehouse within thirty (30) days"`, Origin: "contract.pdf", Page: 2},
		{Text: "The Seller must deliver the goods to the Buyer's warehouse", Origin: "contract.pdf"},
		{Text: "The Buyer may return the Goods at any time", Origin: "contract.pdf"},
	} {
		s, ok := m.Find(q)
		if !ok {
			fmt.Printf("unanchored: %q\n", q.Text)
			continue
		}
		fmt.Printf("%s: page %d, code points [%d, %d), similarity %.2f: %q\n", s.Method, s.Page, s.Start, s.End, s.Similarity, s.Text)
	}
	// Output:
	// exact: page 2, code points [41, 58), similarity 1.00: "deliver the Goods"
	// normalized: page 2, code points [62, 107), similarity 1.00: "the Buyer’s warehouse\nwithin thirty (30) days"
	// fuzzy: page 2, code points [24, 83), similarity 0.92: "The Seller shall deliver the Goods to the Buyer’s warehouse"
	// unanchored: "The Buyer may return the Goods at any time"
}
