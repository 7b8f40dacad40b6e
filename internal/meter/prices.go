package meter

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/yamlx"
)

// MaxPriceFileSize bounds a price file (bytes).
const MaxPriceFileSize = 1 << 20

//go:embed prices.yaml
var defaultPrices []byte

// DefaultPricesFile is the name the shipped price table is reported under in errors.
const DefaultPricesFile = "internal/meter/prices.yaml"

// Price is one model's list price, in US dollars per million tokens.
type Price struct {
	// Input is the price of input tokens not read from a cache (Anthropic: usage.input_tokens;
	// OpenAI: input/prompt tokens minus the cached ones).
	Input float64 `json:"input"`
	// Output is the price of output tokens (reasoning tokens included).
	Output float64 `json:"output"`
	// CacheRead is the price of input tokens read from the prompt cache.
	CacheRead float64 `json:"cache_read"`
	// CacheWrite is the price of input tokens written to the cache (Anthropic's 5-minute
	// cache; OpenAI does not charge for cache writes: 0).
	CacheWrite float64 `json:"cache_write"`
	// CacheWrite1h is the price of tokens written to Anthropic's 1-hour cache, when the API
	// reports them apart (usage.cache_creation.ephemeral_1h_input_tokens); 0 in the file
	// means "same as CacheWrite".
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
	// LongContext, when set, replaces the prices above for a whole call whose prompt (input,
	// cache reads and cache writes) is over its threshold.
	LongContext *LongContext `json:"long_context,omitempty"`
}

// LongContext is a model's price for calls with a long prompt.
type LongContext struct {
	// AbovePromptTokens is the threshold: a prompt of more tokens is priced with Price.
	AbovePromptTokens int64 `json:"above_prompt_tokens"`
	Price             Price `json:"price"`
}

// PriceTable maps model names to prices. A model's price is found by its exact name, else by
// the documented snapshot rule: a model named NAME-YYYYMMDD or NAME-YYYY-MM-DD (a dated
// snapshot, as both APIs answer) takes NAME's price. No other prefix matches, so a model the
// table does not name has no price (cost unknown, never 0).
type PriceTable struct {
	// Path is the file the table was read from.
	Path string `json:"path"`
	// Taken is the date the prices were taken from their sources.
	Taken string `json:"taken"`
	// Models maps a model name to its price.
	Models map[string]Price `json:"models"`
}

// DefaultPrices returns the price table shipped with pab (internal/meter/prices.yaml).
func DefaultPrices() *PriceTable {
	t, err := ParsePrices(DefaultPricesFile, defaultPrices)
	if err != nil {
		panic(err) // the shipped file is checked by TestDefaultPrices
	}
	return t
}

// LoadPrices reads a price file (the shipped file's format: see internal/meter/prices.yaml).
// Errors name the file and line.
func LoadPrices(path string) (*PriceTable, error) {
	data, err := readlimit.File(path, MaxPriceFileSize)
	if err != nil {
		return nil, err
	}
	return ParsePrices(path, data)
}

var snapshotSuffix = regexp.MustCompile(`-(?:\d{8}|\d{4}-\d{2}-\d{2})$`)

// Lookup returns the price of model and the table's name it matched (see PriceTable).
func (t *PriceTable) Lookup(model string) (Price, string, bool) {
	if t == nil || model == "" {
		return Price{}, "", false
	}
	if p, ok := t.Models[model]; ok {
		return p, model, true
	}
	if loc := snapshotSuffix.FindStringIndex(model); loc != nil {
		base := model[:loc[0]]
		if p, ok := t.Models[base]; ok {
			return p, base, true
		}
	}
	return Price{}, "", false
}

// Cost returns the cost in US dollars of a call's usage at price p. For the OpenAI APIs,
// whose input count includes the cached tokens, the cached tokens are taken out of the input
// before pricing (c.API says which API).
func (p Price) Cost(c *Call) float64 {
	input := c.InputTokens
	if c.API != APIMessages {
		input -= c.CacheReadTokens
		if input < 0 {
			input = 0
		}
	}
	prompt := input + c.CacheReadTokens + c.CacheWriteTokens
	if p.LongContext != nil && prompt > p.LongContext.AbovePromptTokens {
		p = p.LongContext.Price
	}
	w1h := c.CacheWrite1hTokens
	if w1h > c.CacheWriteTokens {
		w1h = c.CacheWriteTokens
	}
	rate1h := p.CacheWrite1h
	if rate1h == 0 {
		rate1h = p.CacheWrite
	}
	usd := float64(input)*p.Input + float64(c.OutputTokens)*p.Output + float64(c.CacheReadTokens)*p.CacheRead +
		float64(c.CacheWriteTokens-w1h)*p.CacheWrite + float64(w1h)*rate1h
	return usd / 1e6
}

// ParsePrices reads a price table from data (path names it in errors). The format:
//
//	taken: 2026-12-06          # the date the prices were taken
//	models:
//	  claude-sonnet-5-5:       # a model name as the API answers it (see PriceTable)
//	    input: 2               # US dollars per million tokens
//	    output: 10
//	    cache_read: 0.20
//	    cache_write: 2.50
//	    cache_write_1h: 4      # optional
//	    long_context:          # optional
//	      above_prompt_tokens: 272000
//	      input: 10
//	      ...
//
// Every price is a finite number ≥ 0; input, output, cache_read and cache_write are required.
func ParsePrices(path string, data []byte) (*PriceTable, error) {
	doc, err := yamlx.Parse(path, data, MaxPriceFileSize)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: empty price file: it needs taken and models", path)
	}
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	t := &PriceTable{Path: path, Models: map[string]Price{}}
	var seenModels bool
	err = yamlx.Fields(path, root, "price file", []string{"taken", "models"}, func(key string, v *yaml.Node) error {
		switch key {
		case "taken":
			if v.Kind != yaml.ScalarNode {
				return yamlx.Errorf(path, v, "taken: want a date YYYY-MM-DD, got %s", yamlx.KindName(v))
			}
			if _, err := time.Parse("2006-01-02", v.Value); err != nil {
				return yamlx.Errorf(path, v, "taken: want a date YYYY-MM-DD, got %q", v.Value)
			}
			t.Taken = v.Value
		case "models":
			seenModels = true
			if v.Kind != yaml.MappingNode {
				return yamlx.Errorf(path, v, "models: want a mapping of model names to prices, got %s", yamlx.KindName(v))
			}
			var names []string
			for i := 0; i+1 < len(v.Content); i += 2 {
				names = append(names, v.Content[i].Value)
			}
			return yamlx.Fields(path, v, "models", names, func(name string, pv *yaml.Node) error {
				if strings.TrimSpace(name) != name || name == "" || strings.ContainsAny(name, " \t*") {
					return yamlx.Errorf(path, pv, "models: %q is not a model name (no spaces or wildcards: see the snapshot rule)", name)
				}
				p, err := parsePrice(path, pv, "models."+name, true)
				if err != nil {
					return err
				}
				t.Models[name] = p
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.Taken == "" {
		return nil, fmt.Errorf("%s: taken: missing (the date the prices were taken, YYYY-MM-DD)", path)
	}
	if !seenModels || len(t.Models) == 0 {
		return nil, fmt.Errorf("%s: models: missing or empty", path)
	}
	return t, nil
}

func parsePrice(path string, n *yaml.Node, what string, top bool) (Price, error) {
	var p Price
	known := []string{"input", "output", "cache_read", "cache_write", "cache_write_1h"}
	if top {
		known = append(known, "long_context")
	} else {
		known = append(known, "above_prompt_tokens")
	}
	set := map[string]bool{}
	var above int64 = -1
	err := yamlx.Fields(path, n, what, known, func(key string, v *yaml.Node) error {
		set[key] = true
		if key == "long_context" {
			lp, err := parsePrice(path, v, what+".long_context", false)
			if err != nil {
				return err
			}
			p.LongContext = lp.LongContext
			return nil
		}
		if key == "above_prompt_tokens" {
			n, err := strconv.ParseInt(v.Value, 10, 64)
			if v.Kind != yaml.ScalarNode || err != nil || n <= 0 {
				return yamlx.Errorf(path, v, "%s.%s: want a whole number of tokens > 0, got %q", what, key, v.Value)
			}
			above = n
			return nil
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return yamlx.Errorf(path, v, "%s.%s: want a price in US dollars per million tokens (a number ≥ 0), got %q", what, key, v.Value)
		}
		switch key {
		case "input":
			p.Input = f
		case "output":
			p.Output = f
		case "cache_read":
			p.CacheRead = f
		case "cache_write":
			p.CacheWrite = f
		case "cache_write_1h":
			p.CacheWrite1h = f
		}
		return nil
	})
	if err != nil {
		return Price{}, err
	}
	var missing []string
	for _, k := range []string{"input", "output", "cache_read", "cache_write"} {
		if !set[k] {
			missing = append(missing, k)
		}
	}
	if !top && above < 0 {
		missing = append(missing, "above_prompt_tokens")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return Price{}, yamlx.Errorf(path, n, "%s: missing %s", what, strings.Join(missing, ", "))
	}
	if !top {
		inner := p
		inner.LongContext = nil
		return Price{LongContext: &LongContext{AbovePromptTokens: above, Price: inner}}, nil
	}
	return p, nil
}

// OpenPrices returns the table read from path when path is not empty (LoadPrices), else the
// shipped one (DefaultPrices).
func OpenPrices(path string) (*PriceTable, error) {
	if path == "" {
		return DefaultPrices(), nil
	}
	return LoadPrices(path)
}
