package guard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestTracerCleansEvents(t *testing.T) {
	var buf bytes.Buffer
	tr := NewTracer(&buf, "")
	if !strings.HasPrefix(tr.ID(), "trace-") {
		t.Fatal(tr.ID())
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.Emit(Event{Type: "policy.decision", URL: "https://x.example/p?email=jane@x.com#f", Domain: "X.Example",
				Detail: map[string]any{"tool": "browser_type", "text": "secret typed value", "value": "v", "count": 3, "nested": map[string]any{}}})
		}()
	}
	wg.Wait()
	tr.Emit(Event{Type: "bogus", Detail: map[string]any{"tool": "x"}})
	tr.Emit(Event{Type: "run.paused", PauseReason: "captcha"})
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.Contains(line, "secret") || strings.Contains(line, "jane@") || strings.Contains(line, `"value"`) || strings.Contains(line, "nested") {
			t.Errorf("leaked: %s", line)
		}
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.At == "" {
			t.Errorf("bad line %s", line)
		}
	}
	if n != 22 || tr.Count() != 22 {
		t.Fatalf("lines %d count %d", n, tr.Count())
	}
	var nilTracer *Tracer
	nilTracer.Emit(Event{Type: "note"}) // must not panic
}

func TestValidateResult(t *testing.T) {
	good := []struct{ name, json, outcome string }{
		{"review", `{"runId":"r","outcome":"awaiting_review","mode":"fill_and_review","traceId":"t","engineAuth":"unknown","filled":3,"uploaded":["resume","resume","x"]}`, "awaiting_review"},
		{"submitted", `{"runId":"r","outcome":"submitted","mode":"auto_submit","traceId":"t","engineAuth":"unknown","submitted":{"url":"https://x.example/done","at":"2026-11-29T10:00:00Z","gateId":"g"}}`, "submitted"},
		{"blocked unknown reason", `{"runId":"r","outcome":"blocked","mode":"fill_and_review","traceId":"t","engineAuth":"unknown","blockReason":"weird","questions":["  q1 ",""," "]}`, "blocked"},
		{"failed no error", `{"runId":"r","outcome":"failed","mode":"fill_and_review","traceId":"t","engineAuth":"unknown"}`, "failed"},
	}
	for _, g := range good {
		r, err := ValidateResult([]byte(g.json))
		if err != nil || r.Outcome != g.outcome {
			t.Errorf("%s: %v %+v", g.name, err, r)
		}
	}
	r, _ := ValidateResult([]byte(good[0].json))
	if len(r.Uploaded) != 1 || r.Filled != 3 {
		t.Errorf("uploaded/filled %+v", r)
	}
	r, _ = ValidateResult([]byte(good[2].json))
	if r.BlockReason != "incomplete" || len(r.Questions) != 1 || r.Questions[0] != "q1" {
		t.Errorf("blocked normalization %+v", r)
	}
	r, _ = ValidateResult([]byte(good[1].json))
	if !r.SubmitAttempted {
		t.Error("submitted implies submitAttempted")
	}
	r, _ = ValidateResult([]byte(good[3].json))
	if r.Error == "" {
		t.Error("failed needs an error")
	}
	bad := map[string]string{
		"not json":          `{`,
		"array":             `[]`,
		"no runId":          `{"outcome":"awaiting_review","mode":"fill_and_review","traceId":"t","engineAuth":"unknown"}`,
		"bad outcome":       `{"runId":"r","outcome":"done","mode":"fill_and_review","traceId":"t","engineAuth":"unknown"}`,
		"no mode":           `{"runId":"r","outcome":"awaiting_review","traceId":"t","engineAuth":"unknown"}`,
		"no trace":          `{"runId":"r","outcome":"awaiting_review","mode":"fill_and_review","engineAuth":"unknown"}`,
		"bad auth":          `{"runId":"r","outcome":"awaiting_review","mode":"fill_and_review","traceId":"t","engineAuth":"root"}`,
		"submitted in f&r":  `{"runId":"r","outcome":"submitted","mode":"fill_and_review","traceId":"t","engineAuth":"unknown","submitted":{"url":"https://x/","at":"2026-11-29T10:00:00Z","gateId":"g"}}`,
		"submitted no gate": `{"runId":"r","outcome":"submitted","mode":"auto_submit","traceId":"t","engineAuth":"unknown","submitted":{"url":"https://x/","at":"2026-11-29T10:00:00Z"}}`,
		"submitted bad url": `{"runId":"r","outcome":"submitted","mode":"auto_submit","traceId":"t","engineAuth":"unknown","submitted":{"url":"data:x","at":"2026-11-29T10:00:00Z","gateId":"g"}}`,
		"submitted bad at":  `{"runId":"r","outcome":"submitted","mode":"auto_submit","traceId":"t","engineAuth":"unknown","submitted":{"url":"https://x/","at":"yesterday","gateId":"g"}}`,
	}
	for name, j := range bad {
		if _, err := ValidateResult([]byte(j)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzValidateResult(f *testing.F) {
	f.Add([]byte(`{"runId":"r","outcome":"blocked","mode":"auto_submit","traceId":"t","engineAuth":"unknown","questions":["a"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ValidateResult(data)
		if err != nil {
			return
		}
		again, _ := json.Marshal(r)
		if _, err := ValidateResult(again); err != nil {
			t.Fatalf("a validated result does not validate again: %v %s", err, again)
		}
	})
}
