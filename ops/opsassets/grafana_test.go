package opsassets

import (
	"encoding/json"
	"strings"
	"testing"
)

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Query      any         `json:"query"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // of a collapsed row
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

const dashboardFile = "ops/grafana/rulevalidator.json"

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(repoFile(t, dashboardFile)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows, collapsed or not.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed for provisioning and links", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d predates datasource references by uid (36)", d.SchemaVersion)
	}
	var dsVar string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("no datasource variable of type prometheus: the dashboard would be tied to one data source")
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != dsVar) {
			t.Errorf("variable %s does not query through %s", v.Name, dsVar)
		}
	}

	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at column %d, row %d", other, p.Title, x, y)
					break
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != dsVar {
			t.Errorf("panel %q does not use the data source variable %s", p.Title, dsVar)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && tg.Datasource.UID != dsVar {
				t.Errorf("panel %q query %s uses data source %q, not %s", p.Title, tg.RefID, tg.Datasource.UID, dsVar)
			}
		}
	}
}

// TestDashboardQueriesExportedMetrics checks every query against the metrics
// package, and that every metric it exports appears on some panel.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	d := readDashboard(t)
	exported := exportedSeries(t)
	shown := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			for _, err := range checkExpr(exported, tg.Expr) {
				t.Errorf("panel %q, query %s: %v", p.Title, tg.RefID, err)
			}
			sels, _ := selectors(tg.Expr)
			for _, s := range sels {
				if info, ok := exported[s.name]; ok {
					shown[info.family] = true
				}
			}
		}
	}
	for name, info := range exported {
		if strings.HasPrefix(name, "rulevalidator_") && !shown[info.family] {
			t.Errorf("no panel shows %s", info.family)
		}
	}
}
