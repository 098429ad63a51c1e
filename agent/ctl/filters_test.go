package ctl

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/datapath/filters"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
)

// filterSrc is a Source with a live filter set and nothing else.
type filterSrc struct{ set *filters.Set }

func (filterSrc) PortInfos() []pipeline.PortInfo              { return nil }
func (filterSrc) TableInfos() []pipeline.TableInfo            { return nil }
func (filterSrc) Flows() []pipeline.FlowInfo                  { return nil }
func (filterSrc) Backend() gpu.EngineStats                    { return gpu.EngineStats{} }
func (filterSrc) Stats() Stats                                { return Stats{} }
func (filterSrc) Groups() []pipeline.GroupInfo                { return nil }
func (filterSrc) Meters() []pipeline.MeterInfo                { return nil }
func (s filterSrc) Filters() []filters.Info                   { return s.set.Filters() }
func (s filterSrc) FilterInfo(n string) (filters.Info, error) { return s.set.Info(n) }
func (s filterSrc) AddFilter(c filters.Config) error          { return s.set.Add(c) }
func (s filterSrc) DeleteFilter(n string) error               { return s.set.Delete(n) }

func do(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w
}

func TestFiltersHandler(t *testing.T) {
	set := filters.New(filters.Options{})
	defer set.Close()
	h := Handler(filterSrc{set})
	cases := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/v1/filters", "", 200, "[]"},
		{"POST", "/v1/filters", `{"Name":"web","Expression":"tcp port 80","Ports":[1]}`, 200, `"Name":"web"`},
		{"POST", "/v1/filters", `{"Name":"web","Expression":"udp"}`, 409, "exists"},
		{"POST", "/v1/filters", `{"Name":"bad","Expression":"tcp port"}`, 400, "filter bad: position"},
		{"POST", "/v1/filters", `{"Name":"x","Expression":"tcp","Bogus":1}`, 400, "unknown field"},
		{"POST", "/v1/filters", `not json`, 400, "bad request"},
		{"GET", "/v1/filters/web", "", 200, `"Expression":"tcp port 80"`},
		{"GET", "/v1/filters/nope", "", 404, "no such filter"},
		{"PUT", "/v1/filters/web", "", 405, "want GET"},
		{"DELETE", "/v1/filters/web", "", 200, `"Name":"web"`},
		{"DELETE", "/v1/filters/web", "", 404, "no such filter"},
	}
	for _, c := range cases {
		w := do(h, c.method, c.path, c.body)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s %s: %d %s, want %d containing %q", c.method, c.path, c.body, w.Code, w.Body, c.code, c.want)
		}
	}
	// A Source without filters answers an empty list and refuses adds.
	h = Handler(fakeSource{})
	if w := do(h, "GET", "/v1/filters", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("no FilterSource: %d %s", w.Code, w.Body)
	}
	if w := do(h, "POST", "/v1/filters", `{"Name":"a","Expression":"tcp"}`); w.Code != 404 {
		t.Errorf("no FilterSource add: %d %s", w.Code, w.Body)
	}
}

// FuzzFilterRequest: any body POSTed to /v1/filters gets a JSON answer
// (200 or an error with a message) and never panics; a filter it added is
// listed.
func FuzzFilterRequest(f *testing.F) {
	for _, s := range []string{`{"Name":"web","Expression":"tcp port 80","Ports":[1,2]}`,
		`{"Name":"c","Expression":"udp","Capture":{"File":"","MaxBytes":-1}}`, `{"Name":"","Expression":""}`,
		`{"Name":"v","Expression":"vlan 10 and (ip6 or arp)"}`, `[]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		set := filters.New(filters.Options{})
		defer set.Close()
		var req FilterRequest
		if json.Unmarshal([]byte(body), &req) == nil && req.Capture != nil {
			return // the fuzzer must not write files
		}
		h := Handler(filterSrc{set})
		w := do(h, "POST", "/v1/filters", body)
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("answer %q is not a JSON object: %v", w.Body, err)
		}
		switch w.Code {
		case 200:
			if len(set.Filters()) != 1 {
				t.Fatal("200 without a filter")
			}
		default:
			if msg, _ := v["error"].(string); msg == "" || len(set.Filters()) != 0 || bytes.ContainsRune([]byte(msg), '\n') {
				t.Fatalf("%d %q: want a one-line error and no filter", w.Code, w.Body)
			}
		}
	})
}
