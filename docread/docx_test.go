package docread_test

import (
	"context"
	"fmt"
	"testing"

	"rulevalidator/docread"
)

// A DOCX's pages end at explicit page breaks and at the breaks Word last
// rendered, one break counted once.
func TestDOCXPages(t *testing.T) {
	r := newReader(t, docread.Config{})
	p := func(runs string) string { return "<w:p>" + runs + "</w:p>" }
	run := func(text string) string { return "<w:r><w:t>" + text + "</w:t></w:r>" }
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"one page", p(run("a")) + p(run("b")), []string{"a\nb\n"}},
		{"explicit break", p(run("a") + `<w:r><w:br w:type="page"/></w:r>` + run("b")), []string{"a", "b\n"}},
		{"rendered break", p(run("a")) + p(`<w:r><w:lastRenderedPageBreak/><w:t>b</w:t></w:r>`), []string{"a\n", "b\n"}},
		{"explicit then rendered is one break", p(run("a")+`<w:r><w:br w:type="page"/></w:r>`) + p(`<w:r><w:lastRenderedPageBreak/><w:t>b</w:t></w:r>`), []string{"a", "\nb\n"}},
		{"two explicit breaks leave a blank page", p(run("a") + `<w:r><w:br w:type="page"/><w:br w:type="page"/></w:r>` + run("b")), []string{"a", "", "b\n"}},
		{"page break before", p(run("a")) + `<w:p><w:pPr><w:pageBreakBefore/></w:pPr>` + run("b") + `</w:p>`, []string{"a\n", "b\n"}},
		{"page break before, off", p(run("a")) + `<w:p><w:pPr><w:pageBreakBefore w:val="false"/></w:pPr>` + run("b") + `</w:p>`, []string{"a\nb\n"}},
		{"section break on a new page", `<w:p><w:pPr><w:sectPr><w:type w:val="nextPage"/></w:sectPr></w:pPr>` + run("a") + `</w:p>` + p(run("b")), []string{"a\n", "b\n"}},
		{"continuous section break", `<w:p><w:pPr><w:sectPr><w:type w:val="continuous"/></w:sectPr></w:pPr>` + run("a") + `</w:p>` + p(run("b")), []string{"a\nb\n"}},
		{"line breaks, tabs, hyphens", p(run("a") + `<w:r><w:br/><w:tab/><w:noBreakHyphen/><w:t>b</w:t></w:r>`), []string{"a\n\t-b\n"}},
		{"deleted text and field codes left out", p(run("kept") + `<w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:instrText>PAGE</w:instrText></w:r>`), []string{"kept\n"}},
		{"tab stops are not tabs", `<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>` + run("a") + `</w:p>`, []string{"a\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := r.Read(context.Background(), docread.Source{Name: "a.docx", Data: docxOf(t, tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%q", doc.Pages), fmt.Sprintf("%q", tc.want); got != want {
				t.Errorf("pages %s, want %s", got, want)
			}
		})
	}
}

// The main part is the one the package relationships name.
func TestDOCXMainPartFromRelationships(t *testing.T) {
	r := newReader(t, docread.Config{})
	data := zipOf(t, map[string]string{
		"_rels/.rels":        `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document2.xml"/></Relationships>`,
		"word/document.xml":  `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>decoy</w:t></w:r></w:p></w:body></w:document>`,
		"word/document2.xml": `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>main</w:t></w:r></w:p></w:body></w:document>`,
	})
	doc, err := r.Read(context.Background(), docread.Source{Name: "a.docx", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%q", doc.Pages) != `["main\n"]` {
		t.Fatalf("pages %q", doc.Pages)
	}
}
